"""Fresh OpenSearch indices for each test, made while the previous test runs.

Each OpenSearch-backed test gets indices of its own, as new ones (deleting a test's documents
instead would not do: soft-deleted documents stay in the term statistics, and so in the scores a
ranking test compares). Creating an engine's three indices takes over a second of wall time per
test, mostly waiting on cluster-state updates and shard starts, so a pool creates the next test's
set in a background thread while the current test runs, and drops a used set there too.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager


class IndexPool:
    """Prefixes whose indices (`OpenSearchIndex.ensure_indices`, default options) already exist."""

    def __init__(self, url: str, kind: str) -> None:
        from opensearchpy import OpenSearch

        self._client = OpenSearch(hosts=[url], timeout=60)
        self._kind = kind
        self._work = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"indices-{kind}")
        self._next: Future[str] = self._work.submit(self._make)

    def _make(self) -> str:
        from dovecote.recall.opensearch import OpenSearchIndex

        prefix = f"{self._kind}-{uuid.uuid4().hex[:12]}"
        OpenSearchIndex(self._client, index_prefix=prefix).ensure_indices()
        return prefix

    def _drop(self, prefix: str) -> None:
        names = ",".join(f"{prefix}-{kind}" for kind in ("messages", "sessions", "topics", "documents"))
        self._client.indices.delete(index=names, ignore_unavailable=True)

    def take(self) -> str:
        """A prefix whose indices exist and are empty; the next one is started at once."""
        prefix = self._next.result()
        self._next = self._work.submit(self._make)
        return prefix

    def give_back(self, prefix: str) -> None:
        self._work.submit(self._drop, prefix)

    def close(self) -> None:
        try:
            self._drop(self._next.result())  # the set made ahead for a test that never came
        finally:
            self._work.shutdown(wait=True)
            self._client.close()


@contextmanager
def index_pool(url: str, kind: str) -> Iterator[IndexPool]:
    pool = IndexPool(url, kind)
    try:
        yield pool
    finally:
        pool.close()
