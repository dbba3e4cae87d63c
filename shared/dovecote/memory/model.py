"""Memory writes, memories, relation candidates and evidence, and the one validation gate per input.
Pure.

Vocabulary (docs/design/memory.md):
- a *memory write* is what an agent submits: {id, scope, content, tags}. Its id is the idempotency
  key of the submit and, once applied, the id of the memory it became;
- a *memory* is an applied write, numbered by `seq` inside its scope in applied order;
- a *relation candidate* is a PENDING edge (from the new memory to an earlier one) that the
  detector proposes; only a later, separate judgment confirms or dismisses it;
- *evidence* is the outcome of one write, with one of the reference's four codes.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from dataclasses import dataclass
from typing import Any, NamedTuple

from dovecote.platform import ids, paging
from dovecote.platform.errors import InvalidArgument
from dovecote.platform.records import Receipt as Receipt  # a judgment command's, as every service keeps it
from dovecote.platform.records import canonical_digest, fields_json
from dovecote.platform.records import intent_digest as intent_digest  # a judgment's command id is bound by it

# The house id pattern (platform.ids). '#' cannot occur, so the store's keys are injective.
ID_PATTERN = ids.ID_PATTERN
# A scope may be hierarchical ("team/project"); still no '#'.
SCOPE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
TAG_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/=-]{0,63}")
# A memory is a fact, not a document: a bound keeps every item, the index and the detector small.
MAX_CONTENT_BYTES = 8 * 1024
MAX_TAGS = 16
# `subject:<key>` names what a memory is about; a newer memory on the same subject supersedes (or
# contradicts) the older one. At most one per memory, so "the subject" is well defined.
SUBJECT_PREFIX = "subject:"
MAX_WAIT_SECONDS = 20
DEFAULT_PAGE = 100
MAX_PAGE = 100
MAX_NOTE_CHARS = 1000

# The reference's evidence codes (part of the public contract).
WRITE_COMPLETE = "goncho_write_complete"
WRITE_CANCELLED = "goncho_write_cancelled"
RELATION_DETECTION_FAILED = "goncho_relation_detection_failed"
WRITE_FAILED = "goncho_write_failed"
EVIDENCE_CODES = (WRITE_COMPLETE, WRITE_CANCELLED, RELATION_DETECTION_FAILED, WRITE_FAILED)

# The reference's relation vocabulary. The default detector never emits `scoped` (it has no notion of
# a narrower scope than the one a memory is written to); a custom detector may.
VERBS = ("related", "conflicts_with", "supersedes", "compatible", "scoped", "not_conflict")
RELATION_STATUSES = ("pending", "confirmed", "dismissed")
DECISIONS = ("confirmed", "dismissed")


def _check(value: Any, pattern: re.Pattern[str], field_name: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidArgument(f"{field_name} must match {pattern.pattern}", field=field_name)
    return value


def check_id(value: Any, field_name: str = "id") -> str:
    return ids.check_id(value, field_name)


def check_scope(value: Any) -> str:
    return _check(value, SCOPE_PATTERN, "scope")


def page_limit(limit: int | None) -> int:
    return paging.page_limit(limit, default=DEFAULT_PAGE, maximum=MAX_PAGE)


def check_wait(wait: int | None) -> int:
    if wait is None:
        return 0
    if isinstance(wait, bool) or not isinstance(wait, int) or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise InvalidArgument(f"wait must be between 0 and {MAX_WAIT_SECONDS} seconds", field="wait")
    return wait


def _utf8(value: str, field_name: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800") is not text
        raise InvalidArgument(f"{field_name} is not valid Unicode text", field=field_name) from None


def check_text(value: Any, field_name: str, *, limit: int) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{field_name} must be a string", field=field_name)
    size = len(_utf8(value, field_name))
    if size > limit:
        raise InvalidArgument(f"{field_name} is {size} bytes; the limit is {limit}", field=field_name, limit=limit)
    if "\x00" in value:
        raise InvalidArgument(f"{field_name} must not contain NUL", field=field_name)
    return value


def _field(value: str) -> bytes:
    data = value.encode("utf-8")
    return struct.pack(">Q", len(data)) + data


def digest(*parts: str) -> str:
    """SHA-256 over length-prefixed parts (injective: no part can shift bytes into another)."""
    return hashlib.sha256(b"".join(_field(p) for p in parts)).hexdigest()


@dataclass(frozen=True, slots=True)
class WriteInput:
    id: str
    scope: str
    content: str
    tags: tuple[str, ...] = ()

    @property
    def subject(self) -> str:
        return subject_of(self.tags)

    @property
    def digest(self) -> str:
        """What an exact resubmit must repeat: scope, content and tags (the id is the key)."""
        return canonical_digest({"scope": self.scope, "content": self.content, "tags": list(self.tags)})


def subject_of(tags: tuple[str, ...]) -> str:
    """The subject key of a memory ('' when it has none), compared case-insensitively."""
    for tag in tags:
        if tag.lower().startswith(SUBJECT_PREFIX):
            return tag[len(SUBJECT_PREFIX) :].lower()
    return ""


def gate_write(given: WriteInput) -> WriteInput:
    """The one gate for a submitted memory write's rules; its JSON types are the HTTP edge's (the
    body model, functions/memory_api/models.py SubmitIn). Tags keep their order; duplicates are
    refused rather than folded, so what is stored is exactly what was sent."""
    write_id = check_id(given.id, "id")
    scope = check_scope(given.scope)
    content = check_text(given.content, "content", limit=MAX_CONTENT_BYTES)
    if not content.strip():
        raise InvalidArgument("content must not be empty", field="content")
    if len(given.tags) > MAX_TAGS:
        raise InvalidArgument(f"at most {MAX_TAGS} tags", field="tags", limit=MAX_TAGS)
    tags = tuple(_check(tag, TAG_PATTERN, f"tags[{i}]") for i, tag in enumerate(given.tags))
    if len({t.lower() for t in tags}) != len(tags):
        raise InvalidArgument("tags must be distinct (case-insensitively)", field="tags")
    subjects = [t for t in tags if t.lower().startswith(SUBJECT_PREFIX)]
    if len(subjects) > 1:
        raise InvalidArgument("at most one subject: tag", field="tags")
    if subjects and subjects[0][len(SUBJECT_PREFIX) :] == "":
        raise InvalidArgument("a subject: tag needs a key, e.g. subject:deploy-window", field="tags")
    return WriteInput(write_id, scope, content, tags)


class Submitted(NamedTuple):
    """A submit's answer, a first submit's and an exact resubmit's alike: the write is queued (what
    became of it since is the status read's to say)."""

    id: str
    scope: str
    status: str = "queued"


class Cancellation(NamedTuple):
    """A cancel's answer: whether the write will never start (the service's `cancel`)."""

    id: str
    cancelled: bool


class Redriven(NamedTuple):
    """A redrive's answer: how many of this authority's writes went back to the queue, and their ids
    in order."""

    moved: int
    writes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One PENDING relation from the new memory to an earlier one (the reference's RelationCandidate)."""

    from_id: str
    to_id: str
    verb: str
    note: str
    evidence_ids: tuple[str, ...]

    @property
    def id(self) -> str:
        return relation_id(self.from_id, self.to_id, self.verb)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, **_edge_json(self)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Candidate:
        return Candidate(data["from"], data["to"], data["verb"], data["note"], tuple(data["evidence_ids"]))


def _edge_json(edge: Candidate | Relation) -> dict[str, Any]:
    """The fields a relation candidate and a relation name alike."""
    return {
        "from": edge.from_id,
        "to": edge.to_id,
        "verb": edge.verb,
        "note": edge.note,
        "evidence_ids": list(edge.evidence_ids),
    }


def relation_id(from_id: str, to_id: str, verb: str) -> str:
    """Deterministic, so a redelivered write stores the same relation under the same key."""
    return "r-" + digest(from_id, to_id, verb)[:32]


@dataclass(frozen=True, slots=True)
class Evidence:
    """The reference's WriteEvidence: callers inspect code and write_ok before trusting candidates."""

    code: str
    write_ok: bool
    candidates: tuple[Candidate, ...] = ()
    error: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "write_ok": self.write_ok,
            "candidates": [c.to_json() for c in self.candidates],
        }
        if self.error:
            out["error"] = dict(self.error)
        return out

    @staticmethod
    def from_json(data: dict[str, Any]) -> Evidence:
        return Evidence(
            data["code"],
            bool(data["write_ok"]),
            tuple(Candidate.from_json(c) for c in data.get("candidates", [])),
            data.get("error"),
        )


def error_facts(exc: BaseException) -> dict[str, str]:
    """An exception as evidence data: a stable code and a bounded message."""
    code = getattr(exc, "code", "") or type(exc).__name__
    return {"code": str(code), "message": str(exc)[:500] or type(exc).__name__}


@dataclass(frozen=True, slots=True)
class Write:
    """The stored state of one memory write (the write item)."""

    authority: str
    id: str
    scope: str
    content: str
    tags: tuple[str, ...]
    digest: str
    status: str
    submitted_at: str
    updated_at: str
    # The SQS send was confirmed. A queued write that was never sent is re-sent by a status read or
    # an exact resubmit, so a failed send cannot lose it.
    sent: bool = False
    # Bumped by each redrive; part of the SQS deduplication id, so a redriven write is not dropped
    # as a duplicate of its first send.
    generation: int = 0
    # A cancelled write the worker has seen (the reference's "cancelled and consumed").
    consumed: bool = False
    evidence: Evidence | None = None
    seq: int = 0  # the memory's place in its scope once applied; 0 before

    @property
    def input(self) -> WriteInput:
        return WriteInput(self.id, self.scope, self.content, self.tags)


@dataclass(frozen=True, slots=True)
class Memory:
    authority: str
    id: str
    scope: str
    seq: int
    content: str
    tags: tuple[str, ...]
    applied_at: str

    @property
    def subject(self) -> str:
        return subject_of(self.tags)


@dataclass(frozen=True, slots=True)
class Judgment:
    decision: str
    note: str
    judged_at: str
    command_id: str

    def to_json(self) -> dict[str, Any]:
        return {"decision": self.decision, "note": self.note, "judged_at": self.judged_at}


@dataclass(frozen=True, slots=True)
class Relation:
    authority: str
    scope: str
    from_id: str
    to_id: str
    verb: str
    note: str
    evidence_ids: tuple[str, ...]
    from_seq: int
    to_seq: int
    created_at: str
    status: str = "pending"
    judgment: Judgment | None = None

    @property
    def id(self) -> str:
        return relation_id(self.from_id, self.to_id, self.verb)

    @property
    def position(self) -> str:
        """Its place in a scope's relation list: by the new memory's seq, then id."""
        return f"{self.from_seq:020d}#{self.id}"

    def to_json(self) -> dict[str, Any]:
        edge = {"id": self.id, "scope": self.scope, **_edge_json(self)}
        return {**edge, **fields_json(self, ("status", "created_at"), ("judgment",))}


@dataclass(frozen=True, slots=True)
class JudgmentInput:
    command_id: str
    decision: str
    note: str = ""


def gate_judgment(given: JudgmentInput) -> JudgmentInput:
    """The one gate for a judgment's rules; its JSON types are the HTTP edge's (JudgmentIn)."""
    command_id = check_id(given.command_id, "command_id")
    if given.decision not in DECISIONS:
        raise InvalidArgument(f"decision must be one of {', '.join(DECISIONS)}", field="decision")
    note = check_text(given.note, "note", limit=MAX_NOTE_CHARS * 4)
    if len(note) > MAX_NOTE_CHARS:
        raise InvalidArgument(f"note is longer than {MAX_NOTE_CHARS} characters", field="note")
    return JudgmentInput(command_id, given.decision, note)


@dataclass(frozen=True, slots=True)
class QueueMessage:
    """What travels through SQS: a reference to the write item, never its content (the worker reads
    the item anyway, in the same round trip as the queued → started flip)."""

    authority: str
    id: str
    scope: str
    generation: int = 0

    def to_body(self) -> str:
        return json.dumps(
            {"v": 1, "authority": self.authority, "id": self.id, "scope": self.scope, "generation": self.generation},
            sort_keys=True,
            separators=(",", ":"),
        )

    @staticmethod
    def from_body(body: str) -> QueueMessage:
        """Raises ValueError for anything that is not a message this service sent."""
        try:
            data = json.loads(body)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError("not a version-1 memory write message")
        authority, write_id, scope, generation = (data.get(k) for k in ("authority", "id", "scope", "generation"))
        if not isinstance(authority, str) or not ID_PATTERN.fullmatch(authority):
            raise ValueError("bad authority")
        if not isinstance(write_id, str) or not ID_PATTERN.fullmatch(write_id):
            raise ValueError("bad write id")
        if not isinstance(scope, str) or not SCOPE_PATTERN.fullmatch(scope):
            raise ValueError("bad scope")
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 0:
            raise ValueError("bad generation")
        return QueueMessage(authority, write_id, scope, generation)

    @property
    def group_id(self) -> str:
        """FIFO MessageGroupId: one group per (authority, scope), so a scope's writes are serialized
        and scopes run in parallel. A digest keeps the authority out of SQS metadata."""
        return digest("group", self.authority, self.scope)

    @property
    def deduplication_id(self) -> str:
        return digest("write", self.authority, self.id, str(self.generation))
