"""An A2A 1.0 client for Dovecote, with the official `a2a-sdk`: read the public Agent Card, send a
message, print the task it made (docs/clients/a2a.md).

The endpoint and the caller's token are found as the CLI finds them (`dovecote.client.config`:
`--profile`, DOVECOTE_ENDPOINT + DOVECOTE_TOKEN, the `default` profile, the nearest
`.dovecote/dev-tokens.json`, the `dev` profile), so after `make dev` it needs no setting.

    .venv/bin/python examples/a2a_client.py "summarise the design doc"            # waits (≤ 20 s)
    .venv/bin/python examples/a2a_client.py "hello" --immediately                 # answers at once
    .venv/bin/python examples/a2a_client.py "all of it" --task-id TASK --context-id CONTEXT  # a reply
    .venv/bin/python examples/a2a_client.py --subscribe TASK   # each update, until it ends or needs input

SendMessage waits for the task to end or to need input, so a worker should be running: any Dovecote
worker serves A2A tasks (`examples/echo_worker.py`, `examples/a2a_worker.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
    TaskStatus,
)
from a2a.utils.errors import A2AError

from dovecote.client.config import resolve
from dovecote.client.errors import DovecoteError


async def send(text: str, *, immediately: bool, task_id: str, context_id: str, profile: str | None) -> dict[str, str]:
    config = resolve("caller", profile=profile)
    headers = {"Authorization": f"Bearer {config.token}"}
    async with httpx.AsyncClient(headers=headers, timeout=40) as http:
        card = await A2ACardResolver(http, config.endpoint).get_agent_card()  # public: no token needed
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
        if task_id:  # a reply to a task that waits for input
            message.task_id, message.context_id = task_id, context_id
        request = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=immediately)
        )
        async for answer in client.send_message(request):  # one answer: the Task (or a Message)
            if not answer.HasField("task"):
                return {"message": " ".join(p.text for p in answer.message.parts)}
            task = answer.task
            said = " ".join(p.text for p in task.status.message.parts) if task.status.HasField("message") else ""
            return {
                "task_id": task.id,
                "context_id": task.context_id,
                "state": TaskState.Name(task.status.state),
                "agent_said": said,
            }
    raise SystemExit("the server sent no answer")


def _status(status: TaskStatus) -> dict[str, str]:
    said = " ".join(p.text for p in status.message.parts) if status.HasField("message") else ""
    return {"state": TaskState.Name(status.state), "agent_said": said}


async def subscribe(task_id: str, *, profile: str | None) -> None:
    """SubscribeToTask: print the task, then each update as it commits (one JSON line each), until
    the task ends or needs input (then it is the caller's turn: reply, and subscribe again). A stream
    the server closes at its time limit (840 s locally, under 15 minutes in the cloud) is opened again:
    it starts with the task as it stands, printed only when its state moved."""
    config = resolve("caller", profile=profile)
    headers = {"Authorization": f"Bearer {config.token}"}
    stop = {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
    ended = {TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED}
    ended |= {TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED}
    shown: TaskState.ValueType | None = None
    async with httpx.AsyncClient(headers=headers, timeout=40) as http:
        card = await A2ACardResolver(http, config.endpoint).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
        while True:
            async for answer in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                kind = answer.WhichOneof("payload")
                if kind == "artifact_update":  # the task's published artifact, before its completion
                    print(json.dumps({"task_id": task_id, "artifact": answer.artifact_update.artifact.artifact_id}))
                    continue
                status = answer.task.status if kind == "task" else answer.status_update.status
                if kind == "task" and status.state == shown:
                    continue  # a stream opened again: the task where the last one left it
                print(json.dumps({"task_id": task_id} | _status(status)), flush=True)
                shown = status.state
                if status.state in stop or status.state in ended:
                    return
            # The server closed the stream before the task ended or needed input: its time limit.


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("text", nargs="?", default="", help="the message's text")
    parser.add_argument("--immediately", action="store_true", help="answer at once (returnImmediately)")
    parser.add_argument("--task-id", default="", help="reply to this task (it must wait for input)")
    parser.add_argument("--context-id", default="", help="the task's context, with --task-id")
    parser.add_argument("--profile", default=None, help="a profile of ~/.config/dovecote/config.toml")
    parser.add_argument("--subscribe", default="", metavar="TASK_ID", help="follow this task's updates instead")
    args = parser.parse_args()
    if args.subscribe and args.text:
        parser.error("--subscribe follows a task: give no message text with it")
    if not args.subscribe and not args.text:
        parser.error("the message's text is required (or --subscribe TASK_ID)")
    try:
        if args.subscribe:
            asyncio.run(subscribe(args.subscribe, profile=args.profile))
            return
        answer = asyncio.run(
            send(
                args.text,
                immediately=args.immediately,
                task_id=args.task_id,
                context_id=args.context_id,
                profile=args.profile,
            )
        )
    except (A2AError, DovecoteError, httpx.HTTPError) as exc:
        # One line, as the CLI says it (the server's message says what and why), not a traceback.
        # httpx's status errors add a second line (a link to MDN): the first one says it.
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise SystemExit(f"error: {type(exc).__name__}: {first}") from None
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
