"""The default relation detector: deterministic rules over terms, no model and no LLM. It only
proposes; every candidate is stored PENDING for a later judgment.

For the new memory N and each retrieved prior memory P, the first rule that holds gives the verb:

1. conflicts_with: N and P are about the same thing (same `subject:` tag, or the same attribute
   key in "X is …", or near-identical wording) and contradict: the same attribute has a different
   value, one side is negated and the other not, or the numbers differ in otherwise identical words.
2. compatible: same subject or attribute, and the same value or near-identical wording (a
   restatement that reinforces the earlier memory).
3. not_conflict: same subject, but statements about different attributes of it ("db host is …" /
   "db port is …"): inspected, not in conflict, neither replaces the other.
4. supersedes: same subject otherwise: the newer memory replaces the latest one on that subject.
5. compatible: near-identical wording without a shared subject (a near-duplicate).
6. related: IDF-weighted cosine similarity ≥ RELATED and at least MIN_SHARED informative shared
   terms (stop words and scope-common terms do not count).
Otherwise no candidate. `scoped` is in the vocabulary but never proposed by these rules.

Evidence ids name both memories, the rule, the subject or attribute, and the shared terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from dovecote.memory import lexicon
from dovecote.memory.model import Candidate, Memory
from dovecote.memory.retrieval import TermStats

NEAR = 0.8  # near-identical wording
RELATED = 0.35
MIN_SHARED = 2
MAX_EVIDENCE_TERMS = 8


class CandidateDetector(Protocol):
    """Inspects a new memory against the retrieved prior memories of its scope and returns PENDING
    candidates, each from the new memory to one prior memory. An exception is recorded as
    `goncho_relation_detection_failed` evidence; it never fails the write."""

    def detect(self, new: Memory, prior: Sequence[Memory], stats: TermStats) -> list[Candidate]: ...


def similarity(a: frozenset[str], b: frozenset[str], stats: TermStats) -> float:
    """Cosine of binary term vectors weighted by IDF."""
    if not a or not b:
        return 0.0
    shared = sum(stats.weight(t) ** 2 for t in a & b)
    norm = math.sqrt(sum(stats.weight(t) ** 2 for t in a) * sum(stats.weight(t) ** 2 for t in b))
    return shared / norm if norm else 0.0


def _phrase(terms: Sequence[str]) -> str:
    return " ".join(terms)


class LexicalDetector:
    def detect(self, new: Memory, prior: Sequence[Memory], stats: TermStats) -> list[Candidate]:
        statement = lexicon.read(new.content)
        out = []
        for older in prior:
            if older.id == new.id:
                continue  # the reference lists prior memories excluding this one
            candidate = self.compare(new, statement, older, stats)
            if candidate is not None:
                out.append(candidate)
        return out

    def compare(self, new: Memory, n: lexicon.Statement, older: Memory, stats: TermStats) -> Candidate | None:
        p = lexicon.read(older.content)
        same_subject = bool(new.subject) and new.subject == older.subject
        same_attribute = bool(n.attribute) and n.attribute == p.attribute
        sim = similarity(n.terms, p.terms, stats)
        word_sim = similarity(n.words, p.words, stats)
        shared = sorted(n.terms & p.terms, key=lambda t: (-stats.weight(t), t))
        informative = [t for t in shared if not stats.is_common(t)]
        about = same_subject or same_attribute

        def candidate(verb: str, rule: str, note: str) -> Candidate:
            evidence = [f"memory:{new.id}", f"memory:{older.id}", f"rule:{rule}"]
            if same_subject:
                evidence.append(f"subject:{new.subject}")
            if same_attribute:
                evidence.append(f"attribute:{_phrase(n.attribute)}")
            evidence += [f"term:{t}" for t in informative[:MAX_EVIDENCE_TERMS]]
            return Candidate(new.id, older.id, verb, note, tuple(evidence))

        # 1. contradictions
        if same_attribute and (n.value != p.value or n.value_negated != p.value_negated):
            if n.value == p.value:
                note = f"'{_phrase(n.attribute)}' is negated in one memory and not in the other"
                return candidate("conflicts_with", "negation", note)
            note = (
                f"'{_phrase(n.attribute)}' has a different value: "
                f"'{n.value_text or _phrase(sorted(n.value))}' now, '{p.value_text or _phrase(sorted(p.value))}' before"
            )
            return candidate("conflicts_with", "attribute_value", note)
        if about or word_sim >= NEAR:
            if n.negated != p.negated and word_sim >= NEAR:
                note = f"the same statement (similarity {word_sim:.2f}) is negated in one memory only"
                return candidate("conflicts_with", "negation", note)
            if n.numbers and p.numbers and n.numbers != p.numbers and word_sim >= NEAR:
                note = (
                    f"the same statement with different numbers: {_phrase(sorted(n.numbers))} now, "
                    f"{_phrase(sorted(p.numbers))} before"
                )
                return candidate("conflicts_with", "number", note)
        # 2. reinforcing restatements about the same thing
        if about and (same_attribute or sim >= NEAR):
            why = f"the same value of '{_phrase(n.attribute)}'" if same_attribute else f"similarity {sim:.2f}"
            return candidate("compatible", "restatement", f"restates the earlier memory ({why})")
        # 3–4. same subject
        if same_subject and n.attribute and p.attribute:
            note = (
                f"both are about '{new.subject}' but state different attributes "
                f"('{_phrase(n.attribute)}' / '{_phrase(p.attribute)}')"
            )
            return candidate("not_conflict", "different_attribute", note)
        if same_subject:
            return candidate("supersedes", "subject", f"a newer memory on subject '{new.subject}'")
        # 5–6. wording alone
        if sim >= NEAR and len(informative) >= MIN_SHARED:
            return candidate("compatible", "near_duplicate", f"near-duplicate wording (similarity {sim:.2f})")
        if sim >= RELATED and len(informative) >= MIN_SHARED:
            note = f"shares {', '.join(informative[:MAX_EVIDENCE_TERMS])} (similarity {sim:.2f})"
            return candidate("related", "shared_terms", note)
        return None
