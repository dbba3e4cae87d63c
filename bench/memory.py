"""Memory benchmarks: `python -m bench.memory [--quick]`, or `memory_figures()` from bench/__main__.

1. AWS round trips per submit and per applied write (moto, botocore request-created events):
   deterministic figures.
2. Detection cost per write with 1k, 10k and 50k prior memories in the scope, the prior memories
   bulk-loaded straight into the store: the whole apply path of the worker and the detector alone,
   over the in-memory store (the algorithm) and over DynamoDB on moto (with its round trips).
   Retrieval is bounded by constants, so the three should be flat.
3. End-to-end writes per second through the local runtime (`dovecote dev`: HTTP → API function →
   DynamoDB + SQS FIFO on moto → the SQS emulator → the worker), for 1 scope and for 8 scopes.
"""

from __future__ import annotations

import itertools
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import CURSOR_KEY, ROOT, MotoResources, latency_ms, moto_resources, run_alone

AUTHORITY = "bench"

# A synthetic vocabulary with a Zipf-like distribution: a few words are everywhere, most are rare.
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "fu", "gi", "ha", "jo", "ly"]
_STOP = ["the", "is", "a", "of", "to", "and", "in", "for", "on", "with"]


def _vocabulary(size: int, rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class Corpus:
    def __init__(self, seed: int = 7, vocabulary: int = 20_000, subjects: int = 500) -> None:
        self._rng = random.Random(seed)
        self._words = _vocabulary(vocabulary, self._rng)
        weights = [1 / (rank + 1) ** 1.1 for rank in range(vocabulary)]
        self._cumulative = list(itertools.accumulate(weights))
        self._subjects = [f"subject:s{i}" for i in range(subjects)]

    def memory(self) -> tuple[str, tuple[str, ...]]:
        words = self._rng.choices(self._words, cum_weights=self._cumulative, k=self._rng.randint(8, 14))
        for _ in range(3):
            words.insert(self._rng.randrange(len(words)), self._rng.choice(_STOP))
        tags = (self._rng.choice(self._subjects),) if self._rng.random() < 0.1 else ()
        return " ".join(words), tags


@contextmanager
def _on_moto() -> Iterator[tuple[MotoResources, Any, Any]]:
    """The resources on moto (serialized, as the local runtime runs them), the memory store and its queue."""
    from dovecote.memory.dynamo import DynamoMemoryStore
    from dovecote.memory.queue import SqsMemoryQueue
    from infra.local.moto_patches import serialize_dynamodb, serialize_sqs
    from infra.local.resources import DEFAULT_NAMES

    serialize_dynamodb()
    serialize_sqs()
    with moto_resources(sqs=True) as aws:
        store = DynamoMemoryStore(table=DEFAULT_NAMES["memory_table"], dynamodb=aws.ddb)
        queue = SqsMemoryQueue(
            queue_url=aws.env["DOVECOTE_MEMORY_QUEUE_URL"], dlq_url=aws.env["DOVECOTE_MEMORY_DLQ_URL"], sqs=aws.sqs
        )
        yield aws, store, queue


# ---- round trips ---------------------------------------------------------------------------------


def round_trips() -> dict[str, int]:
    from dovecote.memory.detector import LexicalDetector
    from dovecote.memory.model import JudgmentInput, QueueMessage, WriteInput
    from dovecote.memory.service import MemoryService
    from dovecote.memory.worker import WriteWorker
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal
    from infra.local.metering import count_round_trips

    who = Principal(AUTHORITY, "caller")
    out: dict[str, int] = {}
    with _on_moto() as (aws, store, queue):
        service = MemoryService(store, queue, CursorSigner(CURSOR_KEY))
        worker = WriteWorker(store, queue, LexicalDetector())

        def measure(label: str, fn: Callable[[], Any]) -> Any:
            with count_round_trips(aws.ddb, aws.sqs) as meter:
                result = fn()
            out[label] = meter.total
            return result

        def body(write_id: str) -> str:
            return QueueMessage(AUTHORITY, write_id, "s").to_body()

        measure("submit", lambda: service.submit(who, WriteInput("a", "s", "The retry limit is 5")))
        measure("exact resubmit", lambda: service.submit(who, WriteInput("a", "s", "The retry limit is 5")))
        service.submit(who, WriteInput("b", "s", "The retry limit is 7"))
        measure("applied write, empty scope", lambda: worker.handle(body("a")))
        measure("applied write, with candidates", lambda: worker.handle(body("b")))
        measure("redelivered message", lambda: worker.handle(body("b")))
        measure("status read", lambda: service.status(who, "b"))
        service.submit(who, WriteInput("c", "s", "x is 1"))
        measure("cancel", lambda: service.cancel(who, "c"))
        measure("list memories (1 page)", lambda: service.list_memories(who, "s", 10, None))
        rid = service.list_relations(who, "s", "", None, None).items[0].id
        measure("list relations (1 page)", lambda: service.list_relations(who, "s", "", 10, None))
        measure("judgment", lambda: service.judge(who, rid, JudgmentInput("j", "confirmed")))
    return out


# ---- detection cost against the scope's size -------------------------------------------------------


class _TimedDetector:
    def __init__(self) -> None:
        from dovecote.memory.detector import LexicalDetector

        self._inner = LexicalDetector()
        self.seconds: list[float] = []
        self.compared: list[int] = []

    def detect(self, new: Any, prior: Any, stats: Any) -> Any:
        t = time.perf_counter()
        out = self._inner.detect(new, prior, stats)
        self.seconds.append(time.perf_counter() - t)
        self.compared.append(len(prior))
        return out


def _seed(corpus: Corpus, n: int) -> list[Any]:
    from dovecote.memory.model import Memory

    memories = []
    for seq in range(1, n + 1):
        content, tags = corpus.memory()
        memories.append(Memory(AUTHORITY, f"m{seq}", "big", seq, content, tags, "2026-01-01T00:00:00.000Z"))
    return memories


def _detect_writes(store: Any, queue: Any, corpus: Corpus, writes: int, *, meter: Any = None) -> dict[str, Any]:
    from dovecote.memory.model import QueueMessage, WriteInput
    from dovecote.memory.service import MemoryService
    from dovecote.memory.worker import WriteWorker
    from dovecote.platform.cursors import CursorSigner
    from dovecote.platform.principal import Principal

    detector = _TimedDetector()
    service = MemoryService(store, queue, CursorSigner(b"bench-key-0123456789abcdefghijkl"))
    worker = WriteWorker(store, queue, detector)
    who = Principal(AUTHORITY, "caller")
    applies, trips, candidates = [], [], 0
    for i in range(writes):
        content, tags = corpus.memory()
        write_id = f"new-{i}-{time.monotonic_ns()}"
        service.submit(who, WriteInput(write_id, "big", content, tuple(tags)))
        t = time.perf_counter()
        if meter is not None:
            meter.reset()
        worker.handle(QueueMessage(AUTHORITY, write_id, "big").to_body())
        applies.append(time.perf_counter() - t)
        if meter is not None:
            trips.append(meter.total)
        evidence = service.status(who, write_id).evidence
        assert evidence is not None, write_id  # applied just above
        candidates += len(evidence.candidates)
    out: dict[str, Any] = {
        "writes": writes,
        "apply": latency_ms(applies),
        "detector": latency_ms(detector.seconds),
        "prior_compared_mean": statistics.mean(detector.compared),
        "candidates_per_write": candidates / writes,
    }
    if trips:
        out["round_trips_per_write"] = sorted(set(trips))
    return out


def detection_in_memory(sizes: tuple[int, ...], writes: int) -> dict[str, Any]:
    from dovecote.memory.fakes import InMemoryMemoryQueue, InMemoryMemoryStore

    out = {}
    for n in sizes:
        corpus = Corpus()
        store = InMemoryMemoryStore()
        store.bulk_load(AUTHORITY, "big", _seed(corpus, n))
        out[f"{n // 1000}k prior"] = _detect_writes(store, InMemoryMemoryQueue(), corpus, writes)
    return out


def detection_on_moto(sizes: tuple[int, ...], writes: int) -> dict[str, Any]:
    from infra.local.metering import count_round_trips

    out = {}
    for n in sizes:
        with _on_moto() as (aws, store, queue):
            corpus = Corpus()
            t = time.perf_counter()
            store.bulk_load(AUTHORITY, "big", _seed(corpus, n))
            load_s = time.perf_counter() - t
            with count_round_trips(aws.ddb, aws.sqs) as meter:
                figures = _detect_writes(store, queue, corpus, writes, meter=meter)
            out[f"{n // 1000}k prior"] = {**figures, "bulk_load_s": load_s}
    return out


# ---- end to end through the local runtime ---------------------------------------------------------


def local_runtime(writes: int, clients: int = 4) -> dict[str, dict[str, float]]:
    import concurrent.futures

    import httpx

    from infra.local.runtime import LocalRuntime

    runtime = LocalRuntime(port=0, tokens_file=ROOT / ".dovecote" / "bench-memory-tokens.json").start()
    headers = {"Authorization": f"Bearer {runtime.tokens['caller']}"}
    results: dict[str, dict[str, float]] = {}
    corpus = Corpus(seed=11)
    try:
        for scopes in (1, 8):
            run = f"e2e-{scopes}-{time.monotonic_ns()}"
            bodies = []
            for i in range(writes):
                content, tags = corpus.memory()
                bodies.append(
                    {"id": f"{run}-{i}", "scope": f"{run}-s{i % scopes}", "content": content, "tags": list(tags)}
                )

            def send(body: dict[str, Any]) -> None:
                with httpx.Client(base_url=runtime.endpoint, headers=headers, timeout=60) as http:
                    response = http.post("/v1/memory/writes", json=body)
                    assert response.status_code == 202, response.text

            start = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                list(pool.map(send, bodies))
            submitted = time.perf_counter() - start
            with httpx.Client(base_url=runtime.endpoint, headers=headers, timeout=60) as http:
                for body in bodies:
                    while True:
                        status = http.get(f"/v1/memory/writes/{body['id']}", params={"wait": 20}).json()
                        if status["status"] in ("complete", "failed", "cancelled"):
                            assert status["status"] == "complete", status
                            break
            wall = time.perf_counter() - start
            results[f"{scopes} scope{'s' if scopes > 1 else ''}"] = {
                "writes": writes,
                "submit_s": submitted,
                "all_applied_s": wall,
                "writes_per_s": writes / wall,
            }
    finally:
        runtime.stop()
    return results


def memory_figures(quick: bool = False) -> dict[str, Any]:
    """Every memory figure; `quick` trims the sample sizes (a CI smoke run)."""
    sizes = (1_000, 10_000, 50_000)
    return {
        "round_trips": round_trips(),
        "detection_in_memory": detection_in_memory(sizes, 50 if quick else 200),
        "detection_on_moto": detection_on_moto(sizes[:1] if quick else sizes, 10 if quick else 30),
        "local_runtime": local_runtime(40 if quick else 200),
    }


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table("memory command", "AWS round trips")
    for label, n in report["round_trips"].items():
        table.add_row(label, str(n))
    console.print(table)
    for key, title in (("detection_in_memory", "in-memory store"), ("detection_on_moto", "DynamoDB on moto")):
        table = Table(
            f"prior memories ({title})",
            "apply median ms",
            "apply p95 ms",
            "detector median ms",
            "prior compared",
            "round trips",
        )
        for label, row in report[key].items():
            table.add_row(
                label,
                f"{row['apply']['median_ms']:.2f}",
                f"{row['apply']['p95_ms']:.2f}",
                f"{row['detector']['median_ms']:.3f}",
                f"{row['prior_compared_mean']:.1f}",
                ",".join(str(n) for n in row.get("round_trips_per_write", [])) or "-",
            )
        console.print(table)
    table = Table("local runtime, end to end", "writes", "all applied s", "writes/s")
    for label, row in report["local_runtime"].items():
        table.add_row(label, str(row["writes"]), f"{row['all_applied_s']:.1f}", f"{row['writes_per_s']:.1f}")
    console.print(table)


if __name__ == "__main__":
    run_alone("python -m bench.memory", memory_figures, print_report, "memory.json")
