"""Lambda SnapStart's runtime hooks (dovecote/platform/snapstart.py), run the way Lambda runs them.

Each case is a fresh interpreter initialized as Lambda initializes a version for a snapshot
(`AWS_LAMBDA_INITIALIZATION_TYPE=snap-start`): it imports a handler, runs the before-snapshot hooks
with AWS unreachable (priming must send no request), then "restores" into an environment whose AWS
endpoint is a moto server, runs the after-restore hooks and serves a real request. A client kept
from before the snapshot would still name the unreachable endpoint, so the request succeeding shows
the clients were rebuilt; `random` must not continue the sequence the snapshot would give every
restored environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from tests.conftest import ROOT

SCRIPT = r"""
import json, os, random, sys
from snapshot_restore_py import get_after_restore, get_before_snapshot

module_name, event = sys.argv[1], json.loads(sys.argv[2])
os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:9"  # nothing listens: any request fails
import importlib
module = importlib.import_module(module_name)
from dovecote.platform.schema import EdgeModel

def edge_models():
    pending, out = [EdgeModel], []
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        out.append(model)
    return out

out = {"registered": [len(get_before_snapshot()), len(get_after_restore())]}
out["complete_before"] = all(m.__pydantic_complete__ for m in edge_models())
for hook, args, kwargs in reversed(get_before_snapshot()):
    hook(*args, **kwargs)
out["complete_after_prime"] = all(m.__pydantic_complete__ for m in edge_models())
out["service_built"] = module.service.cache_info().currsize
out["task_commands_loaded"] = "dovecote.tasks.commands" in sys.modules
random.seed(1234)
snapshot = random.getstate()  # what every environment restored from the snapshot would start from

# ---- the restore: another environment, AWS reachable ------------------------------------------
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
os.environ["AWS_ENDPOINT_URL"] = f"http://{host}:{port}"
for hook, args, kwargs in get_after_restore():
    hook(*args, **kwargs)
out["service_after_restore"] = module.service.cache_info().currsize
clone = random.Random()
clone.setstate(snapshot)
out["random_repeats_snapshot"] = [random.random() for _ in range(4)] == [clone.random() for _ in range(4)]

from dovecote.platform import aws
from dovecote.platform.settings import get_settings
from infra.local.resources import DEFAULT_NAMES, create_all
env = create_all(dynamodb=aws.client("dynamodb"), s3=aws.client("s3"), secretsmanager=None, names=DEFAULT_NAMES)
assert env["DOVECOTE_NOTES_TABLE"] == get_settings().notes_table  # the defaults: nothing to set
if module_name.endswith("authorizer.handler"):
    from dovecote.admin.dynamo import DynamoTokenStore
    from dovecote.admin.service import TokenService
    token, _ = TokenService(DynamoTokenStore(table=env["DOVECOTE_TOKENS_TABLE"], dynamodb=aws.client("dynamodb")),
                            audit=lambda *_: None).mint(None, "snap", "caller", None)
    event["headers"]["authorization"] = f"Bearer {token}"
elif module_name.endswith("a2a_api.handler"):
    pass  # a JSON-RPC GetTask of a task nobody created: answered from the (new) client's read
else:
    from dovecote.notes.dynamo import DynamoNoteStore
    from dovecote.notes.service import NotesService, PutNote
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    store = DynamoNoteStore(table=env["DOVECOTE_NOTES_TABLE"], bucket=env["DOVECOTE_BUCKET"],
                            dynamodb=aws.client("dynamodb"), s3=aws.client("s3"))
    note = NotesService(store, CursorSigner(b"k" * 32)).put(Principal("snap", "caller"),
                                                            PutNote(key="k", run=1, name="n", text="restored"))
    event["rawPath"] = event["requestContext"]["http"]["path"] = f"/v1/notes/{note.ref}"
    event["pathParameters"] = {"ref": note.ref}

class Context:
    function_name = "snap"; memory_limit_in_mb = 1024; aws_request_id = "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:snap"
    log_group_name = "g"; log_stream_name = "s"
    def get_remaining_time_in_millis(self): return 29000

out["response"] = module.handler(event, Context())
server.stop()
print(json.dumps(out))
"""

CALLER = {"authority": "snap", "role": "caller", "worker": "", "agent": "", "token_id": ""}
NOTE_GET = {
    "version": "2.0",
    "routeKey": "GET /v1/notes/{ref}",
    "rawPath": "/v1/notes/x",
    "rawQueryString": "",
    "headers": {},
    "requestContext": {
        "http": {"method": "GET", "path": "/v1/notes/x", "sourceIp": "127.0.0.1", "protocol": "HTTP/1.1"},
        "requestId": "snap",
        "routeKey": "GET /v1/notes/{ref}",
        "stage": "$default",
        "authorizer": {"lambda": CALLER},
    },
    "pathParameters": {"ref": "x"},
    "isBase64Encoded": False,
}


def _restore(module: str, event: dict[str, Any], *, snapstart: bool = True) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "DOVECOTE_"))}
    env.update(
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_REGION="us-east-1",
        AWS_MAX_ATTEMPTS="1",
        DOVECOTE_CURSOR_KEY="snapstart-cursor-key-0123456789ab",
        POWERTOOLS_SERVICE_NAME="snap",
        POWERTOOLS_TRACE_DISABLED="true",
        POWERTOOLS_LOG_LEVEL="ERROR",
    )
    if snapstart:
        env["AWS_LAMBDA_INITIALIZATION_TYPE"] = "snap-start"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, module, json.dumps(event)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return dict(json.loads(result.stdout.strip().splitlines()[-1]))


def test_an_api_function_primes_without_aws_and_serves_from_new_clients_after_a_restore() -> None:
    out = _restore("functions.notes_api.handler", NOTE_GET)
    assert out["registered"] == [1, 1]
    assert out["complete_before"] is False  # the edge models are built on first use...
    assert out["complete_after_prime"] is True  # ...or by the priming hook, into the snapshot
    assert out["service_built"] == 1 and out["service_after_restore"] == 0
    assert out["random_repeats_snapshot"] is False
    response = out["response"]
    assert response["statusCode"] == 200, response
    assert json.loads(response["body"])["text"] == "restored"


def test_the_authorizer_rebuilds_its_client_after_a_restore() -> None:
    out = _restore("functions.authorizer.handler", {"headers": {}, "routeKey": "GET /v1/notes"})
    assert out["registered"] == [1, 1]
    assert out["service_built"] == 1 and out["service_after_restore"] == 0
    assert out["random_repeats_snapshot"] is False
    assert out["response"]["isAuthorized"] is True
    assert out["response"]["context"]["authority"] == "snap"


def test_without_snapstart_no_hook_is_registered_and_nothing_is_primed() -> None:
    out = _restore("functions.notes_api.handler", NOTE_GET, snapstart=False)
    assert out["registered"] == [0, 0]
    assert out["complete_after_prime"] is False and out["service_built"] == 0
    assert out["response"]["statusCode"] == 200


def test_the_a2a_function_primes_every_task_capability_and_reads_through_new_clients_after_a_restore() -> None:
    event = {
        **NOTE_GET,
        "routeKey": "POST /",
        "rawPath": "/",
        "headers": {"a2a-version": "1.0", "content-type": "application/json"},
        "requestContext": {**NOTE_GET["requestContext"], "routeKey": "POST /"},
        "pathParameters": {},
        "body": json.dumps({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "never-created"}}),
    }
    out = _restore("functions.a2a_api.handler", event)
    assert out["registered"] == [1, 1]
    assert out["service_built"] == 1 and out["service_after_restore"] == 0
    assert out["task_commands_loaded"] is True  # the lazy capabilities, loaded into the snapshot
    assert out["random_repeats_snapshot"] is False
    answer = json.loads(out["response"]["body"])
    # Not found is an answer from DynamoDB: a client kept from the snapshot would reach nothing.
    assert answer["id"] == 7 and answer["error"]["code"] == -32001, answer
