"""Where the SDK, the CLI and the MCP server find an endpoint and a token (dovecote.client.config), from
a working directory outside any clone, with HOME and XDG_CONFIG_HOME in temporary directories: an
explicit profile, then DOVECOTE_ENDPOINT / DOVECOTE_TOKEN (or DOVECOTE_TOKENS_FILE), then the
DOVECOTE_PROFILE / default / dev profile, then the nearest .dovecote/dev-tokens.json up the tree."""

from __future__ import annotations

import json
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


def test_a_profile_comes_before_the_tokens_file_and_roles_pick_their_profile(place: Path) -> None:
    tokens_file(place / "work", "http://file")
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
    # Half the environment: the token of the profile found, at the endpoint named.
    monkeypatch.delenv("DOVECOTE_TOKEN")
    monkeypatch.delenv("DOVECOTE_PROFILE")
    assert (resolve().endpoint, resolve().token) == ("http://env", "t-dev")
    # DOVECOTE_TOKENS_FILE is explicit: it beats the profiles.
    named = tokens_file(place / "elsewhere", "http://named")
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
