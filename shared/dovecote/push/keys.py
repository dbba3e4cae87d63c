"""Webhook signing keys: Standard Webhooks' asymmetric signature (`webhook-signature: v1a,<base64
Ed25519 signature over "{webhook-id}.{webhook-timestamp}.{body}">`), the keys' public halves as a
JWKS (OKP, crv Ed25519, kid = the key's RFC 7638 thumbprint) at /.well-known/jwks.json.

A key ring is JSON: {"keys": [{"kid", "seed": base64 of the 32-byte Ed25519 private key,
"created_at", "retire_at"?}]} (epoch seconds). Every key not yet retired signs, so during a
rotation's overlap a notification carries two signatures, and a receiver holding either key
verifies it (Standard Webhooks allows several space-separated signatures); the JWKS lists exactly
the keys that sign. `rotate` adds a key and retires the others `overlap` seconds later.

Where the ring lives:
- `dovecote dev`: a 0600 file in the data directory (`FileKeys`), made at the first start.
- The cloud: a Secrets Manager secret, encrypted under the data key, readable by the sender only
  (`SecretKeys`). CloudFormation generates its first value as {"seed": "<64 random characters>"}
  (the key is SHA-256 of that text): a key no person or template ever saw. Why not a KMS
  ECC_NIST_EDWARDS25519 key (KMS has signed Ed25519 since late 2025, ED25519_SHA_512): KMS signs a
  RAW message of at most 4,096 bytes, and a notification (a status with the agent's message, an
  artifact) is often larger; the prehashed variant (ED25519_PH_SHA_512) is HashEdDSA, which no
  Standard Webhooks verifier accepts. (moto 5.2.5 has no Ed25519 keys either, so it could not be
  tested here.) The private key is in the sender's memory while it signs; it never leaves AWS.

Rotation: `python -m dovecote.push.keys rotate --file PATH | --secret-arn ARN [--overlap-hours H]`
(the operator's own credentials in the cloud). The sender re-reads the ring every CACHE_SECONDS
(a file: when it changed) and publishes its JWKS before it signs with a new key.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

SIGNATURE_VERSION = "v1a"
DEFAULT_OVERLAP_S = 24 * 3600
CACHE_SECONDS = 300.0
KEY_FILE = "webhook-keys.json"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class SigningKey:
    seed: bytes  # the Ed25519 private key
    created_at: int
    retire_at: int = 0

    @property
    def public(self) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    @property
    def jwk(self) -> dict[str, str]:
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": _b64url(self.public),
            "kid": self.kid,
            "use": "sig",
            "alg": "EdDSA",
        }

    @property
    def kid(self) -> str:
        """The RFC 7638 thumbprint of the public key."""
        members = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": _b64url(self.public)}, separators=(",", ":"))
        return _b64url(hashlib.sha256(members.encode("ascii")).digest())

    def sign(self, message: bytes) -> bytes:
        return Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)


@dataclass(frozen=True, slots=True)
class KeyRing:
    keys: tuple[SigningKey, ...]

    def active(self, now: float) -> list[SigningKey]:
        return [k for k in self.keys if not k.retire_at or k.retire_at > now]

    def signature(self, webhook_id: str, timestamp: int, body: bytes, now: float) -> str:
        """The `webhook-signature` header: one v1a signature per active key."""
        message = f"{webhook_id}.{timestamp}.".encode() + body
        return " ".join(
            f"{SIGNATURE_VERSION},{base64.b64encode(k.sign(message)).decode('ascii')}" for k in self.active(now)
        )

    def jwks(self, now: float) -> dict[str, Any]:
        return {"keys": [k.jwk for k in self.active(now)]}

    def dump(self) -> str:
        keys = []
        for k in self.keys:
            entry: dict[str, Any] = {
                "kid": k.kid,
                "seed": base64.b64encode(k.seed).decode(),
                "created_at": k.created_at,
            }
            if k.retire_at:
                entry["retire_at"] = k.retire_at
            keys.append(entry)
        return json.dumps({"keys": keys}, indent=2) + "\n"


def parse(text: str) -> KeyRing:
    raw = json.loads(text)
    if isinstance(raw, dict) and isinstance(raw.get("seed"), str) and "keys" not in raw:
        # CloudFormation's generated first value: the key is SHA-256 of the generated text.
        return KeyRing((SigningKey(hashlib.sha256(raw["seed"].encode("utf-8")).digest(), 0),))
    keys = []
    for entry in raw["keys"]:
        seed = base64.b64decode(entry["seed"])
        if len(seed) != 32:
            raise ValueError("a signing key's seed is 32 bytes")
        keys.append(SigningKey(seed, int(entry.get("created_at", 0)), int(entry.get("retire_at", 0))))
    if not keys:
        raise ValueError("a key ring holds at least one key")
    return KeyRing(tuple(keys))


def new_ring(now: float) -> KeyRing:
    return KeyRing((SigningKey(os.urandom(32), int(now)),))


def rotate(ring: KeyRing, now: float, overlap: int = DEFAULT_OVERLAP_S) -> KeyRing:
    """A new key that signs from now on; every other active key signs `overlap` seconds more; keys
    already retired are dropped."""
    kept = [
        replace(k, retire_at=k.retire_at or int(now) + overlap)
        for k in ring.keys
        if not k.retire_at or k.retire_at > now
    ]
    return KeyRing((*kept, SigningKey(os.urandom(32), int(now))))


class FileKeys:
    """The ring in a file only its owner reads (`dovecote dev`: DIR/webhook-keys.json), made with a
    new key when absent; read again when it changes."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[float, KeyRing] | None = None

    def ring(self) -> KeyRing:
        with self._lock:
            if not self.path.exists():
                write_private(self.path, new_ring(time.time()).dump())
            stamp = self.path.stat().st_mtime
            if self._seen is None or self._seen[0] != stamp:
                self._seen = (stamp, parse(self.path.read_text()))
            return self._seen[1]


class SecretKeys:
    """The ring in a Secrets Manager secret, read at most once per CACHE_SECONDS."""

    def __init__(self, secretsmanager: Any, secret_arn: str, *, clock: Any = time.monotonic) -> None:
        self._client, self._arn, self._clock = secretsmanager, secret_arn, clock
        self._lock = threading.Lock()
        self._seen: tuple[float, KeyRing] | None = None

    def ring(self) -> KeyRing:
        with self._lock:
            now = self._clock()
            if self._seen is None or now - self._seen[0] >= CACHE_SECONDS:
                from dovecote.platform.aws import aws_errors

                with aws_errors(write=False):
                    text = self._client.get_secret_value(SecretId=self._arn)["SecretString"]
                self._seen = (now, parse(text))
            return self._seen[1]


def write_private(path: Path, text: str) -> None:
    """Replace `path` whole with `text`, readable by its owner only, never by others even briefly."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    """`python -m dovecote.push.keys rotate|show (--file PATH | --secret-arn ARN) [--overlap-hours H]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m dovecote.push.keys", description=main.__doc__)
    parser.add_argument("action", choices=("rotate", "show"))
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--file", help="the ring's file (dovecote dev: DIR/webhook-keys.json)")
    where.add_argument("--secret-arn", help="the ring's Secrets Manager secret (stack output WebhookKeysSecret)")
    parser.add_argument("--overlap-hours", type=float, default=DEFAULT_OVERLAP_S / 3600)
    args = parser.parse_args(argv)
    now = time.time()
    if args.file:
        ring = FileKeys(args.file).ring()
    else:
        import boto3

        client = boto3.client("secretsmanager")
        ring = parse(client.get_secret_value(SecretId=args.secret_arn)["SecretString"])
    if args.action == "rotate":
        ring = rotate(ring, now, int(args.overlap_hours * 3600))
        if args.file:
            write_private(Path(args.file), ring.dump())
        else:
            client.put_secret_value(SecretId=args.secret_arn, SecretString=ring.dump())
    print(json.dumps(ring.jwks(now), indent=2))  # public halves only
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
