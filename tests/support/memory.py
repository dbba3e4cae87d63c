"""The memory service as its HTTP handler drives it (functions/memory_api/handler.py): each request
body (a dict) validated by its model and handed to the service as its typed input (`input()`); every
typed answer turned into the JSON the API answers, by the route's own response model. Tests that
speak the API's JSON to the service use it, so they hold the edge's serializer too."""

from __future__ import annotations

from typing import Any

from dovecote.memory.service import MemoryService
from dovecote.platform.principal import Principal
from dovecote.platform.schema import validated
from functions.memory_api import models as out


def wire(model: type[out.ApiModel], answer: Any) -> dict[str, Any]:
    """`answer` as the route answers it: read by its response model, dumped under the wire's names."""
    return dict(model.model_validate(answer).model_dump(mode="json", by_alias=True))


class MemoryEdge:
    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def submit(self, principal: Principal, body: Any) -> dict[str, Any]:
        return wire(out.SubmitOut, self.service.submit(principal, validated(out.SubmitIn, body).input()))

    def status(self, principal: Principal, write_id: str, wait: int | None = None) -> dict[str, Any]:
        return wire(out.WriteStatusOut, self.service.status(principal, write_id, wait))

    def cancel(self, principal: Principal, write_id: str) -> dict[str, Any]:
        return wire(out.CancelOut, self.service.cancel(principal, write_id))

    def list_memories(self, principal: Principal, scope: str, limit: int | None, cursor: str | None) -> dict[str, Any]:
        return wire(out.MemoryPage, self.service.list_memories(principal, scope, limit, cursor))

    def list_relations(
        self, principal: Principal, scope: str, status: str, limit: int | None, cursor: str | None
    ) -> dict[str, Any]:
        return wire(out.RelationPage, self.service.list_relations(principal, scope, status, limit, cursor))

    def judge(self, principal: Principal, relation_id: str, body: Any) -> dict[str, Any]:
        judged = self.service.judge(principal, relation_id, validated(out.JudgmentIn, body).input())
        return wire(out.RelationEnvelope, {"relation": judged})

    def redrive(self, principal: Principal, limit: int | None = None) -> dict[str, Any]:
        return wire(out.RedriveOut, self.service.redrive(principal, limit))
