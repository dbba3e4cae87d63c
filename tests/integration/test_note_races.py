"""Races with real threads against moto: concurrent overwrites of one note, and concurrent puts and
deletes. Whatever interleaving wins, a Get is whole: its metadata and body belong to one Put."""

from __future__ import annotations

import hashlib
import threading
from typing import Any

from dovecote.notes.dynamo import DynamoNoteStore
from dovecote.notes.model import NoteFilter, note_ref
from dovecote.notes.service import NotesService, PutNote
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import NotFound
from dovecote.platform.principal import Principal
from tests.support.threads import together

ACME = Principal("acme", "caller")


def service(env: dict[str, Any]) -> NotesService:
    store = DynamoNoteStore(
        table=env["settings"].notes_table, bucket=env["settings"].bucket, dynamodb=env["dynamodb"], s3=env["s3"]
    )
    return NotesService(store, CursorSigner(b"race-key-0123456789abcdefghijklmn"))


def run_threads(count: int, target: Any) -> None:
    errors = [r for r in together(count, target) if isinstance(r, BaseException)]
    assert not errors, errors


def test_concurrent_overwrites_leave_one_whole_note(moto_env: dict[str, Any]) -> None:
    notes = service(moto_env)
    bodies = {i: f"writer {i} ".encode() * (i + 1) for i in range(8)}
    run_threads(8, lambda i: notes.put(ACME, PutNote(key="k", run=1, name="n", text=bodies[i].decode())))
    view = notes.get(ACME, note_ref("k", 1, "n", ""))
    body = (view.text or "").encode()
    assert body in bodies.values()
    assert view.meta.size == len(body) and view.meta.sha256 == hashlib.sha256(body).hexdigest()
    items, cursor = notes.list(ACME, NoteFilter(), None, None)
    assert len(items) == 1 and cursor is None


def test_concurrent_puts_of_distinct_notes_are_all_listed(moto_env: dict[str, Any]) -> None:
    notes = service(moto_env)
    run_threads(8, lambda i: [notes.put(ACME, PutNote(key="k", run=1, name=f"n{i}-{j}", text="x")) for j in range(5)])
    refs: list[str] = []
    cursor = None
    while True:
        items, cursor = notes.list(ACME, NoteFilter(key="k"), 7, cursor)
        refs += [m.ref for m in items]
        if not cursor:
            break
    assert len(refs) == 40 and len(set(refs)) == 40 and refs == sorted(refs)


def test_concurrent_deletes_remove_once(moto_env: dict[str, Any]) -> None:
    notes = service(moto_env)
    ref = notes.put(ACME, PutNote(key="k", run=1, name="n", text="x")).ref
    outcomes: list[str] = []
    lock = threading.Lock()

    def delete(_: int) -> None:
        try:
            notes.delete(ACME, ref)
            result = "deleted"
        except NotFound:
            result = "not_found"
        with lock:
            outcomes.append(result)

    run_threads(6, delete)
    assert sorted(outcomes) == ["deleted"] + ["not_found"] * 5
