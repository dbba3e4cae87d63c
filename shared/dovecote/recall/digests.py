"""Which transcript files an authority has ingested, by the SHA-256 of their bytes: what `POST
/v1/transcripts/check {sha256: [...]}` answers, so `dovecote recall push` sends exactly the files the
server lacks (a server started `--fresh`, or another authority's token, lacks them all) instead of
trusting a local memory of what it sent.

A digest is recorded after its file is archived and indexed (`RecallService.ingest_file`, inline or by
the transcript indexer), so a digest the check calls known is searchable, or being rebuilt from the
archive. One item per (authority, digest) in the recall table: pk `a#<authority>`, sk `sha#<hex>`.

Round trips: record 1 (PutItem, idempotent); check 1 BatchGetItem per 100 digests (PynamoDB retries
the unprocessed keys), strongly consistent.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Protocol

from dovecote.platform.dynamo import bind, pynamodb_errors
from dovecote.platform.errors import InvalidArgument
from dovecote.platform.principal import Principal
from dovecote.recall.records import DIGEST_PREFIX, DigestRecord, ledger_partition

MAX_CHECK_DIGESTS = 1000
SHA256_HEX = re.compile(r"[0-9a-f]{64}")  # always fullmatch: `$` lets a final "\n" through


class IngestedDigests(Protocol):
    def record(self, authority: str, sha256: str) -> None: ...

    def known(self, authority: str, digests: list[str]) -> set[str]:
        """The digests of `digests` this authority has ingested."""
        ...


def gate_check(body: Any) -> list[str]:
    """The one gate of a check: `{sha256: [64 lowercase hex, …]}`, 1 to 1,000 digests, duplicates
    collapsed (first seen kept)."""
    if not isinstance(body, dict):
        raise InvalidArgument("the body must be a JSON object", field="")
    digests = body.get("sha256")
    if not isinstance(digests, list) or not 1 <= len(digests) <= MAX_CHECK_DIGESTS:
        raise InvalidArgument(
            f"sha256 must be a list of 1 to {MAX_CHECK_DIGESTS} digests", field="sha256", maximum=MAX_CHECK_DIGESTS
        )
    for index, digest in enumerate(digests):
        if not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest):
            raise InvalidArgument(
                f"sha256[{index}] must be a SHA-256 digest in 64 lowercase hex digits", field=f"sha256[{index}]"
            )
    return list(dict.fromkeys(digests))


class TranscriptCheck:
    """The verb of `POST /v1/transcripts/check` on its own. RecallService answers it through this, and
    the recall API builds only this for a check: `recall push` starts with one, and a function whose
    first request is a check then loads none of search's modules (their dataclasses were about a tenth
    of its cold start)."""

    def __init__(self, digests: IngestedDigests | None) -> None:
        self.digests = digests

    def unknown_transcripts(self, principal: Principal, body: Any) -> list[str]:
        """Of the SHA-256 digests asked about, those this authority has not ingested (all of them when
        no digest ledger is wired)."""
        principal.require("caller", "worker")
        if self.digests is None:
            return gate_check(body)
        return unknown_digests(self.digests, principal.authority, body)


def unknown_digests(ledger: IngestedDigests, authority: str, body: Any) -> list[str]:
    """Of the digests asked about, in the order asked, those the authority has not ingested."""
    digests = gate_check(body)
    known = ledger.known(authority, digests)
    return [d for d in digests if d not in known]


class DynamoIngestedDigests:
    def __init__(self, *, table: str, dynamodb: Any) -> None:
        self._model = bind(DigestRecord, table=table, client=dynamodb)

    def record(self, authority: str, sha256: str) -> None:
        with pynamodb_errors(write=True):
            self._model(ledger_partition(authority), DIGEST_PREFIX + sha256).save()

    def known(self, authority: str, digests: list[str]) -> set[str]:
        if not digests:
            return set()
        keys = [(ledger_partition(authority), DIGEST_PREFIX + d) for d in dict.fromkeys(digests)]
        with pynamodb_errors(write=False):
            found = list(self._model.batch_get(keys, consistent_read=True))
        return {item.sk.removeprefix(DIGEST_PREFIX) for item in found}


class InMemoryIngestedDigests:
    """The fake, held to the same suite as the DynamoDB ledger (tests/integration)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._digests: set[tuple[str, str]] = set()

    def record(self, authority: str, sha256: str) -> None:
        with self._lock:
            self._digests.add((authority, sha256))

    def known(self, authority: str, digests: list[str]) -> set[str]:
        with self._lock:
            return {d for d in digests if (authority, d) in self._digests}


__all__ = [
    "MAX_CHECK_DIGESTS",
    "DynamoIngestedDigests",
    "InMemoryIngestedDigests",
    "IngestedDigests",
    "gate_check",
    "unknown_digests",
]
