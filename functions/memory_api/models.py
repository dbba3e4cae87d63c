"""HTTP shapes of the memory routes (docs/services/memory.md), and the HTTP edge's one serializer of
the memory service's typed answers: each response model is read from the attributes of the record or
answer the service returns (ApiModel: from_attributes; a relation's `from_id`/`to_id` are the wire's
`from`/`to`). Request bodies are types only: they refuse wrong JSON types, then `input()` hands the
service its typed input, whose rules are the one gate per input (dovecote.memory.model)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, ConfigDict, Field, StrictStr

from dovecote.memory.model import (
    DECISIONS,
    MAX_CONTENT_BYTES,
    MAX_NOTE_CHARS,
    MAX_TAGS,
    SCOPE_PATTERN,
    SUBJECT_PREFIX,
    TAG_PATTERN,
    JudgmentInput,
    WriteInput,
)
from dovecote.memory.service import RELATION_ID
from dovecote.platform.http import ApiModel
from dovecote.platform.schema import ID, PY_SPACE, RequestModel, one_of, utf8_text

# The gate's rules, declared (tests/e2e/test_schemathesis.py holds the two together). Sizes are in
# UTF-8 bytes, declared as such (platform/schema.py utf8_text).
SCOPE: dict[str, Any] = {"pattern": f"^{SCOPE_PATTERN.pattern}$"}
RELATION: dict[str, Any] = {"pattern": f"^{RELATION_ID.pattern}$"}
# Some visible character, and no NUL; at most MAX_CONTENT_BYTES (8 KiB) of UTF-8.
CONTENT: dict[str, Any] = utf8_text(MAX_CONTENT_BYTES, minLength=1, pattern=f"^[^\\x00]*[^\\x00{PY_SPACE}][^\\x00]*$")
# `subject:` in any case: at most one such tag, and it has a key. Distinct case-insensitively is the
# one rule JSON Schema cannot state (uniqueItems compares exactly).
_SUBJECT = "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in SUBJECT_PREFIX)
TAGS: dict[str, Any] = {
    "maxItems": MAX_TAGS,
    "uniqueItems": True,
    "contains": {"pattern": f"^{_SUBJECT}"},
    "minContains": 0,
    "maxContains": 1,
}
TAG: dict[str, Any] = {"pattern": f"^{TAG_PATTERN.pattern}$", "not": {"pattern": f"^{_SUBJECT}$"}}
NOTE: dict[str, Any] = {"maxLength": MAX_NOTE_CHARS, "pattern": r"^[^\x00]*$"}


class SubmitIn(RequestModel):
    """Tags are distinct case-insensitively, with at most one `subject:<key>` (the gate's 400s)."""

    id: StrictStr = Field(json_schema_extra=ID)
    scope: StrictStr = Field(json_schema_extra=SCOPE)
    content: StrictStr = Field(json_schema_extra=CONTENT)
    tags: list[Annotated[StrictStr, Field(json_schema_extra=TAG)]] | None = Field(default=None, json_schema_extra=TAGS)

    def input(self) -> WriteInput:
        return WriteInput(self.id, self.scope, self.content, tuple(self.tags or ()))


class JudgmentIn(RequestModel):
    command_id: StrictStr = Field(json_schema_extra=ID)
    decision: StrictStr = Field(json_schema_extra=one_of(*DECISIONS))
    note: StrictStr | None = Field(default=None, json_schema_extra=NOTE)

    def input(self) -> JudgmentInput:
        return JudgmentInput(self.command_id, self.decision, self.note or "")


# A relation record's names for its two ends (the wire's are `from` and `to`).
FROM = AliasChoices("from", "from_id")
TO = AliasChoices("to", "to_id")


class SubmitOut(ApiModel):
    id: str
    scope: str
    status: str


class CandidateOut(ApiModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str | None = Field(default=None, description="the stored relation's id (for a judgment)")
    from_: str = Field(alias="from", validation_alias=FROM)
    to: str = Field(validation_alias=TO)
    verb: str
    note: str
    evidence_ids: list[str]


class EvidenceError(ApiModel):
    code: str
    message: str


class EvidenceOut(ApiModel):
    code: str = Field(
        description="goncho_write_complete | goncho_write_cancelled | goncho_relation_detection_failed | "
        "goncho_write_failed"
    )
    write_ok: bool
    candidates: list[CandidateOut]
    error: EvidenceError | None = None


class WriteStatusOut(ApiModel):
    id: str
    scope: str
    status: str = Field(description="queued | started | cancelled | complete | failed")
    evidence: EvidenceOut | None = None


class CancelOut(ApiModel):
    id: str
    cancelled: bool


class MemoryOut(ApiModel):
    id: str
    scope: str
    content: str
    tags: list[str]
    applied_at: str
    seq: int = Field(description="place in the scope, in applied order (1, 2, ...)")


class MemoryPage(ApiModel):
    items: list[MemoryOut]
    cursor: str | None = None


class JudgmentOut(ApiModel):
    decision: str
    note: str
    judged_at: str


class RelationOut(ApiModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str
    scope: str
    from_: str = Field(alias="from", validation_alias=FROM)
    to: str = Field(validation_alias=TO)
    verb: str
    note: str
    evidence_ids: list[str]
    status: str = Field(description="pending | confirmed | dismissed")
    created_at: str
    judgment: JudgmentOut | None = None


class RelationPage(ApiModel):
    items: list[RelationOut]
    cursor: str | None = None


class RelationEnvelope(ApiModel):
    relation: RelationOut


class RedriveOut(ApiModel):
    moved: int
    writes: list[str]
