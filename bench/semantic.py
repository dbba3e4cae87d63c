"""The semantic tier (issue 20) on the SQLite engine: does it earn its place?

- Quality: the labelled sets of bench/recall.py (paraphrased questions; distractors sharing their
  words; with and without rivals; the unseen draw, seed 29, that no choice was made on), every
  lexical ranker beside the vectors alone (max cosine per session) and both fusions of the default
  ranker with them: the reference's RRF (k = 60) and the weighted fusion of normalised scores at several
  lexical shares (the share is chosen on the seen sets, seed 11). The local model embeds: all-MiniLM-
  L6-v2, the issue's own.
- Embedding throughput of the local model on this machine (messages per second, wall and CPU), from
  embedding those sets (real bench messages, 6-40 words).
- Search latency with the tier on against off, at 10k and 100k messages (bench/recall.py's corpus):
  the vector scan's cost depends on the dimension and the count, not on the model, so the corpus is
  filled with 384-dimension vectors from the hashing fake (embedding 100k messages with the local
  model would take over an hour here); the local model's time to embed one question is measured
  apart and adds to every search with the tier on.
- The same on the OpenSearch engine (its k-NN index, Lucene HNSW) at 10k messages, on the node
  bench/recall.py uses (DOVECOTE_OPENSEARCH_URL, or one started from infra/opensearch-node; without
  Java the rows are left out, saying why). Wall time only: the work is in the node.

`python -m bench.semantic [--quick]` (or `make bench` section `semantic`): bench/results/semantic.json.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from bench import recall as bench_recall
from bench.common import latency_ms, run_alone
from bench.recall import QUALITY_SETS, generate_corpus, labelled_set, ranker_table

SHARES = (0.5, 0.6, 0.7, 0.8, 0.9)
# Filler messages per session (bench/recall.py draws up to 30): fewer here, because the local model
# embeds a few messages per second on this shared 2-core machine. The lexical rankers are measured
# on the same sets, so every row of a table compares like with like.
FILLER = 10
WARMUP = 5  # searches of each tier before the timed ones


class Remembering:
    """An embedder that remembers the vectors of texts it embedded (every variant asks the same
    questions; the model is slow here)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.info = inner.info
        self._seen: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self._seen]
        if missing:
            self._seen.update(zip(missing, self.inner.embed(missing), strict=True))
        return [self._seen[t] for t in texts]


def _service(index: Any, embedder: Any) -> Any:
    from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
    from dovecote.recall.service import RecallService

    return RecallService(index, InMemoryArchive(), InMemoryLedger(), embedder=embedder)


def _scores(ranks: list[int | None]) -> dict[str, float]:
    return {
        "recall@1": sum(1 for r in ranks if r == 1) / len(ranks),
        "recall@3": sum(1 for r in ranks if r is not None and r <= 3) / len(ranks),
        "mrr": sum(1 / r for r in ranks if r is not None) / len(ranks),
    }


def quality_figures(facts: int, filler: int = FILLER) -> dict[str, Any]:
    from dovecote.embedding.local import LocalEmbedder
    from dovecote.platform.principal import Principal
    from dovecote.recall.fusion import model_key
    from dovecote.recall.model import DEFAULT_RANKER, RANKERS, gate_search
    from dovecote.recall.sqlite import SqliteSearchIndex
    from dovecote.recall.sqlite_vectors import Scope

    who = Principal("bench", "caller")
    embedder = Remembering(LocalEmbedder())
    key = model_key(embedder.info.model_id, embedder.info.dimension)
    out: dict[str, Any] = {"facts": facts, "filler": filler, "model": embedder.info.model_id, "embedding": {}}
    for variant, seed, rivals in QUALITY_SETS:
        bodies, questions = labelled_set(facts, seed=seed, filler=filler, rivals=rivals)
        index = SqliteSearchIndex(":memory:")
        service = _service(index, embedder)
        for body in bodies:
            service.ingest(who, body)
        wall, cpu = time.perf_counter(), time.process_time()
        embedded = service.embed_pending()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out["embedding"][variant] = {
            "messages": embedded,
            "wall_s": wall,
            "cpu_s": cpu,
            "per_s": embedded / wall,
            "load_average": os.getloadavg()[0],
        }
        embedder.embed([q for q, _ in questions])

        def ranks_of(
            svc: Any, semantic: str, ranker: str = DEFAULT_RANKER, questions: list[tuple[str, str]] = questions
        ) -> list[int | None]:
            ranks: list[int | None] = []
            for question, target in questions:
                envelope = svc.search(who, gate_search(q=question, limit=10, ranker=ranker, semantic=semantic))
                ids = [r.session_id for r in envelope.results]
                ranks.append(ids.index(target) + 1 if target in ids else None)
            return ranks

        rows: dict[str, Any] = {f"lexical {r}": _scores(ranks_of(service, "off", r)) for r in RANKERS}
        alone: list[int | None] = []
        for question, target in questions:
            near = index.vectors.nearest(
                Scope("", ["m.authority = ?"], ["bench"]), key, embedder.embed([question])[0], 10
            )
            ids = [r.session for r in near]
            alone.append(ids.index(target) + 1 if target in ids else None)
        rows["vectors alone (max cosine per session)"] = _scores(alone)
        rows[f"rrf k=60 ({DEFAULT_RANKER} + vectors)"] = _scores(ranks_of(replace(service, fusion="rrf"), "on"))
        for share in SHARES:
            weighted = replace(service, fusion="weighted", lexical_share=share)
            rows[f"weighted {share:.1f} ({DEFAULT_RANKER} + vectors)"] = _scores(ranks_of(weighted, "on"))
        out[variant] = {"sessions": len(bodies), "messages": sum(len(b["messages"]) for b in bodies), "rankers": rows}
        index.close()
    return out


@contextmanager
def _index(engine: str) -> Iterator[Any]:
    """A fresh index: SQLite in memory, or OpenSearch indices of its own on bench_recall's node
    (refresh=true: the corpus goes in from several threads, as bench/recall.py ingests it)."""
    if engine == "sqlite":
        from dovecote.recall.sqlite import SqliteSearchIndex

        index = SqliteSearchIndex(":memory:")
        try:
            yield index
        finally:
            index.close()
        return
    with bench_recall.search_index(engine, refresh="true") as (index, _):
        yield index


def latency_figures(sizes: Sequence[int], queries: int, engine: str = "sqlite") -> dict[str, Any]:
    from dovecote.embedding.fakes import HashingEmbedder
    from dovecote.embedding.local import LocalEmbedder
    from dovecote.platform.principal import Principal
    from dovecote.recall.model import gate_search

    who = Principal("bench", "caller")
    local = LocalEmbedder()
    rng = random.Random(5)
    question_times = []
    for _ in range(queries):
        words = " ".join(
            rng.choice(["lease", "deploy", "cache", "timeout", "retry", "queue", "fence"]) for _ in range(4)
        )
        start = time.perf_counter()
        local.embed([words])
        question_times.append(time.perf_counter() - start)
    out: dict[str, Any] = {"question_embed": {"n": queries, **latency_ms(question_times)}, "corpora": []}
    fake = HashingEmbedder(dimension=local.info.dimension, model_id="bench.hashing-384")
    for size in sizes:
        bodies = generate_corpus(size)
        with _index(engine) as index:
            service = _service(index, fake)
            bench_recall._ingest_all(service, who, bodies, 1 if engine == "sqlite" else bench_recall.INGEST_WORKERS)
            started = time.perf_counter()
            embedded = service.embed_pending()
            embed_s = time.perf_counter() - started
            texts = [m["text"] for b in bodies for m in b["messages"]]
            qrng = random.Random(size)
            asked = [" ".join(qrng.choice(texts).split()[:3]) for _ in range(queries)]
            row: dict[str, Any] = {"messages": size, "vectors_written": embedded, "vectors_write_s": embed_s}
            for q in asked[:WARMUP]:  # a JVM (or a cold page cache) would bill its warm-up to the first tier
                for semantic in ("off", "on"):
                    service.search(who, gate_search(q=q, semantic=semantic))
            times: dict[str, tuple[list[float], list[float]]] = {"off": ([], []), "on": ([], [])}
            for n, q in enumerate(asked):  # the tiers alternate, and which goes first (warming the caches)
                for semantic in ("off", "on") if n % 2 == 0 else ("on", "off"):
                    wall, cpu = times[semantic]
                    w, c = time.perf_counter(), time.process_time()
                    service.search(who, gate_search(q=q, semantic=semantic))
                    wall.append(time.perf_counter() - w)
                    cpu.append(time.process_time() - c)
            for semantic, (wall, cpu) in times.items():
                row[semantic] = {**latency_ms(wall), **{"cpu_" + k: v for k, v in latency_ms(cpu).items()}}
            row["load_average"] = os.getloadavg()[0]
            out["corpora"].append(row)
    return out


def opensearch_latency(sizes: Sequence[int], queries: int) -> dict[str, Any]:
    """latency_figures on the OpenSearch engine, or why there are none."""
    with bench_recall.opensearch_node() as (url, origin):
        if url is None:
            return {"node": origin}
        bench_recall.OPENSEARCH_URL = url
        try:
            return {"node": origin, **latency_figures(sizes, queries, engine="opensearch")}
        finally:
            bench_recall.OPENSEARCH_URL = None


def semantic_report(quick: bool = False) -> dict[str, Any]:
    return {
        "sqlite_vec": _sqlite_vec(),
        "quality": quality_figures(20 if quick else 40),
        "latency": latency_figures((2_000,) if quick else (10_000, 100_000), 20 if quick else 50),
        "latency_opensearch": opensearch_latency((2_000,) if quick else (10_000,), 20 if quick else 50),
    }


def _sqlite_vec() -> str:
    from dovecote.recall.sqlite import SqliteSearchIndex

    index = SqliteSearchIndex(":memory:")
    try:
        return index.vectors.sqlite_vec or "not loaded (numpy)"
    finally:
        index.close()


def print_report(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"sqlite-vec: {report['sqlite_vec']}")
    if "quality" not in report:  # --opensearch-only
        _print_latency(console, Table, "OpenSearch", report["latency_opensearch"])
        return
    quality = report["quality"]
    for variant, row in quality["embedding"].items():
        console.print(
            f"embedding ({quality['model']}), {variant}: {row['messages']:,} messages in {row['wall_s']:.1f} s wall, "
            f"{row['cpu_s']:.1f} s CPU: {row['per_s']:.1f} messages/s (load average {row['load_average']:.1f})"
        )
    for variant, _, _ in QUALITY_SETS:
        console.print(
            f"[bold]{variant}[/bold]: {quality['facts']} facts, {quality[variant]['sessions']} sessions, "
            f"{quality[variant]['messages']:,} messages"
        )
        console.print(ranker_table(quality[variant]["rankers"]))
    _print_latency(console, Table, "SQLite", report["latency"])
    if "latency_opensearch" in report:
        _print_latency(console, Table, "OpenSearch", report["latency_opensearch"])


def _print_latency(console: Any, table_class: Any, engine: str, latency: dict[str, Any]) -> None:
    if "corpora" not in latency:
        console.print(f"{engine}: {latency.get('node')}")
        return
    if "node" in latency:
        console.print(f"{engine}: {latency['node']}")
    q = latency["question_embed"]
    console.print(f"local model, one question: median {q['median_ms']:.1f} ms, p95 {q['p95_ms']:.1f} ms")
    table = table_class("engine", "messages", "tier", "median ms", "p95 ms", "CPU median ms", "load")
    for row in latency["corpora"]:
        for tier in ("off", "on"):
            figures = row[tier]
            table.add_row(
                engine,
                f"{row['messages']:,}",
                tier,
                f"{figures['median_ms']:.1f}",
                f"{figures['p95_ms']:.1f}",
                f"{figures['cpu_median_ms']:.1f}",
                f"{row['load_average']:.1f}",
            )
    console.print(table)
    for row in latency["corpora"]:
        written, seconds = row["vectors_written"], row["vectors_write_s"]
        console.print(f"{engine} {row['messages']:,}: {written:,} vectors written in {seconds:.1f} s")
    console.print(f"(with the tier on, add the question's embedding: {q['median_ms']:.1f} ms)")


def opensearch_report(quick: bool = False) -> dict[str, Any]:
    """Only the OpenSearch latency rows (`python -m bench.semantic --opensearch-only`)."""
    return {
        "sqlite_vec": _sqlite_vec(),
        "latency_opensearch": opensearch_latency((2_000,) if quick else (10_000,), 20 if quick else 50),
    }


if __name__ == "__main__":
    import sys

    if "--opensearch-only" in sys.argv:
        sys.argv.remove("--opensearch-only")
        run_alone(
            "python -m bench.semantic --opensearch-only", opensearch_report, print_report, "semantic-opensearch.json"
        )
    else:
        run_alone("python -m bench.semantic", semantic_report, print_report, "semantic.json")
