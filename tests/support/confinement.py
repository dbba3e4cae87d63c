"""The rule that a fresh clone passes alone: no test or fixture reads beside the repo.

A clone in an empty directory has nothing next to it, so a test that opens `../shared/...` (or any
other sibling of the clone) passes only on a machine laid out like the team's. Two guards hold the
suite to the rule:

- at run time, an audit hook (PEP 578) records every file the test process opens or lists under the
  clone's parent directory but outside the clone, and the suite fails the test that did it;
- statically, tests/unit/test_repo_confinement.py reads every source for paths that climb out.

What may legitimately sit under the parent (a home directory's dot-folders, the Python install, the
temporary directory) is allowed by `beside_the_clone`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Audit events that name a path the process reads or lists.
_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "glob.glob", "os.chdir"})
_seen: list[str] = []


def _allowed_roots() -> tuple[str, ...]:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, tempfile.gettempdir()}
    return tuple(os.path.realpath(r) for r in roots)


_ALLOWED = _allowed_roots()
# What tempfile and pytest name their entries in a temporary directory.
TEMPORARY = ("tmp", "pytest-of-")


def beside_the_clone(path: str, root: Path = ROOT, allowed: tuple[str, ...] = _ALLOWED) -> bool:
    """Whether `path` lies under the clone's parent but outside the clone: a place a fresh clone
    does not have. Dot-entries of the parent (a home directory's .cache, .pyenv) and the allowed
    roots (the interpreter, the temporary directory) are not 'beside' it."""
    absolute = os.path.normpath(os.path.abspath(path))
    parent = str(root.parent).rstrip(os.sep)
    if absolute == str(root) or absolute.startswith(str(root) + os.sep):
        return False
    if not absolute.startswith(parent + os.sep):
        return False
    first = absolute[len(parent) + 1 :].split(os.sep, 1)[0]
    if first.startswith("."):
        return False
    for place in allowed:
        if place == parent or parent.startswith(place + os.sep):
            # The clone lives inside this place (a clone under /tmp): its siblings are still beside
            # it; only what the place itself makes there is not (a temporary directory's entries).
            if place == parent and first.startswith(TEMPORARY):
                return False
        elif absolute == place or absolute.startswith(place + os.sep):
            return False
    return True


def _hook(event: str, args: tuple) -> None:
    if event not in _EVENTS or not args:
        return
    path = args[0]
    if isinstance(path, int) or path is None:
        return
    try:
        text = os.fsdecode(path)
    except (TypeError, ValueError):
        return
    if beside_the_clone(text):
        _seen.append(text)


def install() -> None:
    """Install the audit hook once per process (it cannot be removed: PEP 578)."""
    if not getattr(install, "done", False):
        sys.addaudithook(_hook)
        install.done = True  # type: ignore[attr-defined]


def take() -> list[str]:
    """The paths seen since the last call, and forget them."""
    seen = list(dict.fromkeys(_seen))
    _seen.clear()
    return seen
