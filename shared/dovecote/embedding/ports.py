"""The `Embedder` port: texts in, one unit-length vector per text out, in order.

Every adapter goes through `gate_texts` (the one input gate) and `check_vectors` (what it got back
is what the port promises), so the conformance suite holds each of them to the same rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dovecote.platform.errors import InvalidArgument, Unavailable

# A batch is what one indexer invocation embeds at a time; an adapter splits it as its service needs.
MAX_BATCH = 256
# Titan Text Embeddings V2 takes up to 50,000 characters (8k tokens); a longer text is embedded by its
# start. The transcript indexer caps a message far below this anyway.
MAX_CHARS = 50_000


@dataclass(frozen=True, slots=True)
class EmbedderInfo:
    """What is stored with each vector: a vector of another model or dimension is stale."""

    model_id: str
    dimension: int


class Embedder(Protocol):
    @property
    def info(self) -> EmbedderInfo: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector of `info.dimension` floats per text, in order. An empty or blank text
        gets the zero vector (it has no meaning to embed). Raises `Unavailable` when the service
        fails after its retries, `InvalidArgument` for a batch the port refuses."""
        ...


def gate_texts(texts: Sequence[str]) -> list[str]:
    """The one gate: a sequence of strings (not one string), at most MAX_BATCH, each cut to MAX_CHARS."""
    if isinstance(texts, str | bytes) or not all(isinstance(t, str) for t in texts):
        raise InvalidArgument("embed takes a sequence of strings")
    if len(texts) > MAX_BATCH:
        raise InvalidArgument(f"at most {MAX_BATCH} texts per batch", count=len(texts))
    return [t[:MAX_CHARS] for t in texts]


def unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else [0.0] * len(vector)


def check_vectors(info: EmbedderInfo, texts: Sequence[str], vectors: Sequence[Sequence[float]]) -> list[list[float]]:
    """The answer as the port promises it, or `Unavailable`: a service that answers the wrong count or
    dimension is failing, and nothing of it may be stored."""
    if len(vectors) != len(texts):
        raise Unavailable("the embedder answered the wrong number of vectors", expected=len(texts), got=len(vectors))
    checked = []
    for vector in vectors:
        if len(vector) != info.dimension or not all(isinstance(x, int | float) and math.isfinite(x) for x in vector):
            raise Unavailable(
                "the embedder answered a malformed vector", model_id=info.model_id, dimension=info.dimension
            )
        checked.append(unit([float(x) for x in vector]))
    return checked


__all__ = ["MAX_BATCH", "MAX_CHARS", "Embedder", "EmbedderInfo", "check_vectors", "gate_texts", "unit"]
