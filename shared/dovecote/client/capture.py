"""Transcript capture: push transcript files incrementally and idempotently.

What is sent is decided by the server, not by a local memory of it: before pushing, a
`TranscriptPusher` asks which of the files' SHA-256 digests the authority lacks (`POST
/v1/transcripts/check`, one request per 1,000 files) and sends exactly those. A server started
`--fresh`, or a token of another authority, lacks them all, so they are sent again. The state file
(the SHA-256 last pushed per file, keyed by endpoint *and* the token's authority from `GET
/v1/whoami`) is the fallback for a server without the check route. When the token is refused or
Dovecote cannot be reached, every file fails with that reason (nothing is taken as unchanged).
Re-ingesting a changed file replaces its session on the server (idempotent by session id).

Formats: Claude Code and Codex JSONL files go as they are; a file in the generic form (any other
tool's conversation: dovecote.client.generic) goes as the generic JSON body, and the digest asked
about is that body's, as the server keeps it.

Three callers share it: `dovecote recall push` (a tree, once), `dovecote recall push --watch`
(a tree, polled) and `dovecote recall hook` (the one file a Claude Code hook names). The last two
run beside an agent, so they never raise: every failure is an outcome with a reason, kept in a log.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_STATE = Path("~/.dovecote/recall-push.json")
DEFAULT_LOG = Path("~/.dovecote/recall-push.log")
FORMATS = ("claude-code-jsonl", "codex-jsonl", "generic")
# The generic form is sent inline only (POST /v1/transcripts); this much JSON at most.
MAX_GENERIC_BYTES = 4 * 1024 * 1024
# A `.json` file is read whole to sniff it (the generic form's document); up to this size.
MAX_SNIFF_DOCUMENT = 64 * 1024 * 1024
# The log is for a person reading why a push failed: it is cut back to its newest half past this.
MAX_LOG_BYTES = 1024 * 1024
# The state names the endpoint and the log names files and failures: the user's only. `dovecote
# recall push` and `hook` set this umask at start; the files are created (and fixed) 0600 regardless.
PRIVATE_UMASK = 0o077
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")


def private_umask() -> int:
    """Files and directories the capture creates from now on are the user's only; returns the old umask."""
    return os.umask(PRIVATE_UMASK)


def redact_urls(text: str) -> str:
    """Every URL in `text` without its userinfo, query and fragment: an endpoint may carry
    `user:pass@` or a token in its query, and a presigned URL its signature."""

    def bare(found: re.Match[str]) -> str:
        url = found.group(0)
        trail = len(url) - len(url.rstrip(".,:;)]"))  # the sentence's punctuation, not the URL's
        scheme, rest = url[: len(url) - trail].split("://", 1)
        head = re.split(r"[?#]", rest, maxsplit=1)[0]
        # Up to the last "@": a password written with a raw "/" must not leak either.
        return f"{scheme}://{head.rpartition('@')[2]}{url[len(url) - trail :]}"

    return _URL.sub(bare, text)


def sniff_format(path: Path) -> str | None:
    """The transcript format from the first JSON line, or from the whole of a `.json` document (None
    when it is none of Claude Code, Codex and the generic form)."""
    from dovecote.client.generic import GENERIC, looks_generic

    first: Any = None
    try:
        with path.open("rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                try:
                    first = json.loads(raw)
                except ValueError:
                    first = None
                break
            else:
                return None
        if first is None and path.suffix == ".json" and path.stat().st_size <= MAX_SNIFF_DOCUMENT:
            first = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(first, dict):
        return None
    if "payload" in first and "type" in first or "record_type" in first:
        return "codex-jsonl"
    if "id" in first and "timestamp" in first and "type" not in first:
        return "codex-jsonl"  # the legacy rollout header
    if "sessionId" in first or first.get("type") in ("summary", "user", "assistant", "system", "file-history-snapshot"):
        return "claude-code-jsonl"
    if looks_generic(first):
        return GENERIC
    return None


def project_folder(path: Path) -> str:
    """`~/.claude/projects/<folder>/…`: the folder names the project when a file has no cwd."""
    parts = path.parts
    if "projects" in parts:
        index = len(parts) - 1 - parts[::-1].index("projects")
        if index + 1 < len(parts) - 1:
            return parts[index + 1]
    return ""


def transcript_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Every `.jsonl` file under the given files and trees, once each, in a stable order."""
    seen: set[Path] = set()
    for root in paths:
        root = root.expanduser()
        if not root.exists():
            continue
        candidates = [root] if root.is_file() else sorted(root.rglob("*.jsonl"))
        for candidate in candidates:
            resolved = candidate.resolve()
            if resolved not in seen and resolved.is_file():
                seen.add(resolved)
                yield resolved


def hook_files(transcript: Path) -> list[Path]:
    """The session file a Claude Code hook names, then its subagents' files (`<session>/subagents/`)."""
    files = [transcript]
    subagents = transcript.with_suffix("") / "subagents"
    if subagents.is_dir():
        files += sorted(p for p in subagents.glob("*.jsonl") if p.is_file())
    return files


@dataclass(frozen=True, slots=True)
class Outcome:
    path: str
    status: str  # pushed | unchanged | skipped | failed
    messages: int = 0
    queued: bool = False
    reason: str = ""
    size: int = 0
    code: str = ""  # a failed push's error (HTTP status 0 with `unavailable`: Dovecote was not reached)
    http_status: int = 0
    message: str = ""


class TranscriptPusher:
    """Pushes files through one client; `push` never raises for a file or server problem."""

    def __init__(
        self,
        client: Any,
        state_path: Path = DEFAULT_STATE,
        *,
        fmt: str | None = None,
        project: str | None = None,
        force: bool = False,
    ) -> None:
        self.client = client
        self.state_path = state_path.expanduser()
        self.fmt = fmt
        self.project = project
        self.force = force
        self._state = _load_state(self.state_path)
        self._known: dict[str, str] | None = None  # the state of (endpoint, authority), after whoami
        self._on_server: set[str] | None = None  # digests the server has (None: it cannot say)
        self._refused: Any = None  # the DovecoteError every push fails with (a refused token, no server)

    def _prepare(self, path: Path, data: bytes) -> tuple[str | None, str, dict[str, Any] | None]:
        """(the file's format or None, the digest the server keeps for it, the generic body or None).
        Raises GenericFormError for a generic-form file that is wrong."""
        from dovecote.client.generic import GENERIC, body_digest, read_generic

        file_format = self.fmt or sniff_format(path)
        if file_format != GENERIC:
            return file_format, hashlib.sha256(data).hexdigest(), None
        body = read_generic(path, data, project=self.project)
        return file_format, body_digest(body), body

    def check(self, paths: Iterable[Path]) -> None:
        """Ask who the token is and which of these files the server lacks, before pushing them. A
        refusal or an unreachable server makes every push fail with its reason."""
        from dovecote.client import DovecoteError
        from dovecote.client.generic import GenericFormError

        digests = set()
        for path in paths:
            with contextlib.suppress(OSError, GenericFormError):
                digests.add(self._prepare(path, path.read_bytes())[1])
        try:
            if self._known is None:
                authority = self.client.whoami()["authority"]
                self._known = self._state.setdefault(f"{self.client.endpoint}#{authority}", {})
            lacking = set(self.client.check_transcripts(sorted(digests))) if digests else set()
        except DovecoteError as exc:
            if exc.status == 404 and self._known is not None:
                self._on_server = None  # a server without the check route: the state decides
                return
            self._refused = exc
            return
        self._refused = None
        self._on_server = (self._on_server or set()) | (digests - lacking)

    def _failed(self, path: Path, size: int, exc: Any) -> Outcome:
        reason = f"{exc.status} {exc.code}: {exc.message}" if exc.status else f"{exc.code}: {exc.message}"
        return Outcome(
            str(path), "failed", reason=reason, size=size, code=exc.code, http_status=exc.status, message=exc.message
        )

    def push(self, path: Path) -> Outcome:
        from dovecote.client import DovecoteError
        from dovecote.client.generic import GenericFormError

        try:
            data = path.read_bytes()
        except OSError as exc:
            return Outcome(str(path), "failed", reason=f"cannot read: {exc.strerror or exc}")
        try:
            file_format, digest, body = self._prepare(path, data)
        except GenericFormError as exc:
            return Outcome(str(path), "failed", reason=f"not the generic form: {exc}", size=len(data))
        if file_format is None:
            reason = "not a Claude Code, Codex or generic-form transcript"
            return Outcome(str(path), "skipped", reason=reason, size=len(data))
        if body is not None and len(json.dumps(body)) > MAX_GENERIC_BYTES:
            reason = f"the generic form goes inline, at most {MAX_GENERIC_BYTES} bytes of JSON: split it into sessions"
            return Outcome(str(path), "failed", reason=reason, size=len(data))
        if self._known is None and self._refused is None:
            self.check([path])
        if self._refused is not None:
            return self._failed(path, len(data), self._refused)
        known = self._known if self._known is not None else {}
        if not self.force:
            if self._on_server is not None and digest in self._on_server:
                return Outcome(str(path), "unchanged", size=len(data))
            if self._on_server is None and known.get(str(path)) == digest:
                return Outcome(str(path), "unchanged", size=len(data))
        try:
            if body is not None:
                result = self.client.ingest_messages(
                    body["session_id"], body["messages"], source=body["source"], project=body["project"]
                )
            else:
                result = self.client.push_transcript(
                    path, file_format, project=self.project, project_folder=project_folder(path) or None, data=data
                )
        except DovecoteError as exc:
            return self._failed(path, len(data), exc)
        if self._on_server is not None:
            self._on_server.add(digest)
        known[str(path)] = digest
        _save_state(self.state_path, self._state)  # a crash mid-tree keeps what got through
        return Outcome(
            str(path),
            "pushed",
            messages=int(result.get("messages_indexed") or 0),
            queued=bool(result.get("queued")),
            size=len(data),
        )


class Watcher:
    """Polls trees and pushes a file once it is new or changed and has held still for one poll (a
    transcript being appended to is pushed when the agent pauses, not at every line)."""

    def __init__(self, pusher: TranscriptPusher, roots: list[Path]) -> None:
        self.pusher = pusher
        self.roots = roots
        self._seen: dict[str, tuple[int, int]] = {}
        self._settled: dict[str, tuple[int, int]] = {}

    def poll(self) -> list[Outcome]:
        ready: list[tuple[Path, tuple[int, int]]] = []
        for path in transcript_files(self.roots):
            try:
                stat = path.stat()
            except OSError:
                continue
            signature = (stat.st_mtime_ns, stat.st_size)
            key = str(path)
            if self._settled.get(key) == signature:
                continue
            if self._seen.get(key) != signature:
                self._seen[key] = signature  # changed since the last poll: wait for it to hold still
                continue
            ready.append((path, signature))
        if ready:
            self.pusher.check(path for path, _ in ready)
        outcomes: list[Outcome] = []
        for path, signature in ready:
            outcome = self.pusher.push(path)
            if outcome.status != "failed":
                self._settled[str(path)] = signature  # a failure is retried at the next poll
            outcomes.append(outcome)
        return outcomes


def log_outcomes(log_path: Path, source: str, outcomes: Iterable[Outcome]) -> None:
    """One line per pushed or failed file; never raises (a log that cannot be written is skipped)."""
    lines = [
        f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {source} {o.status} {o.path}"
        + (f" ({o.messages} messages{', queued' if o.queued else ''})" if o.status == "pushed" else "")
        + (f": {o.reason}" if o.reason else "")
        for o in outcomes
        if o.status in ("pushed", "failed")
    ]
    if lines:
        log_line(log_path, "\n".join(lines))


def log_line(log_path: Path, text: str) -> None:
    """Append to the log (0600, URLs without credentials or query); never raises."""
    with contextlib.suppress(OSError):
        path = log_path.expanduser()
        _private_parent(path)
        if path.exists() and path.stat().st_size > MAX_LOG_BYTES:
            kept = path.read_bytes()[-MAX_LOG_BYTES // 2 :]
            path.write_bytes(kept[kept.find(b"\n") + 1 :])
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            os.fchmod(fd, PRIVATE_FILE)  # a log written before (0644) becomes private too
            handle.write(redact_urls(text).rstrip("\n") + "\n")


def _private_parent(path: Path) -> None:
    """Create the file's directory 0700; `~/.dovecote` (the capture's own) is made 0700 if it was not.
    Another directory the user named keeps its mode."""
    path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    if path.parent == DEFAULT_LOG.parent.expanduser():
        os.chmod(path.parent, PRIVATE_DIR)


def _load_state(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _save_state(path: Path, state: dict[str, Any]) -> None:
    _private_parent(path)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")  # two pushers at once never share a temp file
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "w") as handle:
        os.fchmod(fd, PRIVATE_FILE)
        handle.write(json.dumps(state, indent=1, sort_keys=True))
    tmp.replace(path)  # the state names the endpoint, credentials included if it has any: 0600
