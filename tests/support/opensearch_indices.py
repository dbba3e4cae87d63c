"""Fresh OpenSearch indices for each test, made while the previous test runs.

Each OpenSearch-backed test gets indices of its own, as new ones (deleting a test's documents
instead would not do: soft-deleted documents stay in the term statistics, and so in the scores a
ranking test compares). Creating an engine's three indices takes over a second of wall time per
test, mostly waiting on cluster-state updates and shard starts, so a pool creates the next test's
set in a background thread while the current test runs, and drops a used set there too.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from dovecote.recall.opensearch import OpenSearchIndex


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


def pool_fixture(kind: str) -> Callable[..., Any]:
    """A test module's `opensearch_pool` fixture: one pool of index sets named for `kind`, for the
    module's tests."""

    @pytest.fixture(scope="module")
    def opensearch_pool(opensearch_url: str) -> Iterator[IndexPool]:
        with index_pool(opensearch_url, kind) as pool:
            yield pool

    return opensearch_pool


@contextmanager
def pooled_index(request: pytest.FixtureRequest) -> Iterator[OpenSearchIndex]:
    """An engine on the real node shared by the run (tests/opensearch_fixture.py), on indices of this
    test's own from the module's `opensearch_pool`, handed back after. refresh="true": the contract
    of the default "wait_for" (a write that returned is searchable) without waiting out the 1 s
    refresh interval on every ingest; tests/integration/test_recall_opensearch.py holds the default
    to it."""
    from opensearchpy import OpenSearch

    from dovecote.recall.opensearch import OpenSearchIndex

    pool: IndexPool = request.getfixturevalue("opensearch_pool")
    prefix = pool.take()
    client = OpenSearch(hosts=[request.getfixturevalue("opensearch_url")], timeout=60)
    search = OpenSearchIndex(client, index_prefix=prefix, refresh="true")
    try:
        yield search
    finally:
        search.close()
        pool.give_back(prefix)
