"""Writes tests/data/tasks-v1/store.json: a tasks table as the v1 layout's adapter wrote it, and what
that adapter answered, for tests/integration/test_task_layout_migration.py.

It runs the task service of commit 4cd1fb2 (the last v1 writer) on moto, drives a few tasks through
the states a table holds (completed with an input round, working under a claim, submitted and
claimable, leased again after a fence), then records every item of the table and the v1 service's
answers: each task's reads, the lists, and each command with its answer (an exact retry must replay
it). Written once; kept as data, so the test needs no old code:

    git archive 4cd1fb2 shared | tar -x -C /tmp/v1
    PYTHONPATH=/tmp/v1/shared:. .venv/bin/python tests/data/tasks-v1/generate.py

This project's own data (no third-party content), under the repository's licence.
"""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("store.json")


def wire(value: Any) -> Any:
    """DynamoDB JSON as the wire carries it: binary values base64."""
    if isinstance(value, dict):
        return {k: (base64.b64encode(v).decode() if k == "B" else wire(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [wire(v) for v in value]
    return value


def main() -> None:
    from moto import mock_aws

    os.environ.update({"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x", "AWS_DEFAULT_REGION": "us-east-1"})
    with mock_aws():
        import boto3

        from dovecote.platform.cursors import CursorSigner
        from dovecote.platform.principal import Principal
        from dovecote.tasks.dynamo import DynamoTaskStore
        from dovecote.tasks.records import TASKS_TABLE
        from dovecote.tasks.service import TaskService

        ddb, s3 = boto3.client("dynamodb"), boto3.client("s3")
        ddb.create_table(**TASKS_TABLE.create_table_kwargs("tasks"))
        s3.create_bucket(Bucket="bucket")
        moments = iter(datetime(2026, 11, 1, 9, 0, tzinfo=UTC) + timedelta(seconds=i) for i in range(10_000))
        service = TaskService(
            DynamoTaskStore(table="tasks", bucket="bucket", dynamodb=ddb, s3=s3),
            CursorSigner(b"v1-fixture-key-0123456789abcdefg"),
            clock=lambda: next(moments),
        )
        gate = service.gate
        caller = Principal("acme", "caller")
        w1, w2 = Principal("acme", "worker", "w1"), Principal("acme", "worker", "w2")
        commands: list[dict[str, Any]] = []

        def run(kind: str, who: Principal, *args: Any) -> dict[str, Any]:
            outcome = getattr(service, kind)(who, getattr(gate, kind)(who, *args))
            role = "w2" if who is w2 else who.role if who.role == "caller" else "w1"
            commands.append(
                {"kind": kind, "who": role, "args": list(args), "status": outcome.status, "body": outcome.body}
            )
            return dict(outcome.body)

        def text(words: str, message_id: str, **extra: Any) -> dict[str, Any]:
            return {"id": message_id, "parts": [{"media_type": "text/plain", "text": words}], **extra}

        # t-done: an input round, then completed.
        url = {"media_type": "application/pdf", "url": "https://files.example.com/spec.pdf", "filename": "spec.pdf"}
        first = text("please summarise the design notes", "m-done-1")
        first["parts"].append(url)
        base = {"workspace": "ws", "context": "ctx-1"}
        run("create", caller, {"command_id": "c-done-1", "id": "t-done", "message": first, **base})
        fence = run("acquire", w1, "t-done", {"command_id": "c-done-2"})["assignment"]["fence"]
        run("accept", w1, "t-done", {"command_id": "c-done-3", "expected_revision": 1, "fence": fence})
        ask = {"command_id": "c-done-4", "expected_revision": 2, "fence": fence, "message": text("which?", "m-done-2")}
        run("request_input", w1, "t-done", ask)
        reply = {"command_id": "c-done-5", "expected_revision": 3, "message": text("the API ones", "m-done-3")}
        run("reply", caller, "t-done", reply)
        done = text("here is the summary", "m-done-4", metadata={"kind": "summary"})
        body = {"command_id": "c-done-6", "expected_revision": 4, "fence": fence, "submission_id": "s-done"}
        run("complete", w1, "t-done", {**body, "message": done})
        # t-work: claimed (the claimable index), accepted.
        run("create", caller, {"command_id": "c-work-1", "id": "t-work", "message": text("do it", "m-work-1"), **base})
        claimed = run("claim", w1, {"command_id": "c-work-2"})["assignment"]
        assert claimed["task"]["id"] == "t-work", claimed
        run("accept", w1, "t-work", {"command_id": "c-work-3", "expected_revision": 1, "fence": claimed["fence"]})
        # t-fenced: leased, fenced by its worker, leased again by another (its grant keeps the end).
        other = {"workspace": "ws", "context": "ctx-2"}
        run("create", caller, {"command_id": "c-fen-1", "id": "t-fenced", "message": text("x", "m-fen-1"), **other})
        run("acquire", w1, "t-fenced", {"command_id": "c-fen-2"})
        run("fence", w1, "t-fenced", {"command_id": "c-fen-3", "fence": 1})
        run("acquire", w2, "t-fenced", {"command_id": "c-fen-4"})
        # t-open: submitted, claimable.
        run("create", caller, {"command_id": "c-open-1", "id": "t-open", "message": text("y", "m-open-1"), **other})

        reads: dict[str, Any] = {}
        for task_id in ("t-done", "t-work", "t-fenced", "t-open"):
            messages = service.messages(caller, task_id, None, None)
            reads[task_id] = {
                "get": service.get(caller, task_id),
                "events": service.events(caller, task_id, None, None),
                "messages": messages,
                "messages_after_1_limit_1": service.messages(caller, task_id, 1, 1),
                "grants": service.grants(caller, task_id, None, None),
                "by_id": {m["id"]: service.message(caller, task_id, m["id"]) for m in messages["items"]},
            }
        lists = {
            "tasks": service.list_tasks(caller, _filter(), 100, None)["items"],
            "ctx-1": service.list_context(caller, "ctx-1", 100, None)["items"],
            "leases_w1": service.list_leases(w1, None, None)["items"],
        }
        items = ddb.scan(TableName="tasks")["Items"]
        items.sort(key=lambda i: (i["pk"]["S"], i["sk"]["S"]))
        OUT.write_text(
            json.dumps(
                {"written_by": "4cd1fb2", "items": wire(items), "commands": commands, "reads": reads, "lists": lists},
                indent=1,
                sort_keys=True,
            )
            + "\n"
        )
        print(f"written: {OUT} ({len(items)} items, {len(commands)} commands)")


def _filter() -> Any:
    from dovecote.tasks.ports import TaskFilter

    return TaskFilter()


if __name__ == "__main__":
    main()
