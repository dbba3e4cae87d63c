"""Presigned uploads to S3, for every service that takes a large body that way (notes, artifacts).

A URL is signed for exactly one body: its `Content-Length`, its SHA-256 (`x-amz-checksum-sha256`)
and, when given, its `Content-Type` are signed headers, so S3 refuses any other body. The client
sends exactly the returned headers with its PUT.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class PresignedUpload:
    """A PUT URL and the exact headers to send with it (they are signed: S3 refuses others)."""

    url: str
    headers: dict[str, str]


def checksum_b64(sha256_hex: str) -> str:
    """S3's `x-amz-checksum-sha256` header: the base64 of the raw digest."""
    return base64.b64encode(bytes.fromhex(sha256_hex)).decode("ascii")


def presign_put(
    s3: Any, *, bucket: str, key: str, size: int, sha256: str, expires_in: int, content_type: str | None = None
) -> PresignedUpload:
    """A presigned PutObject of `key` bound to `size` bytes whose SHA-256 is `sha256` (hex), and to
    `content_type` when one is given. Signing is local: no round trip."""
    headers = {"Content-Length": str(size)}
    params: dict[str, Any] = {"Bucket": bucket, "Key": key, "ContentLength": size}
    if content_type is not None:
        headers["Content-Type"] = content_type
        params["ContentType"] = content_type
    headers["x-amz-checksum-sha256"] = params["ChecksumSHA256"] = checksum_b64(sha256)
    url = s3.generate_presigned_url("put_object", Params=params, ExpiresIn=expires_in)
    return PresignedUpload(url=str(url), headers=headers)
