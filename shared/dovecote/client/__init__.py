"""The Python SDK: `DovecoteClient` (in `core.py`), one typed method per route (docs/reference/http-api.md), with the
same
names and fields; see `core.py` for the layout and the transport rules.

The package itself imports only the light parts (the exception, the note ref, the configuration), and
loads `core` (httpx and the mixins, ~0.1 s) on first use of a name below: `dovecote notes get` answers
from the configuration and the standard library alone (`dovecote.cli.quick`), and importing
`dovecote.client.config` must not pay for a client it does not build.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dovecote.client.errors import DovecoteError, TaskEnded, WaitTimeout
from dovecote.notes.refs import note_ref

if TYPE_CHECKING:
    from dovecote.client.config import DEV_TOKENS_FILE
    from dovecote.client.core import DovecoteClient
    from dovecote.client.notes import Note
    from dovecote.client.tasks import TERMINAL_STATES, new_id, text_message

__all__ = [
    "DEV_TOKENS_FILE",
    "TERMINAL_STATES",
    "DovecoteClient",
    "DovecoteError",
    "Note",
    "TaskEnded",
    "WaitTimeout",
    "new_id",
    "note_ref",
    "text_message",
]

# Each lazy name → the module that defines it.
_LAZY = {
    "DEV_TOKENS_FILE": "dovecote.client.config",
    "DovecoteClient": "dovecote.client.core",
    "Note": "dovecote.client.notes",
    "TERMINAL_STATES": "dovecote.client.tasks",
    "new_id": "dovecote.client.tasks",
    "text_message": "dovecote.client.tasks",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value
