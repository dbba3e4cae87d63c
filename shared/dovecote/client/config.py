"""Where a client finds its endpoint and token: the one resolution the SDK (`DovecoteClient.from_env`),
the CLI and the MCP server share, so all three work from any directory. In this order:

1. A profile named on the command line (`dovecote --profile NAME …`, `from_env(profile=NAME)`), or a
   tokens file named to the SDK (`from_env(tokens_file=…)`).
2. `DOVECOTE_ENDPOINT` and `DOVECOTE_TOKEN`, both; or a tokens file named by `DOVECOTE_TOKENS_FILE`.
3. A profile in `$XDG_CONFIG_HOME/dovecote/config.toml` (default `~/.config/dovecote/config.toml`): the
   one `DOVECOTE_PROFILE` names, else `default` (written by `dovecote login`).
4. The nearest `.dovecote/dev-tokens.json` up the directory tree from the working directory (what
   `dovecote dev` writes in the clone): inside a clone its own runtime answers.
5. The profile `dev` (written by the latest `dovecote dev`, whichever clone it ran in).

One source gives both halves: a token is only ever sent to an endpoint from the same place. Only one
of DOVECOTE_ENDPOINT and DOVECOTE_TOKEN set is an error that names the other, never paired with a
profile's or a file's other half. A tokens file is used only when the current user owns it and no
one else can write it or its directory (one planted in /tmp would otherwise receive the user's token,
and `dovecote recall hook` whole transcripts); otherwise the error says why.

A profile holds one endpoint and one token. A command that needs another role (a worker verb, an admin
verb) uses the profile `<name>-<role>` when it exists: `dovecote dev` writes `dev` (its caller token),
`dev-worker` and `dev-admin`, so `dovecote worker claim` finds the worker token as it does in the
tokens file. Every failure names what was looked at, in one sentence.

The file is written by hand (a few string keys; tomllib reads it): atomically (a temporary file
renamed over it), 0600 in a 0700 directory, under a lock, since parallel `dovecote dev` processes
write their profiles at once. Comments in it are not kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from dovecote.client.errors import CONFIGURATION, DovecoteError

DEV_TOKENS_FILE = Path(".dovecote/dev-tokens.json")
LOGIN_PROFILE = "default"  # what `dovecote login` writes: before the clone's tokens file
DEV_PROFILE = "dev"  # what `dovecote dev` writes: after it
ROLES = ("caller", "worker", "admin")
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


ENV_SETTINGS = "the environment (DOVECOTE_ENDPOINT, DOVECOTE_TOKEN)"


@dataclass(frozen=True)
class ClientConfig:
    endpoint: str
    token: str
    source: str  # where the endpoint came from, for messages: "DOVECOTE_ENDPOINT", a profile, a file
    token_source: str = ""  # where the token came from ("DOVECOTE_TOKEN"); the source when empty
    settings: str = ""  # both, as `dovecote whoami` prints them; the source when empty
    # When the role's own token was not found (no profile NAME-worker): what was used, and how to add it.
    role_hint: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "token_source", self.token_source or self.source)
        object.__setattr__(self, "settings", self.settings or self.source)


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
    if not PROFILE_NAME.fullmatch(name):
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
            if isinstance(value, str | int | float | bool) and PROFILE_NAME.fullmatch(key):
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


def _write(path: Path, profiles: Mapping[str, Mapping[str, Any]]) -> None:
    """The whole file, atomically (a temporary file renamed over it), 0600; under `_locked`."""
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


def save_profiles(updates: Mapping[str, Mapping[str, Any]], path: Path | None = None) -> Path:
    """Write (or replace) these profiles, keeping the others; returns the file's path."""
    path = path or config_path()
    for name in updates:
        check_profile_name(name)
    with _locked(path):
        profiles = load_profiles(path)
        profiles.update({name: dict(body) for name, body in updates.items()})
        _write(path, profiles)
    return path


def remove_profiles(name: str, path: Path | None = None) -> tuple[Path, list[str]]:
    """Remove the profile `name` and its role profiles (`name-worker`, `name-admin`), keeping the
    others: (the file, the names removed). No profile `name` is a configuration error naming the file
    and the profiles it has."""
    path = path or config_path()
    check_profile_name(name)
    with _locked(path):
        profiles = load_profiles(path)
        if name not in profiles:
            known = ", ".join(sorted(profiles)) or "none"
            raise _fail(f"no profile {name!r} in {path} (profiles: {known})", profile=name, config=str(path))
        removed = sorted(n for n in (name, *(f"{name}-{role}" for role in ROLES if role != "caller")) if n in profiles)
        _write(path, {n: body for n, body in profiles.items() if n not in removed})
    return path, removed


# ---- resolution -----------------------------------------------------------------------------------


def _from_profile(name: str, role: str, profiles: dict[str, dict[str, Any]], path: Path) -> ClientConfig:
    own = f"{name}-{role}"
    chosen = own if role != "caller" and own in profiles else name
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
    hint = ""
    if role != "caller" and chosen != own:
        hint = (
            f"no profile {own} in {path}, so the token of profile {name} was used: add a {role} token with "
            f"`dovecote login --endpoint URL --token TOKEN --profile {own}`"
        )
    source = f"profile {chosen} in {path}"
    return ClientConfig(endpoint, token, source, role_hint=hint)


def untrusted(path: Path) -> str:
    """Why a tokens file must not be used ('' when it may): the current user must own it, and no one
    else may write it or its directory (else anyone could plant one and receive the user's token)."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:  # no POSIX ownership to check (Windows)
        return ""
    me = geteuid()
    try:
        file, folder, link = os.stat(path), os.stat(path.parent), os.lstat(path.parent)
    except OSError as exc:
        return f"it cannot be checked ({exc.strerror or exc})"
    if file.st_uid != me:
        return f"it belongs to uid {file.st_uid}, not to you (uid {me})"
    if file.st_mode & 0o022:
        return f"others can write it (mode {stat.S_IMODE(file.st_mode):04o})"
    for entry in (folder, link):
        if entry.st_uid not in (me, 0):
            return f"its directory {path.parent} belongs to uid {entry.st_uid}, not to you (uid {me})"
        if entry.st_mode & 0o022 and not stat.S_ISLNK(entry.st_mode):
            return f"others can write its directory {path.parent} (mode {stat.S_IMODE(entry.st_mode):04o})"
    return ""


def check_tokens_file(path: Path, named_by: str = "") -> Path:
    """`path` when it may be used (see `untrusted`); a configuration error that says why otherwise."""
    reason = untrusted(path)
    if reason:
        by = f" (named by {named_by})" if named_by else ""
        raise _fail(
            f"the tokens file {path.absolute()}{by} is not used: {reason}. A token goes only to an endpoint "
            "from a file you own that no one else can write: remove it, or fix its owner and mode "
            "(`dovecote dev` writes it 0600 in a 0700 directory)",
            tokens_file=str(path.absolute()),
            reason=reason,
        )
    return path


def _from_tokens_file(path: Path, role: str, shown: str, named_by: str = "") -> ClientConfig:
    check_tokens_file(path, named_by)
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
    return ClientConfig(endpoint, token, shown, settings=f"file {path.absolute()}")


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


def _half_environment(env_endpoint: str, env_token: str) -> DovecoteError:
    given, missing = (
        ("DOVECOTE_ENDPOINT", "DOVECOTE_TOKEN") if env_endpoint else ("DOVECOTE_TOKEN", "DOVECOTE_ENDPOINT")
    )
    return _fail(
        f"{given} is set but {missing} is not: a token is sent only to an endpoint from the same place, "
        f"never paired with a profile's or a tokens file's other half; set {missing} too, or unset {given} "
        "to use a profile or the dev tokens file",
        set=given,
        missing=missing,
    )


def _resolve(role: str, tokens_file: Path | None, *, profile: str | None) -> ClientConfig:
    env_endpoint = os.environ.get("DOVECOTE_ENDPOINT") or ""
    env_token = os.environ.get("DOVECOTE_TOKEN") or ""
    path = config_path()
    if profile:
        return _from_profile(check_profile_name(profile), role, load_profiles(path), path)
    if tokens_file is not None:
        return _from_tokens_file(tokens_file, role, str(tokens_file))
    if env_endpoint and env_token:
        hint = "" if role == "caller" else f"DOVECOTE_TOKEN is the token of every role: set it to a {role} token"
        return ClientConfig(
            env_endpoint, env_token, "DOVECOTE_ENDPOINT", "DOVECOTE_TOKEN", ENV_SETTINGS, role_hint=hint
        )
    if env_endpoint or env_token:
        raise _half_environment(env_endpoint, env_token)
    named = os.environ.get("DOVECOTE_TOKENS_FILE") or ""
    if named:
        named_file = Path(named)
        if not named_file.is_file():
            raise _fail(f"the tokens file {named_file.absolute()} does not exist (named by DOVECOTE_TOKENS_FILE)")
        return _from_tokens_file(named_file, role, named, "DOVECOTE_TOKENS_FILE")
    profiles = load_profiles(path)
    wanted = os.environ.get("DOVECOTE_PROFILE") or ""
    if wanted:
        return _from_profile(check_profile_name(wanted), role, profiles, path)
    if LOGIN_PROFILE in profiles:
        return _from_profile(LOGIN_PROFILE, role, profiles, path)
    nearest = nearest_tokens_file()
    if nearest is not None:
        return _from_tokens_file(nearest, role, _shown(nearest))
    if DEV_PROFILE in profiles:
        return _from_profile(DEV_PROFILE, role, profiles, path)
    others = f"no {LOGIN_PROFILE} or {DEV_PROFILE} profile in {path} (profiles: {', '.join(sorted(profiles))}: pick one"
    looked = [
        f"{others} with --profile or DOVECOTE_PROFILE)" if profiles else f"no profile in {path}",
        f"no {DEV_TOKENS_FILE} in {Path.cwd().absolute()} or a parent",
    ]
    raise _fail(
        "no Dovecote configuration: set DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, run `dovecote login --endpoint URL "
        f"--token TOKEN`, or run `make dev` in the clone ({'; '.join(looked)})",
        looked=looked,
        config=str(path),
    )


__all__ = [
    "DEV_TOKENS_FILE",
    "ClientConfig",
    "check_tokens_file",
    "config_path",
    "load_profiles",
    "nearest_tokens_file",
    "remove_profiles",
    "resolve",
    "save_profiles",
    "toml_string",
]
