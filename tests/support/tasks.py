"""A driver for task flows, shared by the unit, conformance and race tests."""

from __future__ import annotations

import inspect
import itertools
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, get_type_hints

import pytest

from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import DomainError
from dovecote.platform.principal import Principal
from dovecote.platform.schema import validated
from dovecote.tasks.command_loop import Outcome
from dovecote.tasks.dynamo import DynamoTaskStore
from dovecote.tasks.limits import EXPIRY_SHARDS
from dovecote.tasks.memory import InMemoryTaskStore
from dovecote.tasks.ports import TaskStore
from dovecote.tasks.service import TaskService
from dovecote.tasks.storage import FLEET_CLAIM_SHARDS, claim_shard
from tests.support.stores import fake_or_moto
from tests.support.threads import together

CALLER = Principal("acme", "caller")
WORKER = Principal("acme", "worker", "w1")
OTHER_WORKER = Principal("acme", "worker", "w2")
_ids = itertools.count(1)


@dataclass(frozen=True)
class WireOutcome:
    """A command's outcome as the API answers it: its status and its JSON body."""

    status: int
    body: dict[str, Any]
    replayed: bool = False


class Edge:
    """The task service as the HTTP handler drives it: each request body (a dict) validated by its
    model (dovecote.tasks.bodies), through its command's one gate (`TaskService.gate`), then the
    command; every answer turned into the JSON the API answers, by the HTTP edge's own serializer
    (functions/tasks_api/models.py). Anything else passes straight through."""

    def __init__(self, service: TaskService) -> None:
        self.service = service

    def __getattr__(self, name: str) -> Any:
        run = getattr(self.service, name)
        gate = getattr(self.service.gate, name, None)
        wire = _wire_of(name)
        if gate is None:
            if wire is None:
                return run
            return lambda *args, **options: wire(run(*args, **options))
        model = body_model(name)

        def gated(principal: Principal, *args: Any, **options: Any) -> Any:
            *path, body = args
            answer = run(principal, gate(principal, *path, validated(model, body)), **options)
            if isinstance(answer, Outcome):
                return WireOutcome(answer.status, wire(answer.answer) if wire else {}, answer.replayed)
            return wire(answer) if wire else answer

        return gated

    def list_tasks_after(self, principal: Principal, task_filter: Any, task: dict[str, Any]) -> str:
        from dovecote.tasks.model import TaskView

        return self.service.list_tasks_after(principal, task_filter, TaskView.from_json(task))


def _wire_of(name: str) -> Callable[[Any], dict[str, Any]] | None:
    """How the HTTP handler answers what the service's method `name` returns."""
    from functions.tasks_api import models as out

    def dump(model: Any, key: str = "") -> Callable[[Any], dict[str, Any]]:
        return lambda value: model.model_validate({key: value} if key else value).model_dump(mode="json")

    def messages(page: Any) -> dict[str, Any]:
        items = [out.message_out(m) for m in page.items]
        return out.MessagePage(items=items, next=page.next, has_more=page.has_more).model_dump(mode="json")

    tasks = dump(out.TaskOut)
    table: dict[str, Callable[[Any], dict[str, Any]]] = {
        **dict.fromkeys(("create", "reply", "cancel", "accept", "reject", "fail", "request_input", "complete"), tasks),
        "freeze": dump(out.FreezeOut),
        "acquire": dump(out.AssignmentEnvelope, "assignment"),
        "claim": dump(out.AssignmentEnvelope, "assignment"),
        "heartbeat": dump(out.AssignmentEnvelope, "assignment"),
        "get_lease": dump(out.AssignmentEnvelope, "assignment"),
        "list_leases": dump(out.LeaseListOut),
        "create_artifact_upload": dump(out.ArtifactUploadOut),
        "record_apply_receipt": dump(out.ReceiptEnvelope, "receipt"),
        "get_apply_receipt": dump(out.ReceiptEnvelope, "receipt"),
        "worker_event": dump(out.SettlementOut),
        "get": dump(out.TaskReadOut),
        "snapshot": dump(out.SnapshotOut),
        "messages": messages,
        "message": lambda read: out.MessageEnvelope(message=out.message_out(read)).model_dump(mode="json"),
        "events": dump(out.EventPage),
        "grants": dump(out.GrantPage),
        "list_context": dump(out.ContextTasksOut),
        "list_tasks": dump(out.TaskListOut),
        "get_artifact": lambda read: out.payload_out(read).model_dump(mode="json"),
        "get_head": dump(out.HeadOut),
    }
    return table.get(name)


def field_of(error: DomainError) -> str:
    """The input a refusal names: a broken rule's `field`, or a type error's first problem (pydantic's
    path, `message.parts.0.url`, written as the rules write it, `message.parts[0].url`)."""
    if "field" in error.details:
        return str(error.details["field"])
    path = str(error.details["problems"][0]["field"])
    return re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", path)


def body_model(gate: str) -> Any:
    """The model of the body a gate method reads (its last parameter's annotation)."""
    from dovecote.tasks import bodies, commands

    method = getattr(commands.CommandGate, gate)
    hints = get_type_hints(method, {**vars(commands), "bodies": bodies})
    return hints[list(inspect.signature(method).parameters)[-1]]


def edge(store: TaskStore, signer: CursorSigner | None = None, **options: Any) -> Edge:
    """A TaskService over `store` (options as TaskService takes them), driven through its gates."""
    return Edge(TaskService(store, signer, **options))


def dynamo_store(env: dict[str, Any], **options: Any) -> DynamoTaskStore:
    """The DynamoDB TaskStore over a moto environment (the `moto_env` fixture); options as the store
    takes them (a protector)."""
    s = env["settings"]
    return DynamoTaskStore(table=s.tasks_table, bucket=s.bucket, dynamodb=env["dynamodb"], s3=env["s3"], **options)


def store_of(request: Any, make_dynamo: Callable[[dict[str, Any]], TaskStore] = dynamo_store) -> TaskStore:
    """The store a fixture with `params=["memory", "dynamo"]` stands for: the conformance suites run
    every scenario once per store."""
    return fake_or_moto(request, InMemoryTaskStore, make_dynamo)


def service_fixture(key: bytes, *, clocked: bool = False) -> Any:
    """The `service` fixture of a conformance module: an Edge over each TaskStore in turn (the fake,
    then DynamoDB on moto) with cursors signed by `key`; `clocked`: on the test's `clock` fixture."""

    @pytest.fixture(params=["memory", "dynamo"], name="service")
    def service(request: pytest.FixtureRequest) -> Edge:
        options = {"clock": request.getfixturevalue("clock")} if clocked else {}
        return edge(store_of(request), CursorSigner(key), **options)

    return service


def force_task(service: Edge, task_id: str, *, authority: str = "acme", **changes: Any) -> None:
    """Change a stored task behind the service's back, on whichever store the service holds: the
    states no sequence of commands reaches in a test (a fence or revision at 2^63-1). The fake's
    record is replaced; DynamoDB's item is rewritten whole through the adapter's own mapping, so its
    index keys stay consistent with the changed task, and with the records it holds inline."""
    from dovecote.tasks.dynamo_inline import inline_of
    from dovecote.tasks.dynamo_items import get_item, task_pk

    store = service.store
    if isinstance(store, InMemoryTaskStore):
        store.tasks[(authority, task_id)] = store.tasks[(authority, task_id)].evolve(**changes)
        return
    item = get_item(store.items.tasks, task_pk(authority, task_id), "T")
    assert item is not None, task_id
    store.items.task_item(store.items.task(item).evolve(**changes), inline_of(item)).save()


def code_of(call: Callable[[], Any]) -> str:
    """The stable error code `call` raises, or "ok"."""
    try:
        call()
        return "ok"
    except DomainError as err:
        return err.code


class Clock:
    """The service's clock, moved by the test (lease and accept timeouts)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def dispatch(service: Edge) -> dict[str, int]:
    """One dispatcher pass over every expiry shard: how many leases it fenced and lost."""
    totals = {"fenced": 0, "lost": 0}
    for shard in range(EXPIRY_SHARDS):
        for name, n in service.expire_silent_leases(shard, limit=100, command_id=lambda t: uid("x")).items():
            totals[name] += n
    return totals


def against_dispatcher(service: Edge, call: Callable[[], Any]) -> tuple[str, str]:
    """`call` (a worker's) and one dispatcher pass, released at once (real threads): the worker's
    outcome ("ok" or the code it raised) and the dispatcher's ("fenced" or "lost")."""
    outcomes = together(2, lambda i: code_of(call) if i == 0 else "fenced" if dispatch(service)["fenced"] else "lost")
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
    return outcomes[0], outcomes[1]


class ShardOrder(random.Random):
    """A claim's choices made for the test: the shards in the order given (then the rest), and the
    oldest candidate of a page (`randrange` → 0)."""

    def __init__(self, *first: int) -> None:
        super().__init__(0)
        self.first = first

    def sample(self, population: Any, k: int, **_: Any) -> list[Any]:
        shards = list(population)
        return [*(s for s in self.first if s in shards), *(s for s in shards if s not in self.first)][:k]

    def randrange(self, *_: Any, **__: Any) -> int:
        return 0


def ids_in_distinct_shards(count: int, shards: int = FLEET_CLAIM_SHARDS, authority: str = "acme") -> list[str]:
    """Task ids, in increasing order, each in a shard of its own."""
    found: dict[int, str] = {}
    for n in range(10_000):
        task_id = f"sharded-{n:05d}"
        found.setdefault(claim_shard(authority, task_id, shards), task_id)
        if len(found) == count:
            break
    return sorted(found.values())


def uid(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def message(text: str = "hello", message_id: str | None = None) -> dict[str, Any]:
    return {"id": message_id or uid("m"), "parts": [{"media_type": "text/plain", "text": text}]}


def create_body(task_id: str, *, workspace: str = "ws", context: str = "c", text: str = "x") -> dict[str, Any]:
    """A `POST /v1/tasks` body: a first message of one text part, fresh command and message ids."""
    return {"command_id": uid("c"), "workspace": workspace, "id": task_id, "context": context, "message": message(text)}


@dataclass
class Flow:
    """One task driven through the service, tracking revision and fence like a real client."""

    service: Edge
    task_id: str = field(default_factory=lambda: uid("t"))
    revision: int = 0
    fence: int = 0
    worker: Principal = WORKER
    context: str = "ctx"
    workspace: str = "ws"

    def create(self, **extra: Any) -> WireOutcome:
        out = self.service.create(
            CALLER,
            {
                "command_id": uid("c"),
                "workspace": self.workspace,
                "id": self.task_id,
                "context": self.context,
                "message": message("do it"),
                **extra,
            },
        )
        self.revision = out.body["revision"]
        return out

    def acquire(self) -> WireOutcome:
        out = self.service.acquire(self.worker, self.task_id, {"command_id": uid("c")})
        self.fence = out.body["assignment"]["fence"]
        return out

    def worker_cmd(self, kind: str, **extra: Any) -> WireOutcome:
        body = {"command_id": uid("c"), "expected_revision": self.revision, "fence": max(self.fence, 1), **extra}
        if kind in ("request_input", "complete") and "message" not in body:
            body["message"] = message("from the agent")
        if kind == "complete" and "submission_id" not in body:
            body["submission_id"] = uid("s")
        out = getattr(self.service, kind)(self.worker, self.task_id, body)
        self.revision = out.body["revision"]
        return out

    def caller_cmd(self, kind: str, **extra: Any) -> WireOutcome:
        body = {"command_id": uid("c"), "expected_revision": self.revision, **extra}
        if kind == "reply" and "message" not in body:
            body["message"] = message("from the caller")
        out = getattr(self.service, kind)(CALLER, self.task_id, body)
        self.revision = out.body["revision"]
        return out

    def to_state(self, state: str) -> Flow:
        """Drive a new task to `state` the shortest way."""
        self.create()
        if state == "submitted":
            return self
        if state == "canceled":
            self.caller_cmd("cancel")
            return self
        self.acquire()
        if state == "rejected":
            self.worker_cmd("reject")
            return self
        self.worker_cmd("accept")
        if state == "working":
            return self
        if state == "completed":
            self.worker_cmd("complete")
            return self
        if state == "failed":
            self.worker_cmd("fail")
            return self
        self.worker_cmd("request_input")
        assert state == "input_required"
        return self


def freeze_body(
    flow: Flow, artifact_id: str | None = None, base: str = "rev-0", text: str = "the patch", **extra: Any
) -> dict[str, Any]:
    return {
        "command_id": uid("c"),
        "expected_revision": flow.revision,
        "fence": flow.fence,
        "artifact_id": artifact_id or uid("a"),
        "expected_base_revision": base,
        "payload": {"media_type": "text/x-diff", "text": text},
        **extra,
    }


def freeze(flow: Flow, **kw: Any) -> WireOutcome:
    out = flow.service.freeze(flow.worker, flow.task_id, freeze_body(flow, **kw))
    flow.revision = out.body["task"]["revision"]
    return out


def put_upload(service: Edge, body: bytes, authority: str = "acme") -> str:
    """Stands in for the client's PUT to the presigned URL, for either store. Returns the sha256."""
    import hashlib

    sha = hashlib.sha256(body).hexdigest()
    store: Any = service.store  # the test plays the client's S3 PUT
    if hasattr(store, "upload"):
        store.upload(authority, body)
    else:
        store.items.s3.put_object(Bucket=store.items.bucket, Key=f"uploads/artifacts/{authority}/{sha}", Body=body)
    return sha


def receipt_body(artifact: dict[str, Any], decision: str = "success", **extra: Any) -> dict[str, Any]:
    body = {
        "command_id": uid("c"),
        "receipt_id": uid("r"),
        "artifact_digest": artifact["digest"],
        "base_revision": artifact["base_revision"],
        "result_revision": artifact["result_revision"],
        "decision": decision,
    }
    if decision == "success":
        body["observed_revision"] = artifact["result_revision"]
    return {**body, **extra}
