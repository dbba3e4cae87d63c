"""`dovecote dev` serves requests from threads of one process; each must be answered as its own
principal with its own body (infra/local/isolation.py). Checked on cold routes, where the first
request of a function imports and wires for a long while, and then on warm ones."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.conftest import bearer, start_dev
from tests.support.tasks import create_body


def _round(endpoint: str, tokens: dict[str, str]) -> dict[str, tuple[int, str]]:
    tid = f"iso-{uuid.uuid4().hex[:8]}"
    barrier = threading.Barrier(3)
    out: dict[str, tuple[int, str]] = {}

    def create() -> None:
        barrier.wait()
        body = create_body(tid, workspace="w")
        r = httpx.post(f"{endpoint}/v1/tasks", json=body, headers=bearer(tokens["caller"]), timeout=120)
        out["create"] = (r.status_code, r.text[:200])

    def leases() -> None:
        barrier.wait()
        r = httpx.get(f"{endpoint}/v1/leases", headers=bearer(tokens["worker"]), timeout=120)
        out["leases"] = (r.status_code, r.text[:200])

    def claim() -> None:
        barrier.wait()
        r = httpx.post(
            f"{endpoint}/v1/leases/claim",
            json={"command_id": f"k-{tid}"},
            headers=bearer(tokens["worker"]),
            timeout=120,
        )
        out["claim"] = (r.status_code, r.text[:200])

    threads = [threading.Thread(target=f) for f in (create, leases, claim)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_concurrent_requests_are_answered_as_their_own_principal(tmp_path: Path) -> None:
    with start_dev(tmp_path, "--dispatch-interval", "0") as runtime:
        endpoint, tokens = runtime["endpoint"], runtime["tokens"]
        rounds: list[dict[str, Any]] = [_round(endpoint, tokens) for _ in range(6)]  # the first is cold
    for out in rounds:
        assert out["create"][0] == 201, out
        assert out["leases"][0] == 200, out
        assert out["claim"][0] in (200, 404), out
