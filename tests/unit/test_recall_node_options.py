"""The benchmark node's JVM options (`python -m infra.local.opensearch start --heap 1g --full-jit`):
a fixed heap and, when asked, the C2 compiler; everything else as the test node has it."""

from __future__ import annotations

from infra.local.opensearch import JVM_OPTIONS, sized_options


def test_a_sized_heap_is_fixed_and_the_rest_is_kept() -> None:
    options = sized_options("1g")
    assert options[:2] == ("-Xms1g", "-Xmx1g")
    assert [o for o in options if o.startswith(("-Xms", "-Xmx"))] == ["-Xms1g", "-Xmx1g"]
    assert set(options[2:]) == {o for o in JVM_OPTIONS if not o.startswith(("-Xms", "-Xmx"))}


def test_full_jit_drops_only_the_c1_ceiling() -> None:
    assert "-XX:TieredStopAtLevel=1" in sized_options("512m")
    full = sized_options("512m", full_jit=True)
    assert "-XX:TieredStopAtLevel=1" not in full
    assert set(sized_options("512m")) - set(full) == {"-XX:TieredStopAtLevel=1"}
