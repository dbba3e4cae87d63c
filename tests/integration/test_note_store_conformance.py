"""docs/design/notes.md, every case, through NotesService over each NoteStore: the in-memory fake and the
DynamoDB + S3 adapter on moto. Both must pass the same suite."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from dovecote.notes.dynamo import DynamoNoteStore
from dovecote.notes.limits import INLINE_LIMIT
from dovecote.notes.memory import InMemoryNoteStore
from dovecote.notes.model import NoteFilter, note_ref
from dovecote.notes.service import NotesService, PutNote
from dovecote.platform.cursors import CursorSigner
from dovecote.platform.errors import Forbidden, InvalidArgument, NotFound
from dovecote.platform.principal import Principal

ACME = Principal("acme", "caller")
GLOBEX = Principal("globex", "caller")


@dataclass
class Backend:
    service: NotesService
    upload: Callable[[str, bytes, dict[str, str]], None]


@pytest.fixture(params=["memory", "dynamo"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    signer = CursorSigner(b"conformance-key-0123456789abcdef")
    if request.param == "memory":
        store = InMemoryNoteStore()
        yield Backend(NotesService(store, signer), store.upload)
        return
    env = request.getfixturevalue("moto_env")
    store_ = DynamoNoteStore(
        table=env["settings"].notes_table, bucket=env["settings"].bucket, dynamodb=env["dynamodb"], s3=env["s3"]
    )

    def http_upload(url: str, body: bytes, headers: dict[str, str]) -> None:
        assert requests.put(url, data=body, headers=headers, timeout=30).status_code == 200

    yield Backend(NotesService(store_, signer), http_upload)


def put(b: Backend, key: str, run: int, name: str, author: str = "", text: str = "body", who: Principal = ACME) -> Any:
    return b.service.put(who, PutNote(key=key, run=run, name=name, author=author, text=text))


def listing(b: Backend, who: Principal = ACME, limit: int | None = None, **filters: Any) -> list[str]:
    refs: list[str] = []
    cursor = None
    while True:
        items, cursor = b.service.list(who, NoteFilter(**filters), limit, cursor)
        refs.extend(m.ref for m in items)
        if not cursor:
            return refs


def test_put_then_get_and_list_at_once(backend: Backend) -> None:
    meta = put(backend, "harden:widget", 1, "fix_plan", "claude", "plan A")
    assert meta.ref == note_ref("harden:widget", 1, "fix_plan", "claude")
    view = backend.service.get(ACME, meta.ref)
    assert view.text == "plan A" and view.meta.size == 6
    assert view.meta.sha256 == hashlib.sha256(b"plan A").hexdigest()
    assert listing(backend) == [meta.ref]


def test_put_overwrites(backend: Backend) -> None:
    put(backend, "k", 1, "n", text="first")
    meta = put(backend, "k", 1, "n", text="second, longer")
    assert backend.service.get(ACME, meta.ref).text == "second, longer"
    assert listing(backend) == [meta.ref]


def test_empty_body_is_allowed(backend: Backend) -> None:
    meta = put(backend, "k", 1, "n", text="")
    assert backend.service.get(ACME, meta.ref).text == ""


def test_binary_body_comes_back_as_base64(backend: Backend) -> None:
    meta = backend.service.put(ACME, PutNote(key="k", run=1, name="bin", body_b64="AP8A"))
    view = backend.service.get(ACME, meta.ref)
    assert view.body_b64 == "AP8A" and view.text is None
    assert view.meta.content_type == "application/octet-stream"


def test_invalid_text_utf8_declared_as_text_comes_back_as_base64(backend: Backend) -> None:
    meta = backend.service.put(ACME, PutNote(key="k", run=1, name="n", body_b64="/w==", content_type="text/plain"))
    assert backend.service.get(ACME, meta.ref).body_b64 == "/w=="


def test_invalid_note_stores_nothing(backend: Backend) -> None:
    for bad in (
        PutNote(key="", run=1, name="n", text="x"),
        PutNote(key="k", run=0, name="n", text="x"),
        PutNote(key="k", run=1, name="", text="x"),
    ):
        with pytest.raises(InvalidArgument):
            backend.service.put(ACME, bad)
    assert listing(backend) == []


def six(b: Backend) -> None:
    put(b, "harden:widget", 1, "fix_plan", "claude")
    put(b, "harden:widget", 1, "fix_plan", "gemini")
    put(b, "harden:widget", 1, "fix_plan", "")
    put(b, "harden:widget", 1, "critique", "claude")
    put(b, "harden:widget", 2, "fix_plan", "claude")
    put(b, "harden:other", 1, "fix_plan", "claude")


@pytest.mark.parametrize(
    ("filters", "count"),
    [
        ({"key": "harden:widget"}, 5),
        ({"key": "harden:widget", "run": 1, "name": "fix_plan"}, 3),
        ({"author": ""}, 1),
        ({"run": 2}, 1),
        ({}, 6),
        # beyond the reference table: each residual-filter path
        ({"key": "harden:widget", "run": 1}, 4),
        ({"key": "harden:widget", "name": "fix_plan"}, 4),
        ({"key": "harden:widget", "author": "claude"}, 3),
        ({"key": "harden:widget", "run": 1, "name": "fix_plan", "author": ""}, 1),
        ({"name": "critique"}, 1),
        ({"author": "claude"}, 4),
        ({"key": "nothing"}, 0),
    ],
)
def test_six_note_filter_table(backend: Backend, filters: dict[str, Any], count: int) -> None:
    six(backend)
    refs = listing(backend, **filters)
    assert len(refs) == count
    assert refs == sorted(refs)
    assert len(set(refs)) == count


def test_25_notes_at_limit_10_are_exactly_3_pages(backend: Backend) -> None:
    expected = sorted(put(backend, "k", 1, f"n{i:02d}").ref for i in range(25))
    pages: list[list[str]] = []
    cursor = None
    while True:
        items, cursor = backend.service.list(ACME, NoteFilter(key="k"), 10, cursor)
        pages.append([m.ref for m in items])
        if not cursor:
            break
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [r for p in pages for r in p] == expected


@pytest.mark.parametrize("filters", [{}, {"key": "k"}, {"author": ""}, {"key": "k", "run": 1}])
def test_paging_covers_every_note_once_in_ref_order(backend: Backend, filters: dict[str, Any]) -> None:
    expected = sorted(put(backend, "k", 1, f"n{i}").ref for i in range(7))
    for limit in (1, 2, 3, 7, 8):
        assert listing(backend, limit=limit, **filters) == expected


def test_cursor_is_bound_to_filter_and_authority(backend: Backend) -> None:
    for i in range(3):
        put(backend, "k", 1, f"n{i}")
    _, cursor = backend.service.list(ACME, NoteFilter(key="k"), 1, None)
    assert cursor
    with pytest.raises(InvalidArgument, match="different filter"):
        backend.service.list(ACME, NoteFilter(key="other"), 1, cursor)
    with pytest.raises(InvalidArgument, match="another authority"):
        backend.service.list(GLOBEX, NoteFilter(key="k"), 1, cursor)
    with pytest.raises(InvalidArgument):
        backend.service.list(ACME, NoteFilter(key="k"), 1, cursor[:-3] + "xyz")


def test_delete_removes_exactly_one(backend: Backend) -> None:
    six(backend)
    target = note_ref("harden:widget", 1, "fix_plan", "claude")
    backend.service.delete(ACME, target)
    with pytest.raises(NotFound):
        backend.service.get(ACME, target)
    with pytest.raises(NotFound):
        backend.service.delete(ACME, target)
    assert len(listing(backend)) == 5
    assert backend.service.get(ACME, note_ref("harden:widget", 1, "fix_plan", "")).text == "body"
    assert backend.service.get(ACME, note_ref("harden:widget", 1, "fix_plan", "gemini")).text == "body"
    again = put(backend, "harden:widget", 1, "fix_plan", "claude", "re-put")
    assert backend.service.get(ACME, again.ref).text == "re-put"
    assert len(listing(backend)) == 6


def test_absent_note_is_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.service.get(ACME, note_ref("k", 1, "n", ""))
    with pytest.raises(NotFound):
        backend.service.get(ACME, "not-a-ref")


def test_authority_isolation(backend: Backend) -> None:
    meta = put(backend, "k", 1, "n", text="secret")
    with pytest.raises(NotFound):
        backend.service.get(GLOBEX, meta.ref)
    with pytest.raises(NotFound):
        backend.service.delete(GLOBEX, meta.ref)
    assert listing(backend, who=GLOBEX) == []
    assert listing(backend, who=GLOBEX, key="k") == []
    put(backend, "k", 1, "n", text="globex's own", who=GLOBEX)
    assert backend.service.get(ACME, meta.ref).text == "secret"


def test_large_upload_round_trip(backend: Backend) -> None:
    body = bytes(range(256)) * ((INLINE_LIMIT // 256) + 40)
    digest = hashlib.sha256(body).hexdigest()
    coords = {"key": "k", "run": 1, "name": "big", "author": "claude"}
    upload = backend.service.create_upload(ACME, PutNote(**coords, size=len(body), sha256=digest))
    assert upload.ref == note_ref("k", 1, "big", "claude")
    backend.upload(upload.upload_url, body, upload.upload_headers)
    meta = backend.service.put(ACME, PutNote(**coords, upload=True, sha256=digest))
    assert meta.size == len(body)
    view = backend.service.get(ACME, meta.ref)
    assert view.download_url and view.text is None and view.body_b64 is None
    assert listing(backend) == [meta.ref]


def test_upload_commit_checks_digest_and_size(backend: Backend) -> None:
    body = b"z" * 1000
    coords = {"key": "k", "run": 1, "name": "big"}
    upload = backend.service.create_upload(ACME, PutNote(**coords, size=len(body), sha256="0" * 64))
    backend.upload(upload.upload_url, body, upload.upload_headers)
    with pytest.raises(InvalidArgument, match="does not match"):
        backend.service.put(ACME, PutNote(**coords, upload=True, sha256="0" * 64))
    # A body larger than declared is refused before it is read through; a smaller one by the check.
    with pytest.raises(InvalidArgument, match="larger than the declared size"):
        backend.service.put(ACME, PutNote(**coords, upload=True, sha256=hashlib.sha256(body).hexdigest(), size=999))
    with pytest.raises(InvalidArgument, match="does not match"):
        backend.service.put(ACME, PutNote(**coords, upload=True, sha256=hashlib.sha256(body).hexdigest(), size=1001))
    assert listing(backend) == []
    meta = backend.service.put(ACME, PutNote(**coords, upload=True, sha256=hashlib.sha256(body).hexdigest()))
    assert backend.service.get(ACME, meta.ref).text is None  # octet-stream by default
    assert backend.service.get(ACME, meta.ref).body_b64


def test_an_upload_keeps_the_content_type_it_was_signed_for(backend: Backend) -> None:
    body = b"# plan\n" * 10
    digest = hashlib.sha256(body).hexdigest()
    coords = {"key": "k", "run": 1, "name": "md"}
    upload = backend.service.create_upload(
        ACME, PutNote(**coords, size=len(body), sha256=digest, content_type="text/markdown")
    )
    assert upload.upload_headers["Content-Type"] == "text/markdown"
    backend.upload(upload.upload_url, body, upload.upload_headers)
    meta = backend.service.put(ACME, PutNote(**coords, upload=True, sha256=digest))
    assert meta.content_type == "text/markdown"
    assert backend.service.get(ACME, meta.ref).text == body.decode()


def test_an_agent_bound_token_writes_and_deletes_only_as_its_agent(backend: Backend) -> None:
    claude = Principal("acme", "caller", agent="claude")
    with pytest.raises(Forbidden):
        put(backend, "k", 1, "n", author="codex", who=claude)
    with pytest.raises(Forbidden):
        put(backend, "k", 1, "n", author="", who=claude)  # not even the shared scope
    with pytest.raises(Forbidden):
        backend.service.create_upload(
            claude, PutNote(key="k", run=1, name="n", author="codex", size=1, sha256="0" * 64)
        )
    others = put(backend, "k", 1, "n", author="codex")
    with pytest.raises(Forbidden):
        backend.service.delete(claude, others.ref)
    assert listing(backend) == [others.ref]  # nothing written, nothing deleted
    own = put(backend, "k", 1, "n", author="claude", who=claude)
    backend.service.delete(claude, own.ref)
    assert listing(backend) == [others.ref]


def test_commit_without_upload_is_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound):
        backend.service.put(ACME, PutNote(key="k", run=1, name="never", upload=True, sha256="a" * 64))
