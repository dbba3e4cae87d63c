"""Notes tools: put, get, list, delete (docs/services/notes.md). A note is addressed by its coordinates
(key, run, name, author) or by its ref, the SHA-256 the SDK computes from them; each tool is one
request."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from dovecote.client import DovecoteClient, note_ref
from dovecote.mcp.annotations import tool
from dovecote.mcp.errors import invalid
from dovecote.mcp.fields import Author, Cursor, Key, Limit, Name, Ref, Run, Text


def resolve_ref(ref: str | None, key: str | None, run: int | None, name: str | None, author: str) -> str:
    """The ref given, or the one the coordinates name; both or neither is a usage mistake."""
    coordinates = (key, run, name)
    if ref:
        if any(c is not None for c in coordinates):
            raise invalid("give either ref or key+run+name, not both", field="ref")
        return ref
    if any(c is None for c in coordinates):
        missing = [n for n, c in zip(("key", "run", "name"), coordinates, strict=True) if c is None]
        raise invalid(f"give ref, or key, run and name (missing: {', '.join(missing)})", missing=missing)
    return note_ref(str(key), int(run or 0), str(name), author)


def register(server: MCPServer, client: DovecoteClient) -> None:
    @tool(server, "notes_put")
    def notes_put(
        key: Key,
        run: Run,
        name: Name,
        text: Text,
        author: Author = "",
        content_type: Annotated[
            str | None, Field(description="The body's media type (default: text/plain; charset=utf-8).")
        ] = None,
    ) -> dict[str, Any]:
        """Store (or overwrite) a text note at key/run/name for the author ('' = shared). Answers its
        metadata with the `ref` to read it back. Putting the same coordinates again replaces the body."""
        return client.put_note(key, run, name, text, author=author, content_type=content_type)

    @tool(server, "notes_get")
    def notes_get(
        ref: Ref = None, key: Key | None = None, run: Run | None = None, name: Name | None = None, author: Author = ""
    ) -> dict[str, Any]:
        """Read one note by ref or by key+run+name(+author): its metadata and `text` (or `body_b64`
        for binary bodies, or a `download_url` above 256 KiB). A missing note is the error not_found."""
        return client.get_note_meta(resolve_ref(ref, key, run, name, author))

    @tool(server, "notes_list")
    def notes_list(
        key: Key = "",
        run: Run | None = None,
        name: Name = "",
        author: Author | None = None,
        limit: Limit = None,
        cursor: Cursor = None,
    ) -> dict[str, Any]:
        """List notes' metadata (no bodies) in ref order, filtered by key, run, name and author
        (author absent: any author; '': the shared scope). One page: pass the returned `cursor`
        back for the next one; no cursor means the list is done."""
        return client.list_notes(key=key, run=run, name=name, author=author, limit=limit, cursor=cursor)

    @tool(server, "notes_delete")
    def notes_delete(
        ref: Ref = None, key: Key | None = None, run: Run | None = None, name: Name | None = None, author: Author = ""
    ) -> dict[str, Any]:
        """Delete one note by ref or by key+run+name(+author). A missing note is the error not_found."""
        target = resolve_ref(ref, key, run, name, author)
        client.delete_note(target)
        return {"ref": target, "deleted": True}
