"""A `dovecote dev --data` directory whose tasks table the v1 layout wrote (tests/data/tasks-v1: the
v1 adapter's own items), restarted under this adapter: its tasks read as the v1 service answered,
its receipts replay, and its tasks go on (docs/design/tasks.md#where-a-commands-records-live). Real
`dovecote dev` processes, real HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import httpx

from dovecote.platform.protection import Protector
from tests.e2e.conftest import bearer, start_dev
from tests.support.authorities import moto_endpoint
from tests.support.tasks_v1 import load

AUTHORITY = "dev"  # the dev runtime's tokens


def test_a_data_directory_of_the_v1_layout_reads_and_goes_on(tmp_path: Path) -> None:
    data = tmp_path / "state"
    # No dispatcher: the fixture's leases are long past their deadlines, and it would fence them.
    with start_dev(tmp_path, "--data", str(data), "--dispatch-interval", "0") as dev:
        env = json.loads((data / "env.json").read_text())["env"]
        aws = {
            "endpoint_url": moto_endpoint(dev),
            "region_name": "us-east-1",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        # The parts sealed under the runtime's data key, as a v1 `dovecote dev` sealed them; the items
        # written to its moto are journaled like any other write.
        protector = Protector(boto3.client("kms", **aws), env["DOVECOTE_DATA_KEY_ID"])
        ddb = boto3.client("dynamodb", **aws)
        fixture = load(ddb, env["DOVECOTE_TASKS_TABLE"], AUTHORITY, protector=protector)
        # As a DIR written before the tasks table's stream carried its new image.
        ddb.update_table(TableName=env["DOVECOTE_TASKS_TABLE"], StreamSpecification={"StreamEnabled": False})
        tokens = dev["tokens"]
    with (
        start_dev(tmp_path, "--data", str(data), "--dispatch-interval", "0") as again,
        httpx.Client(base_url=again["endpoint"], timeout=30) as http,
    ):
        caller = bearer(tokens["caller"])
        table = boto3.client("dynamodb", **{**aws, "endpoint_url": moto_endpoint(again)}).describe_table(
            TableName=env["DOVECOTE_TASKS_TABLE"]
        )["Table"]
        assert table["StreamSpecification"]["StreamViewType"] == "NEW_IMAGE"  # the restore aligned it
        for task_id, reads in fixture["reads"].items():
            assert http.get(f"/v1/tasks/{task_id}", headers=caller).json() == reads["get"]
            assert http.get(f"/v1/tasks/{task_id}/events", headers=caller).json() == reads["events"]
            assert http.get(f"/v1/tasks/{task_id}/messages", headers=caller).json() == reads["messages"]
        w1 = http.post(
            "/v1/admin/tokens",
            json={"authority": AUTHORITY, "role": "worker", "worker": "w1"},
            headers=bearer(tokens["admin"]),
        ).json()["token"]
        worker = bearer(w1)
        accept = next(c for c in fixture["commands"] if c["args"][0] == "t-work" and c["kind"] == "accept")
        replayed = http.post("/v1/tasks/t-work/accept", json=accept["args"][1], headers=worker)
        assert replayed.status_code == 200 and replayed.json()["task"] == accept["body"]
        ask = {
            "command_id": "after-v1-1",
            "expected_revision": 2,
            "fence": 1,
            "message": {"id": "after-v1-m", "parts": [{"media_type": "text/plain", "text": "which?"}]},
        }
        asked = http.post("/v1/tasks/t-work/request-input", json=ask, headers=worker)
        assert asked.status_code == 200, asked.text
        messages = http.get("/v1/tasks/t-work/messages", headers=caller).json()["items"]
        assert [m["id"] for m in messages] == ["m-work-1", "after-v1-m"]
        events = http.get("/v1/tasks/t-work/events", headers=caller).json()["items"]
        assert [e["type"] for e in events] == ["task_submitted", "task_accepted", "input_required"]
        assert http.get("/v1/tasks/t-work/messages/after-v1-m", headers=caller).json()["message"] == messages[1]
