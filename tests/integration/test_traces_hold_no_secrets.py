"""X-Ray traces hold timings and routes, never data (issue 3/9, item 1). Every API handler runs with
tracing on, as in Lambda, in a fresh interpreter whose X-Ray daemon is this test's UDP socket; no
datagram may contain a token, a body's text or a presigned URL."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from tests.conftest import ROOT


def test_no_datagram_holds_a_token_a_body_or_a_url() -> None:
    daemon = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    daemon.bind(("127.0.0.1", 0))
    daemon.settimeout(0.2)
    port = daemon.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("POWERTOOLS_TRACE", "AWS_XRAY"))}
    env.update(
        AWS_XRAY_DAEMON_ADDRESS=f"127.0.0.1:{port}",
        AWS_XRAY_CONTEXT_MISSING="LOG_ERROR",
        LAMBDA_TASK_ROOT=str(ROOT),
        AWS_LAMBDA_FUNCTION_NAME="traced",
        POWERTOOLS_SERVICE_NAME="traced",
        POWERTOOLS_TRACE_DISABLED="false",
    )
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.traced_handlers"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    secrets = json.loads(run.stdout.strip().splitlines()[-1])
    datagrams: list[bytes] = []
    while True:
        try:
            datagrams.append(daemon.recv(65536))
        except TimeoutError:
            break
    daemon.close()
    text = b"\n".join(datagrams).decode("utf-8", "replace")
    # The trace really was recorded (otherwise the assertion below would hold vacuously).
    assert '"name": "## handler"' in text or '"name":"## handler"' in text, text[:2000]
    assert len(datagrams) >= 6
    for secret in secrets:
        assert secret not in text, f"a secret reached X-Ray: {secret[:24]}…"
        # A presigned URL's signature alone is enough to use it.
        if "X-Amz-Signature=" in secret:
            assert secret.split("X-Amz-Signature=")[1][:64] not in text
