"""How the default detector reads a memory's text: terms, negation, numbers, and "attribute is
value" statements. Pure and deterministic (no model, no LLM), so a candidate can be explained by
the terms that produced it.

- Text is NFKC-normalised and case-folded; contractions are expanded ("isn't" → "is not").
- Terms are word tokens with a light plural stem, minus STOP_WORDS (function words and the most
  generic English verbs and adjectives: sharing "new" or "uses" says nothing about two facts).
- A term longer than MAX_TERM_BYTES (UTF-8) is kept as its first characters, "~" and a hash of the
  whole: every term goes into a DynamoDB key (the posting `P#<authority>#<scope>#<term>`, at most
  2,048 bytes), and one rule here keeps indexing, lookup and detection on the same form. Two long
  terms still match only when they are equal ("~" is never part of a word token).
- Negators are kept apart: they never make two memories similar, they only flip a statement.
- A one-sentence memory of the form `<attribute> is|are|=|: … <value>` is a Statement with an
  attribute key (its terms) and a value; two statements with one key and different values
  contradict ("the retry limit is 5" / "the retry limit is 7").
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

NEGATORS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"})

# Function words plus very generic verbs, adjectives and adverbs. Kept short on purpose: a word
# that can carry a fact ("blue", "friday", "cache") is never here; scope-wide commonness is
# judged from the index's document frequencies instead.
STOP_WORDS = frozenset(
    """
    a an the this that these those there here it its it's itself they them their theirs we us our ours
    you your yours he him his she her hers i me my mine one ones someone something anything everything
    and or but if then else so as than too very also just only even still yet again ever
    of to in on at by for with from into onto over under about above below between through during
    before after since until upon within per via out off up down across along around against among
    is are was were be been being am do does did doing done have has had having will would shall should
    can could may might must let lets get gets got getting make makes made making use uses used using
    go goes went going come comes came take takes took put puts say says said see sees saw know knows
    want wants need needs like likes seem seems keep keeps give gives gave find finds found think thinks
    new old good bad great big small little many much more most less least some any all each every
    other another such same own few several lot lots thing things way ways kind sort part
    what which who whom whose when where why how whether while because though although however
    yes ok okay well really quite rather almost already always often sometimes usually now today
    """.split()
)

# `<attribute> <copula> <value>`: the first copula splits a one-sentence memory.
_COPULA = re.compile(
    r"\s(?:is|are|was|were|equals|set\s+to|should\s+be|must\s+be|will\s+be|defaults\s+to)\s|\s?=\s?|:\s",
    re.IGNORECASE,
)
_SENTENCE_BREAK = re.compile(r"[.!?;]\s+\S")
_WORD = re.compile(r"[^\W_]+(?:[.'][^\W_]+)*")
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)*%?")
_CONTRACTIONS = ((re.compile(r"\bcan['’]t\b"), "can not"), (re.compile(r"\bwon['’]t\b"), "will not"))
_NT = re.compile(r"n['’]t\b")
MAX_ATTRIBUTE_TERMS = 6
MAX_VALUE_TERMS = 8
MAX_TERM_BYTES = 64
_KEPT_PREFIX_BYTES = 40  # + "~" + 16 hex digits: a capped term is at most 57 bytes


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return _NT.sub(" not", text)


def stem(word: str) -> str:
    """Plural folding only: consistency matters here, not linguistics."""
    if len(word) > 4 and word.endswith("sses"):
        return word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Normalised word tokens in order, numbers included, nothing dropped."""
    return [w.strip("'") for w in _WORD.findall(normalise(text)) if w.strip("'")]


def is_number(word: str) -> bool:
    return _NUMBER.fullmatch(word) is not None


def bounded(term: str) -> str:
    """`term`, or for one over MAX_TERM_BYTES its prefix, "~" and 64 bits of its SHA-256."""
    encoded = term.encode("utf-8")
    if len(encoded) <= MAX_TERM_BYTES:
        return term
    prefix = encoded[:_KEPT_PREFIX_BYTES].decode("utf-8", errors="ignore")  # never half a character
    return f"{prefix}~{hashlib.sha256(encoded).hexdigest()[:16]}"


def terms_of(tokens: list[str]) -> list[str]:
    """Distinct informative terms in first-seen order, each at most MAX_TERM_BYTES long."""
    seen: dict[str, None] = {}
    for token in tokens:
        if token in NEGATORS or token in STOP_WORDS:
            continue
        term = token if is_number(token) else stem(token)
        if term and term not in STOP_WORDS:
            seen.setdefault(bounded(term), None)
    return list(seen)


def terms(text: str) -> list[str]:
    return terms_of(words(text))


@dataclass(frozen=True, slots=True)
class Statement:
    terms: frozenset[str]
    negated: bool
    numbers: frozenset[str]
    attribute: tuple[str, ...] = ()  # sorted key terms; () when the text is not "X is Y"
    value: frozenset[str] = frozenset()
    value_negated: bool = False
    value_text: str = ""  # the value as written (normalised), for a note a person reads

    @property
    def words(self) -> frozenset[str]:
        """The non-numeric terms: what two statements that differ only in a number share."""
        return self.terms - self.numbers


def read(text: str) -> Statement:
    tokens = words(text)
    found = terms_of(tokens)
    statement = Statement(
        terms=frozenset(found),
        negated=any(t in NEGATORS for t in tokens),
        numbers=frozenset(t for t in found if is_number(t)),
    )
    sentence = normalise(text).strip().rstrip(".!?")
    if _SENTENCE_BREAK.search(sentence):
        return statement  # several sentences: no single attribute to compare
    copula = _COPULA.search(sentence)
    if copula is None:
        return statement
    left, right = sentence[: copula.start()], sentence[copula.end() :]
    key = terms(left)
    value_tokens = words(right)
    value = terms_of(value_tokens)
    if not 1 <= len(key) <= MAX_ATTRIBUTE_TERMS or not 1 <= len(value) <= MAX_VALUE_TERMS:
        return statement
    return Statement(
        terms=statement.terms,
        negated=statement.negated,
        numbers=statement.numbers,
        attribute=tuple(sorted(key)),
        value=frozenset(value),
        value_negated=any(t in NEGATORS for t in value_tokens),
        value_text=right.strip(),
    )
