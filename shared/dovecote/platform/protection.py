"""Protected payloads: envelope encryption at rest for message parts and artifact payloads.

AES-256-GCM (the `cryptography` package) under a data key from KMS. A sealed value is

    MAGIC ‖ u16be(len(edk)) ‖ edk ‖ nonce (12) ‖ ciphertext+tag

where `edk` is the KMS-encrypted data key. The record's identity (authority, task, message or
artifact id, digest) is the associated data: a ciphertext moved to another record fails to open.
Digests and sizes always describe the plaintext.

Why not Powertools' data masking with the AWS Encryption SDK provider: the SDK's import is about as
heavy as boto3's own (it loads boto3, attrs and its key-ring machinery), paid on every cold start of
every function that reads a task; `cryptography`'s AES-GCM loads in a few tens of milliseconds, and
the format above carries exactly what the SDK's message format would here (one data key, one
algorithm, the context). Measured figures are in docs/operations/security.md and the commit that introduced this.

Data keys are cached per container: one GenerateDataKey serves up to `max_uses` seals or `max_age`
seconds, and each decrypted data key is remembered (by its encrypted form), so a warm function
makes no KMS call for the records it wrote or has read before.

Downgrade protection: a record read back without the MAGIC prefix is plaintext. It is refused
unless `allow_plaintext_reads` is on (only to migrate data written before protection existed).
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections import OrderedDict
from typing import Any

from dovecote.platform.errors import CorruptStore

MAGIC = b"DVCP1"
NONCE = 12
# The KMS encryption context of every data key: IAM conditions bind the functions' grants to it.
CONTEXT = {"dovecote": "payload"}


class ProtectionError(CorruptStore):
    """A protected record could not be opened (tampered, moved, or replaced by plaintext)."""


def is_sealed(data: bytes) -> bool:
    return data[: len(MAGIC)] == MAGIC


class Protector:
    def __init__(
        self,
        kms: Any,
        key_id: str,
        *,
        allow_plaintext_reads: bool = False,
        max_uses: int = 10_000,
        max_age: float = 300.0,
        cache_size: int = 256,
    ) -> None:
        self._kms = kms
        self._key_id = key_id
        self.allow_plaintext_reads = allow_plaintext_reads
        self._max_uses = max_uses
        self._max_age = max_age
        self._lock = threading.Lock()
        self._current: tuple[bytes, bytes, float, int] | None = None  # (key, edk, born, uses)
        self._opened: OrderedDict[bytes, bytes] = OrderedDict()
        self._cache_size = cache_size

    def _data_key(self) -> tuple[bytes, bytes]:
        with self._lock:
            now = time.monotonic()
            if self._current is not None:
                key, edk, born, uses = self._current
                if uses < self._max_uses and now - born < self._max_age:
                    self._current = (key, edk, born, uses + 1)
                    return key, edk
            from dovecote.platform.aws import aws_errors

            with aws_errors(write=True):
                answer = self._kms.generate_data_key(KeyId=self._key_id, KeySpec="AES_256", EncryptionContext=CONTEXT)
            key, edk = bytes(answer["Plaintext"]), bytes(answer["CiphertextBlob"])
            self._current = (key, edk, now, 1)
            self._remember(edk, key)
            return key, edk

    def _remember(self, edk: bytes, key: bytes) -> None:
        self._opened[edk] = key
        self._opened.move_to_end(edk)
        while len(self._opened) > self._cache_size:
            self._opened.popitem(last=False)

    def _open_key(self, edk: bytes) -> bytes:
        with self._lock:
            key = self._opened.get(edk)
            if key is not None:
                self._opened.move_to_end(edk)
                return key
        from botocore.exceptions import ClientError

        from dovecote.platform.aws import aws_error_code, aws_errors

        try:
            with aws_errors(write=False):
                answer = self._kms.decrypt(CiphertextBlob=edk, EncryptionContext=CONTEXT, KeyId=self._key_id)
        except Exception as exc:
            cause = exc.__cause__
            if isinstance(cause, ClientError) and aws_error_code(cause) in ("InvalidCiphertextException",):
                raise ProtectionError("a protected record's data key does not open", reason="data_key") from None
            raise
        key = bytes(answer["Plaintext"])
        with self._lock:
            self._remember(edk, key)
        return key

    def seal(self, plaintext: bytes, identity: str) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        key, edk = self._data_key()
        nonce = os.urandom(NONCE)
        sealed = AESGCM(key).encrypt(nonce, plaintext, _aad(identity))
        return MAGIC + struct.pack(">H", len(edk)) + edk + nonce + sealed

    def open(self, stored: bytes, identity: str) -> bytes:
        """The plaintext of a record sealed for `identity`; ProtectionError when it does not open,
        or when it is plaintext and plaintext reads are not allowed."""
        if not is_sealed(stored):
            if self.allow_plaintext_reads:
                return stored
            raise ProtectionError(
                "a protected record was found in plaintext; it is not served (allow_plaintext_reads is off)",
                reason="plaintext",
            )
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        try:
            at = len(MAGIC)
            (size,) = struct.unpack(">H", stored[at : at + 2])
            edk = stored[at + 2 : at + 2 + size]
            nonce = stored[at + 2 + size : at + 2 + size + NONCE]
            body = stored[at + 2 + size + NONCE :]
            if len(edk) != size or len(nonce) != NONCE:
                raise ValueError("truncated")
        except (struct.error, ValueError):
            raise ProtectionError("a protected record is truncated", reason="format") from None
        try:
            return AESGCM(self._open_key(edk)).decrypt(nonce, body, _aad(identity))
        except InvalidTag:
            raise ProtectionError(
                "a protected record does not open for this record (tampered, or moved from another)",
                reason="authentication",
            ) from None

    # Payloads over the inline size live in S3, content-addressed and served by presigned URL, so
    # they cannot carry a per-record seal: S3 seals them with SSE-KMS under the same key (a data key
    # per object), and a server read checks the object still is (downgrade protection); its digest
    # binds it to the record. A presigned download carries the sha256 for the client to check.
    def s3_put_args(self) -> dict[str, str]:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self._key_id}

    def check_s3(self, response: dict[str, Any]) -> None:
        if response.get("ServerSideEncryption") != "aws:kms" and not self.allow_plaintext_reads:
            raise ProtectionError(
                "a protected object was found without KMS encryption; it is not served (allow_plaintext_reads is off)",
                reason="plaintext",
            )


class Unprotected:
    """Stores bytes as they are (the in-memory fakes; a deployment always has a key)."""

    allow_plaintext_reads = True

    def seal(self, plaintext: bytes, identity: str) -> bytes:
        return plaintext

    def open(self, stored: bytes, identity: str) -> bytes:
        return stored

    def s3_put_args(self) -> dict[str, str]:
        return {}

    def check_s3(self, response: dict[str, Any]) -> None:
        return None


def protector(settings: Any) -> Protector | Unprotected:
    """The sealer of protected payloads: KMS data keys under `data_key_id`. Without a key (the
    in-process fakes, a test that does not test protection) bytes are stored as they are, and a
    warning says so once per container; CDK and `dovecote dev` always set one. (Here rather than
    in platform/aws.py: protection uses the AWS clients, never the other way round.)"""
    from dovecote.platform.aws import lazy_client

    if settings.data_key_id:
        return Protector(lazy_client("kms"), settings.data_key_id, allow_plaintext_reads=settings.allow_plaintext_reads)
    from dovecote.platform.observability import logger

    logger.warning("DOVECOTE_DATA_KEY_ID is not set: message parts and artifact payloads are stored unsealed")
    return Unprotected()


def _aad(identity: str) -> bytes:
    return b"dovecote|" + identity.encode("utf-8")
