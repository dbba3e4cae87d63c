"""What the `moto_env` fixture keeps for the life of a test worker, so that each test pays only for its
own resources, not for botocore clients and RSA keys it never looks at.

- The botocore clients (`platform.aws.client`) are created once per worker and handed to every
  moto_env test. moto intercepts every client through its global stubber (a `before-send` handler
  botocore installs on each client it builds), so a client outlives `mock_aws` contexts and always
  reaches the current, freshly reset backends. What a test may leave on a client is its event
  hooks (the faults of tests/support/faults.py, a test's own `meta.events.register`); each kept
  client's event emitter goes back to the state it was created in when the test ends.
- moto gives every KMS key, symmetric ones included, a freshly generated RSA-2048 private key that
  only asymmetric operations (Sign, Verify, GetPublicKey) use, and that AWS refuses for a symmetric
  key: tens of milliseconds per test for nothing. Symmetric keys share one; their key material
  (what Encrypt and GenerateDataKey use) stays random per key.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from dovecote.platform import aws

_kept: dict[tuple[str, str, str], tuple[Any, Any]] = {}  # (service, region, endpoint) -> (client, pristine emitter)


def _key(service: str) -> tuple[str, str, str]:
    from dovecote.platform.settings import get_settings

    return service, get_settings().region, os.environ.get("AWS_ENDPOINT_URL", "")


def _emitter(client: Any) -> Any:
    return client.meta.events._emitter  # the HierarchicalEmitter under botocore's EventAliaser


def kept_client(create: Callable[[str], Any]) -> Callable[[str], Any]:
    """`platform.aws.client` over the worker's kept clients; `cache_clear` (reset_clients) forgets them."""

    def client(service: str) -> Any:
        key = _key(service)
        if key not in _kept:
            made = create(service)
            _kept[key] = (made, copy.copy(_emitter(made)))
        return _kept[key][0]

    def forget() -> None:
        _kept.clear()
        create.cache_clear()  # type: ignore[attr-defined]  # functools.cache under aws.client

    client.cache_clear = forget  # type: ignore[attr-defined]
    return client


def restore_hooks() -> None:
    """Each kept client's event handlers as they were when it was created: nothing a test
    registered reaches the next one."""
    for made, pristine in _kept.values():
        emitter = _emitter(made)
        fresh = copy.copy(pristine)
        emitter._handlers = fresh._handlers
        emitter._unique_id_handlers = fresh._unique_id_handlers
        emitter._lookup_cache = {}


@contextmanager
def shared_symmetric_rsa() -> Iterator[None]:
    """moto's KMS gives symmetric keys one shared (unused) RSA key instead of generating one each."""
    import moto.kms.models as kms

    original = kms.generate_private_key
    shared = functools.cache(original)

    def generate(key_spec: str) -> Any:
        return shared(key_spec) if key_spec == "SYMMETRIC_DEFAULT" else original(key_spec)

    kms.generate_private_key = generate  # type: ignore[assignment]
    try:
        yield
    finally:
        kms.generate_private_key = original


_original_client = aws.client


@contextmanager
def kept_clients() -> Iterator[None]:
    """For the block, `platform.aws.client` hands out the worker's kept clients; after it, their
    hooks are restored and the module's own cache is empty, as `reset_clients` leaves it."""
    aws.client = kept_client(_original_client)  # type: ignore[assignment]
    try:
        yield
    finally:
        aws.client = _original_client  # type: ignore[assignment]
        restore_hooks()
        aws.reset_clients()
