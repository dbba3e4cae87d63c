"""The settings a function reads from its environment: each constraint refuses, each type parses from
the text CDK writes, and no secret is in the repr a log line would print."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

import pytest

from dovecote.platform.settings import BOUNDS, ENV_PREFIX, Settings, SettingsError, get_settings
from infra.routes import AUTHORIZER, FUNCTIONS


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for spec in fields(Settings):
        monkeypatch.delenv(ENV_PREFIX + spec.name.upper(), raising=False)
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_every_variable_the_stack_sets_parses(env: pytest.MonkeyPatch) -> None:
    """The text each deployed function's environment holds (with the options' embedder, whose
    dimension is a number in a Literal: pydantic refused "256" for it) reads back as its type."""
    for spec in (AUTHORIZER, *FUNCTIONS.values()):
        for name, value in spec.environment(subsegments=False).items():
            if name.startswith(ENV_PREFIX):
                env.setenv(name, value)
    env.setenv("DOVECOTE_EMBEDDER", "bedrock")
    env.setenv("DOVECOTE_EMBED_DIMENSION", "256")
    env.setenv("DOVECOTE_CLAIM_SHARDS", " 4 ")
    env.setenv("DOVECOTE_ALLOW_PLAINTEXT_READS", "Yes")
    settings = get_settings()
    assert (settings.embedder, settings.embed_dimension) == ("bedrock", 256)
    assert settings.claim_shards == 4 and settings.allow_plaintext_reads is True


@pytest.mark.parametrize(
    ("variable", "text"),
    [
        ("DOVECOTE_EMBED_DIMENSION", "384"),
        ("DOVECOTE_EMBED_DIMENSION", "five"),
        ("DOVECOTE_CLAIM_SHARDS", "0"),
        ("DOVECOTE_CLAIM_SHARDS", "4.0"),
        ("DOVECOTE_PRESIGN_SECONDS", "604801"),
        ("DOVECOTE_ALLOW_PLAINTEXT_READS", "maybe"),
        ("DOVECOTE_EMBEDDER", "openai"),
        ("DOVECOTE_OPENSEARCH_INDEX_PREFIX", "team-a\n"),
        ("DOVECOTE_PUBLIC_URL", "javascript://api.example"),
        ("DOVECOTE_PUBLIC_URL", "https://api.example/?x=1"),
        ("DOVECOTE_A2A_WAITS_PER_AUTHORITY", "51"),
    ],
)
def test_a_bad_variable_is_refused_by_name(env: pytest.MonkeyPatch, variable: str, text: str) -> None:
    env.setenv(variable, text)
    with pytest.raises(SettingsError, match=variable):
        get_settings()


def test_bounds_are_inclusive_and_checked_on_construction() -> None:
    for name, (low, high) in BOUNDS.items():
        assert getattr(Settings(**{name: low}), name) == low
        assert getattr(Settings(**{name: high}), name) == high
        for outside in (low - 1, high + 1):
            with pytest.raises(SettingsError):
                Settings(**{name: outside})
    with pytest.raises(SettingsError):
        Settings(claim_shards=True)  # a bool is not a count
    with pytest.raises(SettingsError):
        Settings(tokens_table=None)  # type: ignore[arg-type]  # a required name
    assert Settings.default("presign_seconds") == 900 and Settings.default("cursor_key") is None


def test_secrets_are_not_in_the_repr() -> None:
    settings = Settings(cursor_key="k" * 32, opensearch_password="hunter2")
    assert "hunter2" not in repr(settings) and "k" * 32 not in repr(settings)
    assert settings.opensearch_password == "hunter2"
