"""The recall query language, parsed once into a small tree that every engine compiles.

- Plain words are OR-ed; hits are then re-sorted by coverage (the distinct query terms matched), so
  a message holding every word comes first without losing the ones that hold only some.
- A query with operators is boolean: `&&`/`AND`, `||`/`OR`, `!x`/`NOT` (binary: `a NOT b`), and
  parentheses. Only uppercase `AND`/`OR`/`NOT` are operators; lowercase `and`/`or`/`not` are stop
  words like `the`. Adjacent terms in a boolean query are AND-ed, as in FTS5.
- `"quoted words"` are a phrase.
- A trailing `*` is FTS5's prefix operator: `zephyrc*` matches every word that starts with
  `zephyrc` (translated on both engines). A prefix is never a stop word (`the*` finds "theory").
- Stop words and terms without a letter or digit are dropped; a query left with no term is empty,
  and search answers it with an empty, complete envelope (not an error).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from dovecote.platform.errors import InvalidArgument

MAX_TERMS = 32

# A short English list: the words that carry no topic. The reference drops these too.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not of off on once only or other our ours ourselves out over own same she should so some
    such than that the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your yours
    yourself yourselves""".split()
)


@dataclass(frozen=True, slots=True)
class Term:
    text: str
    phrase: bool = False
    prefix: bool = False  # `text*`: every token starting with text


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Not:
    keep: Node
    drop: Node


Node = Term | And | Or | Not


@dataclass(frozen=True, slots=True)
class Query:
    root: Node
    # The distinct positive terms, in query order: coverage counts how many of these a hit matches.
    terms: tuple[Term, ...]
    boolean: bool


# An English possessive ("Melanie's", "James’"): the word itself is what a message names. Both
# engines' tokenizers split at the apostrophe, so the lexeme would be the phrase "melanie s", which
# a message that names her without the possessive ("Melanie: …", "I told Melanie") does not hold
# (docs/benchmarks/recall-dev.md: +0.02 MRR on real conversations).
_POSSESSIVE = re.compile(r"(?P<word>.*\w)['’](?:s|S)?(?P<tail>[^\w'’]*)")
_TOKEN = re.compile(r'"[^"]*"?|\(|\)|&&|\|\||![^\s()!]*|[^\s()"]+')
_WORDY = re.compile(r"\w", re.UNICODE)


def _meaningful(text: str) -> bool:
    return bool(_WORDY.search(text)) and text.lower() not in STOP_WORDS


def parse_query(raw: str) -> Query | None:
    """None when nothing searchable is left (empty, or only stop words)."""
    lexemes = _TOKEN.findall(raw)
    boolean = any(
        t in ("&&", "||", "AND", "OR", "NOT", "(", ")") or (t.startswith("!") and len(t) > 1) for t in lexemes
    )
    if not boolean:
        terms = _distinct([_term(t) for t in lexemes])
        if not terms:
            return None
        if len(terms) > MAX_TERMS:
            raise InvalidArgument(f"a query holds at most {MAX_TERMS} terms", field="q", terms=len(terms))
        return Query(root=terms[0] if len(terms) == 1 else Or(tuple(terms)), terms=tuple(terms), boolean=False)
    root = _Parser(lexemes).parse()
    if root is None:
        return None
    terms = _distinct(_positive_terms(root))
    if len(terms) > MAX_TERMS:
        raise InvalidArgument(f"a query holds at most {MAX_TERMS} terms", field="q", terms=len(terms))
    if not terms:
        return None
    return Query(root=root, terms=tuple(terms), boolean=True)


def _term(lexeme: str) -> Term | None:
    if lexeme.startswith('"'):
        words = lexeme.strip('"').strip()
        return Term(" ".join(words.split()), phrase=True) if _WORDY.search(words) else None
    if lexeme.endswith("*") and lexeme.rstrip("*") and _WORDY.search(lexeme):
        return Term(lexeme.rstrip("*"), prefix=True)
    if possessive := _POSSESSIVE.fullmatch(lexeme):
        lexeme = possessive["word"] + possessive["tail"]
    return Term(lexeme) if _meaningful(lexeme) else None


def _distinct(terms: list[Term | None]) -> list[Term]:
    seen: set[str] = set()
    out = []
    for term in terms:
        key = term.text.lower() + ("*" if term.prefix else "") if term is not None else ""
        if term is not None and key not in seen:
            seen.add(key)
            out.append(term)
    return out


def _positive_terms(node: Node) -> list[Term | None]:
    if isinstance(node, Term):
        return [node]
    if isinstance(node, Not):
        return _positive_terms(node.keep)
    return [t for item in node.items for t in _positive_terms(item)]


def _joined(items: list[Node | None], build: Callable[[tuple[Node, ...]], Node]) -> Node | None:
    """The terms that search for something, joined by `build` when there are several."""
    kept = tuple(i for i in items if i is not None)
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else build(kept)


class _Parser:
    """Recursive descent; precedence NOT > AND (explicit or implicit) > OR, as in FTS5."""

    def __init__(self, lexemes: list[str]) -> None:
        expanded: list[str] = []
        for lexeme in lexemes:
            if lexeme.startswith("!") and len(lexeme) > 1 and lexeme != "!":
                expanded += ["NOT", lexeme[1:]]
            elif lexeme == "&&":
                expanded.append("AND")
            elif lexeme == "||":
                expanded.append("OR")
            else:
                expanded.append(lexeme)
        self.lexemes = expanded
        self.i = 0

    def peek(self) -> str | None:
        return self.lexemes[self.i] if self.i < len(self.lexemes) else None

    def take(self) -> str:
        lexeme = self.lexemes[self.i]
        self.i += 1
        return lexeme

    def parse(self) -> Node | None:
        node = self.parse_or()
        if self.peek() is not None:
            raise InvalidArgument(f"unexpected {self.peek()!r} in the query", field="q")
        return node

    def _binary(
        self, op: str, sub: Callable[[], Node | None], build: Callable[[tuple[Node, ...]], Node]
    ) -> Node | None:
        items = [sub()]
        while self.peek() == op:
            self.take()
            if self.peek() in (None, ")", "AND", "OR", "NOT"):
                raise InvalidArgument(f"{op} needs a term on each side", field="q")
            items.append(sub())
        return _joined(items, build)

    def parse_or(self) -> Node | None:
        if self.peek() == "OR":
            raise InvalidArgument("OR needs a term on each side", field="q")
        return self._binary("OR", self.parse_and, Or)

    def parse_and(self) -> Node | None:
        items = [self.parse_not()]
        while True:
            lexeme = self.peek()
            if lexeme == "AND":
                self.take()
                if self.peek() in (None, ")", "AND", "OR", "NOT"):
                    raise InvalidArgument("AND needs a term on each side", field="q")
                items.append(self.parse_not())
            elif lexeme is not None and lexeme not in (")", "OR", "NOT"):
                items.append(self.parse_not())  # adjacency is AND, as in FTS5
            else:
                break
        return _joined(items, And)

    def parse_not(self) -> Node | None:
        if self.peek() == "NOT":
            raise InvalidArgument("NOT needs a term on its left: write `a NOT b` (or `a !b`)", field="q")
        node = self.parse_atom()
        while self.peek() == "NOT":
            self.take()
            if self.peek() in (None, ")", "AND", "OR", "NOT"):
                raise InvalidArgument("NOT needs a term on its right", field="q")
            drop = self.parse_atom()
            if node is None:
                raise InvalidArgument("NOT needs a searchable term on its left", field="q")
            if drop is not None:
                node = Not(node, drop)
        return node

    def parse_atom(self) -> Node | None:
        lexeme = self.peek()
        if lexeme is None:
            raise InvalidArgument("the query ends where a term was expected", field="q")
        if lexeme == "(":
            self.take()
            node = self.parse_or()
            if self.peek() != ")":
                raise InvalidArgument("unbalanced parenthesis in the query", field="q")
            self.take()
            return node
        if lexeme == ")":
            raise InvalidArgument("unbalanced parenthesis in the query", field="q")
        self.take()
        return _term(lexeme)


# ---- compilers ------------------------------------------------------------------------------------


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def to_fts5(node: Node, keep: Callable[[Term], bool] | None = None) -> str | None:
    """FTS5 MATCH syntax. `keep` drops leaves an index cannot match (the trigram index needs three
    characters); an OR loses the leaf, an AND or the kept side of a NOT becomes unmatchable."""
    if isinstance(node, Term):
        if keep is not None and not keep(node):
            return None
        # A prefix is `"text"*`; the trigram index (keep is set) matches it as a substring.
        return _quote(node.text) + ("*" if node.prefix and keep is None else "")
    if isinstance(node, Not):
        left = to_fts5(node.keep, keep)
        right = to_fts5(node.drop, keep)
        if left is None:
            return None
        return left if right is None else f"({left} NOT {right})"
    parts = [to_fts5(item, keep) for item in node.items]
    if isinstance(node, And):
        if any(p is None for p in parts):
            return None
        return "(" + " AND ".join(p for p in parts if p) + ")"
    kept = [p for p in parts if p is not None]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else "(" + " OR ".join(kept) + ")"
