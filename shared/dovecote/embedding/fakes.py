"""A deterministic embedder for tests of the tier's plumbing (coverage, storage, re-embedding on a model
change). It hashes words into buckets: texts that share words are close, paraphrases are not. It is
never a default, and docs/services/recall.md says so."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from dovecote.embedding.ports import EmbedderInfo, check_vectors, gate_texts

WORDS = re.compile(r"\w+")


class HashingEmbedder:
    def __init__(self, dimension: int = 64, model_id: str = "dovecote.hashing-v1") -> None:
        self._info = EmbedderInfo(model_id, dimension)
        self.calls = 0  # batches embedded: tests count them
        self.texts = 0

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        batch = gate_texts(texts)
        self.calls += 1
        self.texts += len(batch)
        vectors = []
        for text in batch:
            vector = [0.0] * self._info.dimension
            for word in WORDS.findall(text.lower()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "big") % self._info.dimension
                vector[bucket] += 1.0 if digest[4] & 1 else -1.0
            vectors.append(vector)
        return check_vectors(self._info, batch, vectors)


__all__ = ["HashingEmbedder"]
