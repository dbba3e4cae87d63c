"""`dovecote notes get`, the command agents run most, answered with the standard library alone when it
can be.

Why by hand: importing typer (~80 ms) and httpx (~80 ms with what it loads) was most of the ~0.3 s a
`notes get` took, and reading one small note needs neither: the configuration (`dovecote.client.
config`, the one resolution the SDK uses), the ref (`dovecote.notes.refs`), one GET through
`http.client` and the body written as the SDK writes it. So this path takes only

- the plain forms: `notes get REF` or `notes get KEY RUN NAME [--author A]`, with `--json`, after an
  optional `--profile NAME`;
- an `http` or `https` endpoint (trusted as httpx trusts it: SSL_CERT_FILE, SSL_CERT_DIR or certifi),
  with no proxy in the environment (httpx's handling of proxies stays the one handling);
- a 200 answer carrying the body inline (`text` or `body_b64`) that hashes to the note's SHA-256.

Anything else returns None before a byte is written, and the full command runs from the start: every
error, retry, message, exit code and large download is the typer command's own, and a GET is safe to
send twice. tests/e2e/test_cli_quick.py holds both paths to the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import ssl
import sys
from urllib.parse import quote, urlsplit

from dovecote.client.config import resolve
from dovecote.notes.refs import is_ref, note_ref

TIMEOUT = 30.0  # the SDK's default
# The proxies httpx reads from the environment (this path has none): their presence sends a command
# to the full path.
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def _parse(args: list[str]) -> tuple[str | None, list[str], str, bool] | None:
    """(profile, positional arguments, author, --json) of a plain `notes get`, or None."""
    profile: str | None = None
    if args[:1] == ["--profile"] and len(args) > 1:
        profile, args = args[1], args[2:]
    elif args[:1] and args[0].startswith("--profile="):
        profile, args = args[0].partition("=")[2], args[1:]
    if args[:2] != ["notes", "get"]:
        return None
    positional: list[str] = []
    author, as_json, rest = "", False, iter(args[2:])
    for arg in rest:
        if arg == "--json" and not as_json:
            as_json = True
        elif arg == "--author":
            author = next(rest, "\0")  # a missing value: the full command says so
        elif arg.startswith("--author="):
            author = arg.partition("=")[2]
        elif arg.startswith("-"):
            return None  # another option, `--`, a short flag: the full command's to read
        else:
            positional.append(arg)
    return profile, positional, author, as_json


def _ref(positional: list[str], author: str) -> str | None:
    if len(positional) == 1 and is_ref(positional[0]) and not author:
        return positional[0]
    if len(positional) == 3 and "\0" not in author:
        key, run, name = positional
        try:
            return note_ref(key, int(run), name, author)
        except ValueError:
            return None
    return None


def _body(answer: object) -> bytes | None:
    """The inline body, checked against its SHA-256, as `NotesMixin._receive` writes it; None when the
    answer has no inline body (a download URL) or does not match."""
    if not isinstance(answer, dict) or answer.get("download_url"):
        return None
    try:
        if answer.get("body_b64") is not None:
            data = base64.b64decode(answer["body_b64"])
        else:
            data = (answer.get("text") or "").encode("utf-8")
    except (ValueError, TypeError, UnicodeError):
        return None
    expected = answer.get("sha256")
    if expected and hashlib.sha256(data).hexdigest() != expected:
        return None
    return data


def _trust() -> ssl.SSLContext:
    """The trust httpx gives a client with `verify=True` (`httpx.create_ssl_context`): SSL_CERT_FILE,
    else SSL_CERT_DIR, else certifi's bundle."""
    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _get(endpoint: str, token: str, path: str) -> bytes | None:
    """One GET; the body of a plain 200 answer, or None."""
    parts = urlsplit(endpoint)
    connection: http.client.HTTPConnection
    if parts.scheme == "http":
        connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=TIMEOUT)
    elif parts.scheme == "https":
        connection = http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=TIMEOUT, context=_trust())
    else:
        return None
    try:
        connection.request(
            "GET",
            parts.path.rstrip("/") + path,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
        response = connection.getresponse()
        if response.status != 200 or response.getheader("Content-Encoding", "identity") != "identity":
            return None
        return response.read()
    finally:
        connection.close()


def notes_get(args: list[str]) -> int | None:
    """Answer `dovecote ARGS` here and return its exit code (0), or None for the full command."""
    parsed = _parse(args)
    if parsed is None or any(os.environ.get(n) or os.environ.get(n.lower()) for n in PROXIES):
        return None
    profile, positional, author, as_json = parsed
    ref = _ref(positional, author)
    if ref is None:
        return None
    try:
        config = resolve("caller", profile=profile)
        raw = _get(config.endpoint, config.token, f"/v1/notes/{quote(ref, safe='')}")
        answer = json.loads(raw) if raw is not None else None
    except Exception:  # noqa: BLE001 - any failure is the full command's to report, in its words
        return None
    if as_json:
        if not isinstance(answer, dict):
            return None
        sys.stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")  # as `common.print_json`
        return 0
    data = _body(answer)
    if data is None:
        return None
    sys.stdout.buffer.write(data)
    if data and not data.endswith(b"\n") and sys.stdout.isatty():
        sys.stdout.buffer.write(b"\n")  # the prompt on a line of its own, as `notes get` does (notes.py)
    return 0
