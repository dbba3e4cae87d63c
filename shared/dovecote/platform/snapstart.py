"""Lambda SnapStart's runtime hooks for a function.

With the stack's `snapstart` option (infra/app.py), Lambda runs a function's initialization when a
version is published, snapshots the initialized environment and resumes every new execution
environment from that snapshot. Two things in a snapshot must not be shared by the environments
resumed from it, and the after-restore hook replaces them:

- the `random` module's state (retry jitter, here and in botocore): every restored environment would
  draw the same numbers. `os.urandom`, which the ids, tokens and AES-GCM nonces come from, is the
  kernel's and Lambda makes it unique after a restore;
- the AWS clients and whatever holds one (each function's composition root, the data-key cache of
  platform/protection.py): their connections, and the credentials they resolved, are those of the
  environment the snapshot was taken in.

The before-snapshot hook ("prime") does the loading a first request would do, so the snapshot holds
it: the adapters imported, the clients' service models parsed (platform/aws.py keeps them in the
process-wide loader, so the clients rebuilt after a restore cost little), the routes' validation
models built. It makes no request to AWS.

The hooks come from `snapshot_restore_py`, which Lambda's Python runtimes include; they are
registered only when Lambda initializes for a snapshot (`AWS_LAMBDA_INITIALIZATION_TYPE`), so a
function deployed without SnapStart, the local runtime and the tests never import it.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable
from typing import Any, Protocol

SNAPSTART = "snap-start"


class Cached(Protocol):
    def cache_clear(self) -> None: ...


class Composition(Cached, Protocol):
    """A function's composition root: built once (functools.cache), cleared after a restore."""

    def __call__(self) -> Any: ...


def snapshotting() -> bool:
    """True while Lambda initializes a function version for a SnapStart snapshot."""
    return os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") == SNAPSTART


def after_restore(forget: Iterable[Cached] = ()) -> None:
    """Run in each environment resumed from a snapshot, before its first request."""
    from dovecote.platform import aws

    random.seed()  # from os.urandom: a fresh sequence per environment
    aws.reset_clients()
    for cached in forget:
        cached.cache_clear()  # composition roots: rebuilt on the first request, with new clients


def register(*, prime: Callable[[], Any] | None = None, forget: Iterable[Cached] = ()) -> bool:
    """Register this function's hooks when Lambda initializes it for a snapshot; True if it did.
    `prime` runs before the snapshot; the caches in `forget` are cleared after each restore."""
    if not snapshotting():
        return False
    from snapshot_restore_py import register_after_restore, register_before_snapshot

    if prime is not None:
        register_before_snapshot(prime)
    register_after_restore(after_restore, tuple(forget))
    return True
