"""Following the API's two kinds of list (docs/design/paging.md): keyset lists (`{items, cursor}`, done
when the cursor is absent or empty) and sequence streams (`{items, next, has_more}`). One definition
for the SDK's `iter_*` methods and the CLI's `--all`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

Page = dict[str, Any]


def keyset_pages(fetch: Callable[[str | None], Page], cursor: str | None = None) -> Iterator[Page]:
    """Every page from `cursor` on: `fetch(cursor)` is one request."""
    while True:
        page = fetch(cursor)
        yield page
        cursor = page.get("cursor")
        if not cursor:
            return


def stream_pages(fetch: Callable[[int], Page], after: int = 0) -> Iterator[Page]:
    """Every page after sequence `after`: `fetch(after)` is one request."""
    while True:
        page = fetch(after)
        yield page
        if not page.get("has_more") or not page["items"]:
            return
        after = int(page.get("next") or after)


def keyset_items(fetch: Callable[[str | None], Page]) -> Iterator[Any]:
    for page in keyset_pages(fetch):
        yield from page["items"]


def stream_items(fetch: Callable[[int], Page], after: int = 0) -> Iterator[Any]:
    for page in stream_pages(fetch, after):
        yield from page["items"]


def query(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones (None, '', 0 limits)."""
    return {name: value for name, value in values.items() if value not in (None, "")}


__all__ = ["keyset_items", "keyset_pages", "query", "stream_items", "stream_pages"]
