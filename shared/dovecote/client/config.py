"""Where a client finds its endpoint and token: the one resolution the SDK (`DovecoteClient.from_env`),
the CLI and the MCP server share, so all three work from any directory. In this order:

1. A profile named on the command line (`dovecote --profile NAME …`, `from_env(profile=NAME)`).
2. `DOVECOTE_ENDPOINT` and `DOVECOTE_TOKEN`; or a tokens file named explicitly (`DOVECOTE_TOKENS_FILE`,
   `from_env(tokens_file=…)`).
3. A profile in `$XDG_CONFIG_HOME/dovecote/config.toml` (default `~/.config/dovecote/config.toml`): the
   one `DOVECOTE_PROFILE` names, else `default` (written by `dovecote login`), else `dev` (written by
   `dovecote dev`).
4. The nearest `.dovecote/dev-tokens.json` up the directory tree from the working directory (what
   `dovecote dev` writes in the clone).

A profile holds one endpoint and one token. A command that needs another role (a worker verb, an admin
verb) uses the profile `<name>-<role>` when it exists: `dovecote dev` writes `dev` (its caller token),
`dev-worker` and `dev-admin`, so `dovecote worker claim` finds the worker token as it does in the
tokens file. When only one of DOVECOTE_ENDPOINT and DOVECOTE_TOKEN is set, it overrides that half of
what steps 3 and 4 find. Every failure names what was looked at, in one sentence.

The file is written by hand (a few string keys; tomllib reads it): atomically (a temporary file
renamed over it), 0600 in a 0700 directory, under a lock, since parallel `dovecote dev` processes
write their profiles at once. Comments in it are not kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dovecote.client.errors import CONFIGURATION, DovecoteError

DEV_TOKENS_FILE = Path(".dovecote/dev-tokens.json")
DEFAULT_PROFILES = ("default", "dev")
ROLES = ("caller", "worker", "admin")
PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


@dataclass(frozen=True)
class ClientConfig:
    endpoint: str
    token: str
    source: str  # where the endpoint came from, for messages: "DOVECOTE_ENDPOINT", a profile, a file


def config_path() -> Path:
    """`$XDG_CONFIG_HOME/dovecote/config.toml`, or `~/.config/dovecote/config.toml`."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".config"
    return root / "dovecote" / "config.toml"


def _fail(message: str, **details: Any) -> DovecoteError:
    return DovecoteError(0, CONFIGURATION, message, details or None)


# ---- the profiles file ----------------------------------------------------------------------------


def load_profiles(path: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every profile of the config file ({} when there is none)."""
    import tomllib

    path = path or config_path()
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _fail(f"the config file {path} cannot be read ({exc}): fix it, or run `dovecote login` again") from None
    profiles = document.get("profiles", {})
    if not isinstance(profiles, dict):
        raise _fail(f"the config file {path} has no [profiles.NAME] tables")
    return {name: dict(body) for name, body in profiles.items() if isinstance(body, dict)}


def check_profile_name(name: str) -> str:
    if not PROFILE_NAME.match(name):
        raise DovecoteError(
            0,
            "invalid_argument",
            f"{name!r} is not a profile name: letters, digits, '-' and '_', at most 64",
            {"profile": name},
        )
    return name


def toml_string(value: str) -> str:
    """A TOML basic string: backslash, quote and every control character escaped."""
    out = ['"']
    for char in value:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return toml_string(str(value))


def render_profiles(profiles: Mapping[str, Mapping[str, Any]]) -> str:
    lines = ["# Dovecote profiles, written by `dovecote login` and `dovecote dev` (comments are not kept)."]
    for name in sorted(profiles):
        lines += ["", f"[profiles.{check_profile_name(name)}]"]
        for key, value in profiles[name].items():
            if isinstance(value, str | int | float | bool) and PROFILE_NAME.match(key):
                lines.append(f"{key} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def save_profiles(updates: Mapping[str, Mapping[str, Any]], path: Path | None = None) -> Path:
    """Write (or replace) these profiles, keeping the others; returns the file's path."""
    path = path or config_path()
    for name in updates:
        check_profile_name(name)
    with _locked(path):
        profiles = load_profiles(path)
        profiles.update({name: dict(body) for name, body in updates.items()})
        text = render_profiles(profiles)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), PRIVATE_FILE)  # a token: the user's only
                handle.write(text)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    return path


# ---- resolution -----------------------------------------------------------------------------------


def _from_profile(name: str, role: str, profiles: dict[str, dict[str, Any]], path: Path) -> ClientConfig:
    chosen = f"{name}-{role}" if role != "caller" and f"{name}-{role}" in profiles else name
    body = profiles.get(chosen)
    if body is None:
        known = ", ".join(sorted(profiles)) or "none"
        raise _fail(
            f"no profile {name!r} in {path} (profiles: {known}); write one with "
            f"`dovecote login --endpoint URL --token TOKEN --profile {name}`",
            profile=name,
            config=str(path),
        )
    endpoint, token = body.get("endpoint"), body.get("token")
    if not isinstance(endpoint, str) or not endpoint or not isinstance(token, str) or not token:
        raise _fail(f"the profile {chosen!r} in {path} needs an endpoint and a token", profile=chosen)
    return ClientConfig(endpoint, token, f"profile {chosen} in {path}")


def _from_tokens_file(path: Path, role: str, shown: str) -> ClientConfig:
    try:
        dev = json.loads(path.read_text())
        endpoint = str(dev["endpoint"])
        token = str(dev["tokens"][role])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reason = (
            f"names no endpoint or no {role} token"
            if isinstance(exc, KeyError | TypeError)
            else f"cannot be read ({exc})"
        )
        raise _fail(f"the tokens file {path} {reason}: run `make dev` again, or set DOVECOTE_TOKEN") from None
    return ClientConfig(endpoint, token, shown)


def nearest_tokens_file(start: Path | None = None) -> Path | None:
    """The nearest `.dovecote/dev-tokens.json` in the working directory or one of its parents."""
    here = (start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        candidate = folder / DEV_TOKENS_FILE
        if candidate.is_file():
            return candidate
    return None


def _shown(path: Path) -> str:
    """A path as messages print it: relative when it is below the working directory."""
    try:
        return str(path.absolute().relative_to(Path.cwd().absolute()))
    except ValueError:
        return str(path)


def resolve(role: str = "caller", tokens_file: Path | None = None, *, profile: str | None = None) -> ClientConfig:
    """The endpoint and the token of `role`, in the order of the module docstring; an endpoint that is
    not an http(s) URL with a host is a configuration error, named by where it came from."""
    config = _resolve(role, tokens_file, profile=profile)
    parts = urlsplit(config.endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _fail(
            f"the endpoint {config.endpoint!r} (from {config.source}) is not an http:// or https:// URL with a host: "
            "give one such as http://127.0.0.1:8787",
            endpoint=config.endpoint,
            source=config.source,
        )
    return config


def _resolve(role: str, tokens_file: Path | None, *, profile: str | None) -> ClientConfig:
    env_endpoint = os.environ.get("DOVECOTE_ENDPOINT") or ""
    env_token = os.environ.get("DOVECOTE_TOKEN") or ""
    path = config_path()
    if profile:
        return _from_profile(check_profile_name(profile), role, load_profiles(path), path)
    if env_endpoint and env_token and tokens_file is None:
        return ClientConfig(env_endpoint, env_token, "DOVECOTE_ENDPOINT")
    named = os.environ.get("DOVECOTE_TOKENS_FILE") or ""
    named_file = tokens_file or (Path(named) if named else None)
    found: ClientConfig | None = None
    looked: list[str] = []
    if named_file is not None:
        if not named_file.is_file():
            raise _fail(f"the tokens file {named_file.absolute()} does not exist (named by DOVECOTE_TOKENS_FILE)")
        found = _from_tokens_file(named_file, role, str(named_file))
    else:
        profiles = load_profiles(path)
        wanted = os.environ.get("DOVECOTE_PROFILE") or ""
        if wanted:
            found = _from_profile(check_profile_name(wanted), role, profiles, path)
        else:
            name = next((n for n in DEFAULT_PROFILES if n in profiles), None)
            if name is not None:
                found = _from_profile(name, role, profiles, path)
            else:
                looked.append(f"no profile in {path}")
        if found is None:
            nearest = nearest_tokens_file()
            if nearest is not None:
                found = _from_tokens_file(nearest, role, _shown(nearest))
            else:
                looked.append(f"no {DEV_TOKENS_FILE} in {Path.cwd().absolute()} or a parent")
    if found is None:
        where = "; ".join(looked)
        if env_endpoint:
            raise _fail(f"DOVECOTE_ENDPOINT is set but DOVECOTE_TOKEN is not ({where})", looked=looked)
        if env_token:
            raise _fail(f"DOVECOTE_TOKEN is set but DOVECOTE_ENDPOINT is not ({where})", looked=looked)
        raise _fail(
            "no Dovecote configuration: set DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, run `dovecote login --endpoint URL "
            f"--token TOKEN`, or run `make dev` in the clone ({where})",
            looked=looked,
            config=str(path),
        )
    if env_endpoint:
        return ClientConfig(env_endpoint, env_token or found.token, "DOVECOTE_ENDPOINT")
    return ClientConfig(found.endpoint, env_token or found.token, found.source)


__all__ = [
    "DEV_TOKENS_FILE",
    "ClientConfig",
    "config_path",
    "load_profiles",
    "nearest_tokens_file",
    "resolve",
    "save_profiles",
    "toml_string",
]
