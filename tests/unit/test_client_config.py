"""Where the SDK, the CLI and the MCP server find an endpoint and a token (dovecote.client.config), from
a working directory outside any clone, with HOME and XDG_CONFIG_HOME in temporary directories: an
explicit profile, then DOVECOTE_ENDPOINT / DOVECOTE_TOKEN (or DOVECOTE_TOKENS_FILE), then the
DOVECOTE_PROFILE / default profile, then the nearest .dovecote/dev-tokens.json up the tree, then the
dev profile."""

from __future__ import annotations

import json
import os
import stat
import threading
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dovecote.client import DovecoteClient, DovecoteError
from dovecote.client.config import config_path, load_profiles, resolve, save_profiles, toml_string


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no configuration anywhere: HOME, XDG_CONFIG_HOME and the cwd in tmp."""
    for name in ("DOVECOTE_ENDPOINT", "DOVECOTE_TOKEN", "DOVECOTE_TOKENS_FILE", "DOVECOTE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work" / "deep" / "er"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    return tmp_path


def tokens_file(folder: Path, endpoint: str) -> Path:
    path = folder / ".dovecote" / "dev-tokens.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"endpoint": endpoint, "tokens": {"caller": "c", "worker": "w", "admin": "a"}}))
    return path


def test_nothing_found_says_everything_it_looked_at(place: Path) -> None:
    with pytest.raises(DovecoteError) as caught:
        resolve("caller")
    message = caught.value.message
    assert caught.value.code == "configuration" and caught.value.status == 0
    assert "DOVECOTE_ENDPOINT" in message and "dovecote login" in message
    assert str(place / "xdg" / "dovecote" / "config.toml") in message
    assert str(place / "work" / "deep" / "er") in message and "or a parent" in message


def test_the_nearest_tokens_file_up_the_tree(place: Path) -> None:
    tokens_file(place / "work", "http://far")
    assert resolve("worker").endpoint == "http://far" and resolve("worker").token == "w"
    nearer = tokens_file(place / "work" / "deep", "http://near")
    found = resolve("admin")
    assert (found.endpoint, found.token, found.source) == ("http://near", "a", str(nearer))


def test_roles_pick_their_profile(place: Path) -> None:
    save_profiles(
        {
            "dev": {"endpoint": "http://dev", "token": "dev-caller"},
            "dev-worker": {"endpoint": "http://dev", "token": "dev-worker"},
        }
    )
    assert (resolve("caller").endpoint, resolve("caller").token) == ("http://dev", "dev-caller")
    assert resolve("worker").token == "dev-worker"
    assert resolve("admin").token == "dev-caller"  # no dev-admin profile: the profile's own token
    assert "profile dev-worker in" in resolve("worker").source
    save_profiles({"default": {"endpoint": "https://cloud", "token": "login"}})
    assert resolve("caller").endpoint == "https://cloud"  # `default` (dovecote login) before `dev`


def test_environment_and_explicit_choices(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_profiles(
        {"dev": {"endpoint": "http://dev", "token": "t-dev"}, "ops": {"endpoint": "http://ops", "token": "o"}}
    )
    monkeypatch.setenv("DOVECOTE_PROFILE", "ops")
    assert resolve().endpoint == "http://ops"
    monkeypatch.setenv("DOVECOTE_ENDPOINT", "http://env")
    monkeypatch.setenv("DOVECOTE_TOKEN", "t-env")
    assert (resolve().endpoint, resolve().token, resolve().source) == ("http://env", "t-env", "DOVECOTE_ENDPOINT")
    # --profile on the command line comes first of all.
    assert resolve(profile="dev").endpoint == "http://dev"
    with pytest.raises(DovecoteError) as missing:
        resolve(profile="nope")
    assert "no profile 'nope'" in missing.value.message and "dev, ops" in missing.value.message
    with pytest.raises(DovecoteError) as bad:
        resolve(profile="../x")
    assert bad.value.code == "invalid_argument"
    # DOVECOTE_TOKENS_FILE is explicit: it beats the profiles (half the environment is an error: below).
    named = tokens_file(place / "elsewhere", "http://named")
    monkeypatch.delenv("DOVECOTE_TOKEN")
    monkeypatch.delenv("DOVECOTE_ENDPOINT")
    monkeypatch.setenv("DOVECOTE_TOKENS_FILE", str(named))
    assert resolve("worker").endpoint == "http://named"


def test_the_sdk_uses_the_same_resolution(place: Path) -> None:
    save_profiles({"dev": {"endpoint": "http://127.0.0.1:9/", "token": "t"}})
    with DovecoteClient.from_env(max_attempts=1) as client:
        assert client.endpoint == "http://127.0.0.1:9" and client.source.startswith("profile dev in ")
        with pytest.raises(DovecoteError) as caught:
            client.health()
        assert "(from profile dev in " in caught.value.message


def test_the_file_is_private_readable_toml_and_keeps_other_profiles(place: Path) -> None:
    path = save_profiles({"a": {"endpoint": "http://a", "token": 'quo"te\\back\nline'}})
    save_profiles({"b": {"endpoint": "http://b", "token": "tb"}})
    assert path == config_path() == place / "xdg" / "dovecote" / "config.toml"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    document = tomllib.loads(path.read_text())
    assert document["profiles"]["a"]["token"] == 'quo"te\\back\nline'
    assert set(load_profiles()) == {"a", "b"}
    with pytest.raises(DovecoteError):
        save_profiles({"bad name": {"endpoint": "x", "token": "y"}})


def test_without_xdg_the_file_is_under_home(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert config_path() == place / "home" / ".config" / "dovecote" / "config.toml"


def test_parallel_writers_lose_no_profile(place: Path) -> None:
    """`dovecote dev` processes write their profiles at once: the lock keeps every write."""
    barrier = threading.Barrier(8)

    def write(i: int) -> None:
        barrier.wait()
        save_profiles({f"p{i}": {"endpoint": f"http://{i}", "token": str(i)}})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(load_profiles()) == {f"p{i}" for i in range(8)}


def test_a_broken_file_is_a_configuration_error(place: Path) -> None:
    path = config_path()
    path.parent.mkdir(parents=True)
    path.write_text("[profiles.dev\n")
    with pytest.raises(DovecoteError) as caught:
        resolve()
    assert caught.value.code == "configuration" and str(path) in caught.value.message


@given(st.text())
def test_any_string_round_trips_through_toml(value: str) -> None:
    assert tomllib.loads(f"v = {toml_string(value)}")["v"] == value


# ---- issue 29: planted tokens files, one source per token, the clone's runtime first ------------------


def test_a_profile_name_with_a_trailing_newline_is_refused(place: Path) -> None:
    for name in ("dev\n", "dev\r", "a b"):
        with pytest.raises(DovecoteError) as caught:
            resolve(profile=name)
        assert caught.value.code == "invalid_argument"
    with pytest.raises(DovecoteError):
        save_profiles({"dev\n": {"endpoint": "http://a", "token": "t"}})


def test_a_tokens_file_others_can_write_is_refused(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `.dovecote/dev-tokens.json` in a directory anyone can write (planted under /tmp, say) would
    receive the user's token and transcripts: it is used only when the user owns it and no one else
    can write it or its directory."""
    planted = tokens_file(place / "work", "http://planted")
    planted.chmod(0o666)
    with pytest.raises(DovecoteError) as writable:
        resolve()
    assert writable.value.code == "configuration" and str(planted) in writable.value.message
    assert "others can write it" in writable.value.message
    planted.chmod(0o600)
    planted.parent.chmod(0o777)
    with pytest.raises(DovecoteError) as folder:
        resolve()
    assert f"others can write its directory {planted.parent}" in folder.value.message
    planted.parent.chmod(0o700)
    assert resolve().endpoint == "http://planted"
    # Owned by someone else (root may chown; here the user's id is made to differ).
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(planted).st_uid + 1)
    with pytest.raises(DovecoteError) as owner:
        resolve()
    assert "it belongs to uid" in owner.value.message
    # The rule holds for a file named by DOVECOTE_TOKENS_FILE too.
    monkeypatch.setenv("DOVECOTE_TOKENS_FILE", str(planted))
    with pytest.raises(DovecoteError):
        resolve()


def test_half_the_environment_is_never_paired_with_another_source(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A token goes only to an endpoint from the same source: DOVECOTE_TOKEN alone is not sent to a
    profile's or a tokens file's endpoint, nor DOVECOTE_ENDPOINT given a profile's token."""
    save_profiles({"dev": {"endpoint": "http://dev", "token": "t-dev"}})
    tokens_file(place / "work", "http://file")
    monkeypatch.setenv("DOVECOTE_TOKEN", "t-env")
    with pytest.raises(DovecoteError) as token_only:
        resolve()
    message = token_only.value.message
    assert token_only.value.code == "configuration"
    assert message.startswith("DOVECOTE_TOKEN is set but DOVECOTE_ENDPOINT is not") and "same place" in message
    monkeypatch.delenv("DOVECOTE_TOKEN")
    monkeypatch.setenv("DOVECOTE_ENDPOINT", "http://env")
    with pytest.raises(DovecoteError) as endpoint_only:
        resolve()
    assert endpoint_only.value.message.startswith("DOVECOTE_ENDPOINT is set but DOVECOTE_TOKEN is not")
    # --profile names one source whole: the environment's half is not mixed in.
    chosen = resolve(profile="dev")
    assert (chosen.endpoint, chosen.token) == ("http://dev", "t-dev")


def test_each_source_names_where_the_token_came_from(place: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOVECOTE_ENDPOINT", "http://env")
    monkeypatch.setenv("DOVECOTE_TOKEN", "t-env")
    env = resolve()
    assert (env.source, env.token_source) == ("DOVECOTE_ENDPOINT", "DOVECOTE_TOKEN")
    assert env.settings == "the environment (DOVECOTE_ENDPOINT, DOVECOTE_TOKEN)"
    monkeypatch.delenv("DOVECOTE_ENDPOINT")
    monkeypatch.delenv("DOVECOTE_TOKEN")
    path = save_profiles({"dev": {"endpoint": "http://dev", "token": "t"}})
    dev = resolve("worker")
    assert dev.settings == f"profile dev in {path}" and dev.token_source == dev.source
    assert "no profile dev-worker" in dev.role_hint and "--profile dev-worker" in dev.role_hint
    assert resolve("caller").role_hint == ""


def test_the_clones_own_runtime_comes_before_the_dev_profile(place: Path) -> None:
    """A second `dovecote dev` elsewhere rewrites the `dev` profile: inside a clone, the clone's own
    tokens file answers. `default` (written by `dovecote login`, a choice of the user's) stays first."""
    save_profiles({"dev": {"endpoint": "http://other-clone", "token": "t-other"}})
    own = tokens_file(place / "work", "http://this-clone")
    found = resolve()
    assert (found.endpoint, found.token, found.settings) == ("http://this-clone", "c", f"file {own}")
    save_profiles({"default": {"endpoint": "https://cloud", "token": "login"}})
    assert resolve().endpoint == "https://cloud"
