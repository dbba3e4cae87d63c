"""HTTP shapes of the memory routes (API.md § Memory). Types only: dovecote.memory holds the rules
(the one gate per input is dovecote.memory.model; these models refuse wrong JSON types first)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from dovecote.platform.http import ApiModel


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubmitIn(_In):
    id: StrictStr
    scope: StrictStr
    content: StrictStr
    tags: list[StrictStr] | None = None


class JudgmentIn(_In):
    command_id: StrictStr
    decision: StrictStr = Field(description="confirmed | dismissed")
    note: StrictStr | None = None


class RedriveIn(_In):
    limit: StrictInt = Field(description="how many dead letters to look at, 1–100")


class SubmitOut(ApiModel):
    id: str
    scope: str
    status: str


class CandidateOut(ApiModel):
    model_config = ConfigDict(populate_by_name=True)

    id: str | None = Field(default=None, description="the stored relation's id (for a judgment)")
    from_: str = Field(alias="from")
    to: str
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
    from_: str = Field(alias="from")
    to: str
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
