"""Claim throughput per authority on real DynamoDB, modelled (issue 21): a discrete-event simulation of
the claim's real request sequence (grown from the team's first contention model); beside it, a moto
bench with 32 real threads that checks the code's claims are exactly-once and counts their requests.

What one claim does (dovecote/tasks/leases.py, `Leases.claim`, strategy `claim` here), with the sparse
`claimable` index keyed authority#<shard> (S = settings.claim_shards: 1 by default, the reference's strict
order; a large fleet sets more, and 16 is the count modelled here):
1. GetItem of the command's receipt (a replay answers from it);
2. Query of a random shard, then Query of another (one after the other), one page of CLAIM_CANDIDATES
   (16) each, oldest first; the index is eventually consistent: it shows commits older than LAG;
3. the page whose oldest task is older first: a random pick among its oldest k (8), TransactWriteItems
   on it (the grant, its receipt, the task's CAS); a lost race (the condition fails: another worker
   owns it) picks again from the same page; a page used up moves to the other one, then to the other
   shards in random order, one Query each;
4. after 16 candidates, or every shard read, it is "no claimable task": a long-polling worker sleeps
   CLAIM_BACKOFF (250 ms, doubling up to 2 s) and tries again from step 2.
With S = 1 it is the reference rule: one Query, strictly the oldest candidate first (strategy `oldest`).

Other strategies, for comparison: `topk` (one partition, a random pick among the oldest k), `sharded`
(a claim queries one random shard and picks among its oldest k), `sharded2` (two random shards queried
at once, the older head wins). The backlog is endless, so no shard is ever empty in the model (the
moto bench drains a finite one, and ends on empty shards).

Reported: claims per second, and the order skew: the p99 of a claimed task's age rank (how many
unclaimed tasks were older at the moment of the claim; 0 is the oldest), and how that skew moves with
the length of the run (one random shard drifts; two choices do not). Latencies are typical
single-digit-millisecond DynamoDB figures, assumptions, not measurements.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any

from dovecote.platform.schema import validated
from dovecote.tasks.bodies import CreateTaskIn

GET_MS, QUERY_MS, TRANSACT_MS, LAG_MS = 5.0, 8.0, 12.0, 20.0
PAGE = 16  # CLAIM_CANDIDATES
BACKOFF_MS = (250.0, 2000.0)  # CLAIM_BACKOFF: the long-poll's first pause, doubling up to the second


@dataclass(frozen=True)
class Figures:
    strategy: str
    workers: int
    claims_per_s: float
    p99_age_rank: int
    requests_per_claim: float


def simulate(
    workers: int,
    strategy: str = "oldest",
    *,
    k: int = 8,
    shards: int = 1,
    seconds: float = 4.0,
    seed: int = 1,
) -> Figures:
    rnd = random.Random(seed)
    owned_at: dict[int, float] = {}
    # Tasks are numbered oldest first; task n lives in shard n % shards.
    visible_from = [s for s in range(shards)]  # per shard: below this, every task is owned and visible so
    truly_from = 0  # below this, every task is owned (for the age rank)
    inflight: dict[int, list[tuple[float, float, int]]] = {}
    pages: dict[int, list[list[int]]] = {}  # per worker: the pages read and not used up, in the order tried
    unread: dict[int, list[int]] = {}  # per worker ("claim"): the shards this attempt has still to read
    tried: dict[int, int] = {}  # per worker: candidates tried in this attempt (at most PAGE)
    pause: dict[int, float] = {}  # per worker: the long-poll's next backoff
    events: list[tuple[float, int, str, Any]] = []
    for w in range(workers):
        heapq.heappush(events, (rnd.random() * GET_MS, w, "receipt", None))
    claims = requests = 0
    ranks: list[int] = []
    horizon = seconds * 1000

    def page_of(shard: int, t: float) -> list[int]:
        n = visible_from[shard]
        while n in owned_at and owned_at[n] <= t - LAG_MS:
            n += shards
        visible_from[shard] = n
        page = []
        while len(page) < PAGE:
            if not (n in owned_at and owned_at[n] <= t - LAG_MS):
                page.append(n)
            n += shards
        return page

    def back_off(t: float, w: int) -> None:
        # Nothing claimable in this attempt: the long-poll sleeps, then queries again (no receipt read).
        heapq.heappush(events, (t + pause[w], w, "query", None))
        pause[w] = min(pause[w] * 2, BACKOFF_MS[1])

    while events:
        t, w, kind, arg = heapq.heappop(events)
        if t > horizon:
            break
        if kind == "receipt":
            requests += 1
            pause[w] = BACKOFF_MS[0]
            heapq.heappush(events, (t + GET_MS, w, "query", None))
        elif kind == "query":
            tried[w] = 0
            requests += 1
            if strategy == "claim":
                # The code (Leases._candidates): a random order of the shards; the first two are read
                # one after the other, the rest only once the pages before are used up.
                order = rnd.sample(range(shards), shards)
                pages[w], unread[w] = [page_of(order[0], t)], order[1:]
                heapq.heappush(events, (t + QUERY_MS, w, "second" if unread[w] else "pick", None))
                continue
            if strategy == "sharded":
                pages[w] = [page_of(rnd.randrange(shards), t)]
            elif strategy == "sharded2":
                # Two random shards queried at once (one more request, the same latency); the page whose
                # oldest task is older wins: the shards' heads cannot drift apart (two choices).
                first, second = rnd.sample(range(shards), 2)
                pages[w] = [min(page_of(first, t), page_of(second, t), key=lambda page: page[0])]
                requests += 1
            else:
                pages[w] = [page_of(0, t)]
            heapq.heappush(events, (t + QUERY_MS, w, "pick", None))
        elif kind == "second":
            requests += 1
            pages[w].append(page_of(unread[w].pop(0), t))
            pages[w].sort(key=lambda page: page[0] if page else float("inf"))  # the older head first
            heapq.heappush(events, (t + QUERY_MS, w, "pick", None))
        elif kind == "next shard":
            requests += 1
            pages[w] = [page_of(unread[w].pop(0), t)]
            heapq.heappush(events, (t + QUERY_MS, w, "pick", None))
        elif kind == "pick":
            queue = pages[w]
            while queue and not queue[0]:
                queue.pop(0)
            if strategy == "claim" and not queue and unread[w] and tried[w] < PAGE:
                heapq.heappush(events, (t, w, "next shard", None))
                continue
            if not queue or tried[w] >= PAGE:
                back_off(t, w)
                continue
            page = queue[0]
            strict = strategy == "oldest" or (strategy == "claim" and shards == 1)
            task = page.pop(0 if strict else rnd.randrange(min(k, len(page))))
            tried[w] += 1
            end = t + TRANSACT_MS * (0.8 + 0.4 * rnd.random())
            inflight.setdefault(task, []).append((t, end, w))
            heapq.heappush(events, (end, w, "commit", (task, t)))
        elif kind == "commit":
            requests += 1
            task, start = arg
            windows = inflight[task]
            windows.remove(next(x for x in windows if x[2] == w and x[0] == start))
            overlapping = any(s < t and e > start for s, e, _ in windows)
            if task in owned_at or (overlapping and rnd.random() < 0.5):
                heapq.heappush(events, (t, w, "pick", None))  # lost: another candidate
                continue
            while truly_from in owned_at:
                truly_from += 1
            ranks.append(sum(1 for n in range(truly_from, task) if n not in owned_at))
            owned_at[task] = t
            claims += 1
            heapq.heappush(events, (t + 1.0, w, "receipt", None))  # the next claim; the work is elsewhere
    ranks.sort()
    p99 = ranks[min(len(ranks) - 1, int(len(ranks) * 0.99))] if ranks else 0
    return Figures(strategy, workers, claims / seconds, p99, requests / max(claims, 1))


STRATEGIES: dict[str, dict[str, Any]] = {
    "oldest (the reference rule; claim_shards=1)": {"strategy": "oldest"},
    "random among the oldest 8": {"strategy": "topk", "k": 8},
    "16 shards, random among a shard's oldest 8": {"strategy": "sharded", "k": 8, "shards": 16},
    "16 shards, the older head of 2 random shards read at once, random among its oldest 8": {
        "strategy": "sharded2",
        "k": 8,
        "shards": 16,
    },
    "the code (Leases.claim, 16 shards): 2 shards read one after the other, the older head, its oldest 8": {
        "strategy": "claim",
        "k": 8,
        "shards": 16,
    },
}


# ---- the moto bench: correctness and requests per claim, with real threads -----------------------------


def moto_drain(workers: int, tasks: int, shards: int, *, wait_seconds: int = 1) -> dict[str, Any]:
    """`tasks` tasks created in one authority, then `workers` threads, each a worker of its own, claim
    (long-poll `wait_seconds`) until nothing is claimable, through the DynamoDB TaskStore on moto
    (serialized per request, as `dovecote dev` runs it). Checked after: every task leased exactly once
    (one claim, fence 1, the grant history's one record names the claimer, no fence-2 record), none
    lost (every claimable shard empty), and each worker's lease list is its claims. Requests are counted
    per thread through botocore `request-created`: those of claims that got a task, and those of the
    final claims that found nothing (each reads every shard, once per long-poll re-check)."""
    import threading
    import time
    from collections import Counter

    from bench.common import CURSOR_KEY, moto_resources, task_body
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.errors import NotFound
    from dovecote.platform.principal import Principal
    from dovecote.tasks.commands import Claim
    from dovecote.tasks.dynamo import DynamoTaskStore
    from dovecote.tasks.service import TaskService
    from dovecote.tasks.storage import FLEET_CLAIM_SHARDS
    from infra.local.moto_patches import serialize_dynamodb
    from infra.local.resources import DEFAULT_NAMES

    serialize_dynamodb()
    authority = "bench"
    with moto_resources() as aws:
        store = DynamoTaskStore(
            table=DEFAULT_NAMES["tasks_table"],
            bucket=DEFAULT_NAMES["bucket"],
            dynamodb=aws.ddb,
            s3=aws.s3,
            claim_shards=shards or FLEET_CLAIM_SHARDS,
        )
        service = TaskService(store, CursorSigner(CURSOR_KEY))
        caller = Principal(authority, "caller")
        for i in range(tasks):
            body = task_body(f"task-{i:06d}", str(i), "claims")
            service.create(caller, service.gate.create(caller, validated(CreateTaskIn, body)))
        local = threading.local()
        lock = threading.Lock()
        counted: dict[str, Counter[str]] = {"claimed": Counter(), "nothing": Counter()}

        def on_request(operation_name: str = "", **_: Any) -> None:
            bucket = getattr(local, "requests", None)
            if bucket is not None:
                bucket[operation_name] += 1

        aws.ddb.meta.events.register("request-created", on_request, unique_id="bench-claims")
        claimed: list[tuple[str, str, int]] = []
        barrier = threading.Barrier(workers)

        def work(n: int) -> None:
            me = Principal(authority, "worker", f"worker-{n}")
            barrier.wait()
            for attempt in range(tasks + 1):
                local.requests = Counter()
                try:
                    command = Claim(f"claim-{n}-{attempt}", wait_seconds)
                    assignment = service.claim(me, command).answer
                except NotFound:
                    with lock:
                        counted["nothing"].update(local.requests)
                    return
                with lock:
                    counted["claimed"].update(local.requests)
                    claimed.append((assignment.task.id, assignment.worker, assignment.fence))

        threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
        start = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - start
        aws.ddb.meta.events.unregister("request-created", unique_id="bench-claims")

        per_task = Counter(task for task, _, _ in claimed)
        created = {f"task-{i:06d}" for i in range(tasks)}
        owners = {task: worker for task, worker, _ in claimed}
        grants_right = sum(
            1
            for task, worker in owners.items()
            if (g := store.grant(authority, task, 1)) is not None
            and g.worker == worker
            and store.grant(authority, task, 2) is None
        )
        still_claimable = sum(len(store.claimable(authority, s, 100)) for s in range(store.claim_shards))
        listed = 0
        for n in range(workers):
            me = Principal(authority, "worker", f"worker-{n}")
            mine = {a.task.id for a in service.list_leases(me, 100, None).items}
            listed += mine == {task for task, worker in owners.items() if worker == me.worker}
    n = max(len(claimed), 1)
    return {
        "workers": workers,
        "tasks": tasks,
        "shards": store.claim_shards,
        "claimed": len(claimed),
        "leased_twice": sum(1 for c in per_task.values() if c > 1),
        "lost": len(created - set(per_task)),
        "fence_1_and_one_grant": grants_right,
        "still_claimable": still_claimable,
        "workers_whose_lease_list_is_their_claims": listed,
        "exactly_once": (
            sorted(per_task) == sorted(created)
            and all(c == 1 for c in per_task.values())
            and grants_right == tasks
            and still_claimable == 0
            and listed == workers
            and all(fence == 1 for _, _, fence in claimed)
        ),
        "requests_per_claim": {op: count / n for op, count in sorted(counted["claimed"].items())},
        "requests_per_claim_total": sum(counted["claimed"].values()) / n,
        "lost_races_per_claim": counted["claimed"]["TransactWriteItems"] / n - 1,
        "requests_per_empty_claim": sum(counted["nothing"].values()) / max(workers, 1),
        "wall_s": wall,
    }


def claims_report(quick: bool = False) -> dict[str, Any]:
    fleets = (8, 64) if quick else (1, 8, 32, 64, 128, 256)
    seconds = 1.0 if quick else 4.0
    rows = []
    for label, options in STRATEGIES.items():
        for workers in fleets:
            figures = simulate(workers, seconds=seconds, **options)
            rows.append({"label": label, **figures.__dict__})
    # The skew over a longer run: one random shard's heads drift apart, two choices keep them level.
    drift = [
        {
            "strategy": strategy,
            "workers": 256,
            "seconds": length,
            **simulate(256, strategy, shards=16, seconds=length).__dict__,
        }
        for strategy in ("sharded", "claim")
        for length in ((1.0, 4.0) if quick else (2.0, 16.0))
    ]
    tasks = 64 if quick else 256
    moto = [moto_drain(32, tasks, shards) for shards in (16, 1)]
    return {
        "assumptions_ms": {"get": GET_MS, "query": QUERY_MS, "transact": TRANSACT_MS, "index_lag": LAG_MS},
        "page": PAGE,
        "backoff_ms": BACKOFF_MS,
        "rows": rows,
        "drift": drift,
        "moto": moto,
    }


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="claims per second per authority, modelled (bench/claims.py)")
    for column in ("strategy", "workers", "claims/s", "p99 age rank", "requests/claim"):
        table.add_column(column)
    for row in report["rows"]:
        table.add_row(
            row["label"],
            str(row["workers"]),
            f"{row['claims_per_s']:,.0f}",
            str(row["p99_age_rank"]),
            f"{row['requests_per_claim']:.1f}",
        )
    Console().print(table)
    table = Table(title="order skew over the run's length, 256 workers, 16 shards (modelled)")
    for column in ("strategy", "seconds", "claims/s", "p99 age rank"):
        table.add_column(column)
    for row in report.get("drift", []):
        table.add_row(row["strategy"], f"{row['seconds']:.0f}", f"{row['claims_per_s']:,.0f}", str(row["p99_age_rank"]))
    Console().print(table)
    table = Table(title="moto, real threads: a backlog drained by long-polling workers (correctness, requests)")
    for column in (
        "shards",
        "workers",
        "tasks",
        "exactly once",
        "twice / lost",
        "requests/claim",
        "of which",
        "lost races/claim",
        "requests, final empty claim",
    ):
        table.add_column(column)
    for row in report.get("moto", []):
        table.add_row(
            str(row["shards"]),
            str(row["workers"]),
            str(row["tasks"]),
            "yes" if row["exactly_once"] else "NO",
            f"{row['leased_twice']} / {row['lost']}",
            f"{row['requests_per_claim_total']:.2f}",
            ", ".join(f"{op} {n:.2f}" for op, n in row["requests_per_claim"].items()),
            f"{row['lost_races_per_claim']:.2f}",
            f"{row['requests_per_empty_claim']:.0f}",
        )
    Console().print(table)


if __name__ == "__main__":
    print_report(claims_report())
