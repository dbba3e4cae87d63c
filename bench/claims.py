"""Claim throughput per authority on real DynamoDB, modelled (issue 21): a discrete-event simulation of
the claim's real request sequence, extending ../shared/research/claim_contention.py.

What one claim does today (dovecote/tasks/leases.py, `Leases.claim`):
1. GetItem of the command's receipt (a replay answers from it);
2. Query of the sparse `claimable` index, oldest first, one page of CLAIM_CANDIDATES (16); the index is
   eventually consistent: it shows commits older than LAG;
3. TransactWriteItems on the first candidate (the grant, its receipt, the task's CAS); a lost race (the
   condition fails: another worker owns it) moves to the next candidate of the same page;
4. a page used up is "no claimable task": a long-polling worker sleeps CLAIM_BACKOFF (250 ms) and
   queries again.

Strategies: `oldest` (today), `topk` (a random pick among the oldest k of the page), `sharded` (the
index key carries one of S shards, derived from the task id; a claim queries a random shard and picks
among its oldest k), `sharded2` (two random shards queried at once, the one with the older head wins,
then a random pick among its oldest k). The backlog is endless, so no shard is ever empty here.

Reported: claims per second, and the order skew: the p99 of a claimed task's age rank (how many
unclaimed tasks were older at the moment of the claim; 0 is the oldest). Latencies are typical
single-digit-millisecond DynamoDB figures, assumptions, not measurements.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass
from typing import Any

GET_MS, QUERY_MS, TRANSACT_MS, LAG_MS = 5.0, 8.0, 12.0, 20.0
PAGE = 16  # CLAIM_CANDIDATES
BACKOFF_MS = 250.0  # CLAIM_BACKOFF[0]


@dataclass(frozen=True)
class Figures:
    strategy: str
    workers: int
    claims_per_s: float
    p99_age_rank: int
    requests_per_claim: float


def simulate(
    workers: int, strategy: str = "oldest", *, k: int = 8, shards: int = 1, seconds: float = 4.0, seed: int = 1
) -> Figures:
    rnd = random.Random(seed)
    owned_at: dict[int, float] = {}
    # Tasks are numbered oldest first; task n lives in shard n % shards.
    visible_from = [s for s in range(shards)]  # per shard: below this, every task is owned and visible so
    truly_from = 0  # below this, every task is owned (for the age rank)
    inflight: dict[int, list[tuple[float, float, int]]] = {}
    pages: dict[int, list[int]] = {}
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

    while events:
        t, w, kind, arg = heapq.heappop(events)
        if t > horizon:
            break
        requests += 1
        if kind == "receipt":
            heapq.heappush(events, (t + GET_MS, w, "query", 0))
        elif kind == "query":
            if strategy == "sharded":
                pages[w] = page_of(rnd.randrange(shards), t)
            elif strategy == "sharded2":
                # Two random shards queried at once (one more request, the same latency); the page whose
                # oldest task is older wins: the shards' heads cannot drift apart (two choices).
                first, second = rnd.sample(range(shards), 2)
                pages[w] = min(page_of(first, t), page_of(second, t), key=lambda page: page[0])
                requests += 1
            else:
                pages[w] = page_of(0, t)
            heapq.heappush(events, (t + QUERY_MS, w, "pick", None))
        elif kind == "pick":
            requests -= 1  # a decision, not a request
            page = pages[w]
            if not page:
                heapq.heappush(events, (t + BACKOFF_MS, w, "query", 0))
                continue
            index = 0 if strategy == "oldest" else rnd.randrange(min(k, len(page)))
            task = page.pop(index)
            end = t + TRANSACT_MS * (0.8 + 0.4 * rnd.random())
            inflight.setdefault(task, []).append((t, end, w))
            heapq.heappush(events, (end, w, "commit", (task, t)))
        elif kind == "commit":
            task, start = arg
            windows = inflight[task]
            windows.remove(next(x for x in windows if x[2] == w and x[0] == start))
            overlapping = any(s < t and e > start for s, e, _ in windows)
            if task in owned_at or (overlapping and rnd.random() < 0.5):
                heapq.heappush(events, (t, w, "pick", None))  # lost: the next candidate of the page
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
    "oldest (today)": {"strategy": "oldest"},
    "random among the oldest 8": {"strategy": "topk", "k": 8},
    "16 shards, random among a shard's oldest 8": {"strategy": "sharded", "k": 8, "shards": 16},
    "16 shards, the older head of 2 random shards, random among its oldest 8": {
        "strategy": "sharded2",
        "k": 8,
        "shards": 16,
    },
}


def claims_report(quick: bool = False) -> dict[str, Any]:
    fleets = (8, 64) if quick else (1, 8, 32, 64, 128, 256)
    seconds = 1.0 if quick else 4.0
    rows = []
    for label, options in STRATEGIES.items():
        for workers in fleets:
            figures = simulate(workers, seconds=seconds, **options)
            rows.append({"label": label, **figures.__dict__})
    return {
        "assumptions_ms": {"get": GET_MS, "query": QUERY_MS, "transact": TRANSACT_MS, "index_lag": LAG_MS},
        "page": PAGE,
        "backoff_ms": BACKOFF_MS,
        "rows": rows,
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


if __name__ == "__main__":
    print_report(claims_report())
