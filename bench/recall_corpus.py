"""The recall bench's generated data (bench/recall.py measures with it; bench/semantic.py reuses it).

The corpora are generated, deterministic (seeded): sessions of developer-chat-like messages whose
words follow a Zipf law over a vocabulary of common English, software words and rare made-up names,
so bm25 sees realistic document frequencies. The labelled set plants one fact per target session as
a short exchange, asks for it with a paraphrased question (different wording: synonyms, another
word order, stems that differ), and adds distractor sessions that share the question's words: the
fact's subject in an unrelated context, the attribute about another subject, both words in
different messages of one session, and a rival: a stale passing mention holding as many of the
question's words as the fact (in a conversation that also names the subject), so relevance, not
coverage, has to decide.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

COMMON = """the a to and of in is it that for on with this we be you i not are was have but
can if as at so do just like should will what there would about then when our all so maybe need think
""".split()
SOFTWARE = """deploy build test error config service database query cache index request response
server client timeout retry queue worker lease token auth user session file path branch commit merge
release version docker image container cluster node pod network port proxy gateway route handler
function lambda bucket table schema migration column row log metric alert dashboard latency memory
cpu disk thread lock race fix bug patch review module package dependency import install script
shell command output input parse json yaml env variable secret key certificate tls dns domain
endpoint api call payload header status code exception stack trace debug local remote staging
production rollback backup restore snapshot replica shard partition stream event consumer producer
topic subscription webhook cron job schedule pipeline ci lint format type check coverage benchmark
profile flame graph allocation leak garbage collector heap pointer buffer socket connection pool
""".split()
SYLLABLES = "ka lo mi nu re sa ti vo zen dar kel mor pax quin rul tor vex wyn xan yor".split()


def _made_up(rng: random.Random, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


class Vocabulary:
    def __init__(self, rng: random.Random, size: int = 4000) -> None:
        self.words = COMMON + SOFTWARE + _made_up(rng, size - len(COMMON) - len(SOFTWARE))
        self.weights = [1.0 / (rank + 1) ** 1.05 for rank in range(len(self.words))]
        self._rng = rng

    def sentence(self, low: int = 6, high: int = 40) -> str:
        return " ".join(self._rng.choices(self.words, self.weights, k=self._rng.randint(low, high)))


def _message(session_id: str, index: int, role: str, text: str, start: datetime, kind: str = "text") -> dict[str, Any]:
    return {
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{index}")),
        "role": role,
        "text": text,
        "timestamp": (start + timedelta(seconds=30 * index)).isoformat().replace("+00:00", "Z"),
        "kind": kind,
    }


def generate_corpus(messages: int, seed: int = 7, per_session: int = 50) -> list[dict[str, Any]]:
    """Generic-form session bodies holding `messages` messages in total (about 10 % tool calls)."""
    return list(iter_corpus(messages, seed, per_session))


def iter_corpus(messages: int, seed: int = 7, per_session: int = 50) -> Iterator[dict[str, Any]]:
    """generate_corpus one session at a time (the 1M corpus need not sit in memory)."""
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    made = 0
    n = 0
    base = datetime(2025, 1, 1, tzinfo=UTC)
    while made < messages:
        count = min(messages - made, max(2, int(rng.gauss(per_session, per_session / 3))))
        session_id = f"bench-{seed}-{n:06d}"
        start = base + timedelta(hours=n * 3)
        rows = []
        for i in range(count):
            kind = "tool" if rng.random() < 0.1 else "text"
            role = "user" if i % 2 == 0 else "assistant"
            rows.append(_message(session_id, i, role, vocab.sentence(), start, kind))
        yield {"source": "bench", "project": f"proj{n % 12}", "session_id": session_id, "messages": rows}
        made += count
        n += 1


# ---- the labelled set -------------------------------------------------------------------------------


@dataclass(frozen=True)
class FactKind:
    plant: tuple[str, ...]  # the exchange, in order; {s} subject, {v} value
    question: str  # a paraphrase: not a copy of any planted sentence
    subject_elsewhere: str  # the subject in an unrelated context
    attribute_elsewhere: str  # the attribute about another subject
    rival: str  # the question's words in a passing, stale mention: as much coverage as the fact


FACT_KINDS = (
    FactKind(
        (
            "we moved the {s} service to listen on port {v} after it collided with the metrics exporter",
            "ok, restarting {s} with the new listener now",
            "{s} is up again and healthy",
        ),
        "which port is {s} listening on these days",
        "the {s} dashboard looks odd after the redesign",
        "the {o} sidecar exposes port {v2} for health checks",
        "a year ago {s} was still listening on port {v2} in the old datacenter",
    ),
    FactKind(
        (
            "the {s} job was timing out, so I raised its timeout to {v} seconds",
            "good, the {s} runs finish well under that limit now",
        ),
        "what did we set the {s} time limit to when it kept timing out",
        "{s} produced a noisy log line during the rollout",
        "the {o} request timeout stays at {v2} seconds",
        "before the rewrite the {s} job had a timeout of {v2} seconds and kept timing out",
    ),
    FactKind(
        (
            "we rotate the {s} credentials every {v} days with the vault sync cron",
            "and rotation of {s} secrets alerts on failure, right",
            "yes, the rotation job pages on-call",
        ),
        "how often are the {s} secrets rotated",
        "someone renamed the {s} repository yesterday",
        "the {o} certificate rotates every {v2} days too",
        "the {s} secrets were rotated by hand back when we had no cron",
    ),
    FactKind(
        (
            "the root cause in {s} was a race between the lease renewal and the fence check",
            "so {s} needs the fence compared inside the same transaction",
            "patched {s}, the race is gone",
        ),
        "what caused the {s} bug with renewing leases",
        "{s} got a new owner in the platform team",
        "the {o} worker also renews its lease every few seconds",
        "an old ticket blamed {s} lease renewal bugs on clock skew",
    ),
    FactKind(
        (
            "we pinned {s} to version {v} because the next release broke the parser",
            "noted, {s} stays pinned until upstream fixes the parser regression",
        ),
        "why is {s} held back to an older release",
        "the {s} readme needs a refresh",
        "the {o} library moved to version {v2} last week",
        "{s} was held back to an older release once, long before this",
    ),
    FactKind(
        (
            "the {s} cache evicts entries after {v} minutes, the ttl lives in the shared config",
            "keep the {s} ttl there so staging and production agree",
        ),
        "how long do entries survive in the {s} cache",
        "{s} showed up in the incident retro",
        "the {o} cache is sized to {v2} megabytes",
        "entries in the {s} cache used to survive for {v2} minutes in the prototype",
    ),
    FactKind(
        (
            "backups of {s} go to the cold bucket nightly and are kept for {v} weeks",
            "restores of {s} were tested last sprint",
        ),
        "how many weeks of {s} backups do we retain",
        "the {s} migration script finished without errors",
        "the {o} bucket lifecycle keeps objects for {v2} weeks",
        "we once retained {v2} weeks of {s} backups on the old cluster",
    ),
    FactKind(
        (
            "{s} retries failed deliveries {v} times with exponential backoff, then parks them in the dlq",
            "the dead letter queue (dlq) for {s} is drained by hand",
        ),
        "how many attempts does {s} make before a message goes to the dlq",
        "{s} deploys are slow on mondays",
        "the {o} consumer backs off for {v2} seconds",
        "the legacy {s} made a single attempt before dropping messages, no dlq",
    ),
)


def labelled_set(
    facts: int, seed: int = 11, filler: int = 30, rivals: bool = True
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """Sessions (generic form) and (question, target session id) pairs."""
    rng = random.Random(seed)
    vocab = Vocabulary(rng)
    names = _made_up(random.Random(seed + 1), facts * 3)
    rng.shuffle(names)
    subjects, others = names[:facts], names[facts:]
    bodies: list[dict[str, Any]] = []
    questions: list[tuple[str, str]] = []
    base = datetime(2025, 3, 1, tzinfo=UTC)
    counter = 0

    def session(rows_text: list[tuple[str, str]]) -> str:
        nonlocal counter
        session_id = f"fact-{seed}-{counter:05d}"
        counter += 1
        start = base + timedelta(hours=counter)
        rows = [_message(session_id, i, role, text, start) for i, (role, text) in enumerate(rows_text)]
        bodies.append({"source": "bench", "project": f"team{counter % 5}", "session_id": session_id, "messages": rows})
        return session_id

    def fill(n: int) -> list[tuple[str, str]]:
        return [("user" if i % 2 == 0 else "assistant", vocab.sentence()) for i in range(n)]

    for index, subject in enumerate(subjects):
        kind = FACT_KINDS[index % len(FACT_KINDS)]
        values = {"s": subject, "v": str(rng.randint(2, 99)), "o": rng.choice(others), "v2": str(rng.randint(2, 99))}
        target_rows = fill(rng.randint(5, filler))
        at = rng.randint(1, len(target_rows))
        for offset, line in enumerate(kind.plant):
            target_rows.insert(
                at + offset * rng.randint(1, 2), ("assistant" if offset % 2 == 0 else "user", line.format(**values))
            )
        target = session(target_rows)
        questions.append((kind.question.format(**values), target))
        # Distractors share the question's words: the subject elsewhere (twice), the attribute about
        # another subject, and both in different messages of one session.
        for _ in range(2):
            rows = fill(rng.randint(5, filler))
            rows.insert(rng.randint(0, len(rows)), ("user", kind.subject_elsewhere.format(**values)))
            session(rows)
        rows = fill(rng.randint(5, filler))
        rows.insert(rng.randint(0, len(rows)), ("assistant", kind.attribute_elsewhere.format(**values)))
        session(rows)
        rows = fill(rng.randint(6, filler))
        rows.insert(1, ("user", kind.subject_elsewhere.format(**values)))
        rows.insert(len(rows) - 1, ("assistant", kind.attribute_elsewhere.format(**{**values, "o": subject})))
        session(rows)
        # The rival: a stale mention matching as many of the question's words as the fact does, in a
        # conversation that also names the subject elsewhere.
        if not rivals:
            continue
        rows = fill(rng.randint(5, filler))
        rows.insert(rng.randint(0, len(rows)), ("assistant", kind.rival.format(**values)))
        rows.insert(rng.randint(0, len(rows)), ("user", kind.subject_elsewhere.format(**values)))
        session(rows)
    return bodies, questions
