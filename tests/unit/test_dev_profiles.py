"""What a `dovecote dev` writes into the profiles (dovecote.cli.dev.write_profiles) when another one
already wrote them: a runtime that still answers keeps its `dev` profiles (the second writes
`dev-PORT`, or nothing, and says why); a stopped one, or the same endpoint restarted, is replaced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dovecote.cli.dev import own_tokens_file, write_profiles
from dovecote.client.config import load_profiles, save_profiles


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def tokens(folder: Path, endpoint: str, tag: str) -> Path:
    path = folder / f"{tag}.json"
    roles = {"caller": f"{tag}-c", "worker": f"{tag}-w", "admin": f"{tag}-a"}
    path.write_text(json.dumps({"endpoint": endpoint, "tokens": roles}))
    return path


FIRST, SECOND = "http://127.0.0.1:8787", "http://127.0.0.1:8788"


def test_a_first_runtime_that_answers_keeps_its_profiles(config: Path) -> None:
    write_profiles("dev", tokens(config, FIRST, "a"), live=lambda endpoint: False)
    path, names, why = write_profiles("dev", tokens(config, SECOND, "b"), live=lambda endpoint: endpoint == FIRST)
    assert names == ["dev-8788", "dev-8788-admin", "dev-8788-worker"] and path is not None
    assert why == f"the profiles dev, dev-worker, dev-admin point at another running dovecote dev ({FIRST}), kept"
    profiles = load_profiles()
    assert {profiles[n]["endpoint"] for n in ("dev", "dev-worker", "dev-admin")} == {FIRST}
    assert (profiles["dev-8788"]["token"], profiles["dev-8788-worker"]["token"]) == ("b-c", "b-w")


def test_a_stopped_runtime_or_the_same_endpoint_is_replaced(config: Path) -> None:
    write_profiles("dev", tokens(config, FIRST, "a"), live=lambda endpoint: False)
    _, names, why = write_profiles("dev", tokens(config, SECOND, "b"), live=lambda endpoint: False)
    assert (names, why) == (["dev", "dev-admin", "dev-worker"], "")
    assert load_profiles()["dev"]["endpoint"] == SECOND
    _, names, why = write_profiles("dev", tokens(config, SECOND, "c"), live=lambda endpoint: True)
    assert (names, why) == (["dev", "dev-admin", "dev-worker"], "") and load_profiles()["dev"]["token"] == "c-c"


def test_nothing_is_written_when_the_fallback_names_are_held_too(config: Path) -> None:
    save_profiles(
        {"dev": {"endpoint": FIRST, "token": "a"}, "dev-8788": {"endpoint": "http://other:8788", "token": "o"}}
    )
    before = load_profiles()
    path, names, why = write_profiles("dev", tokens(config, SECOND, "b"), live=lambda endpoint: True)
    assert (path, names) == (None, [])
    assert why.endswith("so do dev-8788, dev-8788-worker, dev-8788-admin (http://other:8788): no profile written")
    assert load_profiles() == before


def test_a_second_runtime_in_the_same_clone_leaves_the_first_ones_tokens_file(tmp_path: Path) -> None:
    first = tokens(tmp_path, FIRST, "dev-tokens")
    own, why = own_tokens_file(first, 8788, live=lambda endpoint: endpoint == FIRST)
    assert own == tmp_path / "dev-tokens-8788.json"
    assert why == f"{first} holds the tokens of another running dovecote dev ({FIRST}), kept; this one's: {own}"
    # A stopped runtime's file, a missing one or an unreadable one is this runtime's to write.
    assert own_tokens_file(first, 8788, live=lambda endpoint: False) == (first, "")
    assert own_tokens_file(tmp_path / "none.json", 8788, live=lambda endpoint: True) == (tmp_path / "none.json", "")
    (tmp_path / "bad.json").write_text("{not json")
    assert own_tokens_file(tmp_path / "bad.json", 8788, live=lambda endpoint: True) == (tmp_path / "bad.json", "")


@pytest.mark.parametrize(
    ("tokens_file", "link"),
    [
        ("dev-tokens.json", "console-link"),
        ("dev-tokens-8788.json", "console-link-8788"),
        ("mine.json", "console-link-mine"),
    ],
)
def test_each_tokens_file_has_its_own_console_link(tmp_path: Path, tokens_file: str, link: str) -> None:
    from infra.local.runtime import LocalRuntime

    runtime = LocalRuntime(tokens_file=tmp_path / tokens_file)
    assert runtime.console_link_file == tmp_path / link


def test_the_fallback_profiles_are_forgotten_at_the_stop_unless_rewritten(config: Path) -> None:
    from dovecote.cli.dev import forget_profiles

    write_profiles("dev", tokens(config, FIRST, "a"), live=lambda endpoint: False)
    _, names, _ = write_profiles("dev", tokens(config, SECOND, "b"), live=lambda endpoint: endpoint == FIRST)
    assert forget_profiles("dev-8788", FIRST) == []  # they name another endpoint now: kept
    assert forget_profiles("dev-8788", SECOND) == names
    assert set(load_profiles()) == {"dev", "dev-worker", "dev-admin"}
