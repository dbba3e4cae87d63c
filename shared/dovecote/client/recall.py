"""SDK methods for recall (docs/services/recall.md), as a mixin over the client's transport.

`DovecoteClient` gains them by inheriting `RecallMixin`. Refs and sessions go into URL paths with
their level separator as `~` (the API accepts both spellings; a `/` would end the path segment), then
as one encoded segment like every id (`dovecote.client.paths`).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from dovecote.client.paths import path

if TYPE_CHECKING:
    import httpx

    from dovecote.client.notes import Progress

# POST /v1/transcripts/check takes at most this many digests per request.
CHECK_BATCH = 1000
# POST /v1/transcripts carries the file inline up to here (API Gateway's payload limit is 6 MB and
# JSON escaping grows the text); a larger file goes through a presigned upload.
INLINE_TRANSCRIPT_BYTES = 4 * 1024 * 1024


def _level_part(value: str) -> str:
    """A ref or session with its level separator spelled `~`, so it stays one path segment."""
    return value.replace("/", "~")


def _params(**values: Any) -> dict[str, Any]:
    """Query parameters without the unset ones; booleans as the API spells them."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is None or value == "" or value is False:
            continue
        out[name] = "true" if value is True else value
    return out


class RecallMixin:
    if TYPE_CHECKING:  # provided by DovecoteClient; not defined here, so it cannot shadow it

        def request(self, method: str, path: str, **kwargs: Any) -> Any: ...
        def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...
        def _put_blob(
            self, url: str, headers: dict[str, str], stream: IO[bytes], size: int, progress: Progress | None
        ) -> None: ...

    # ---- ingest -------------------------------------------------------------------------------------

    def ingest_transcript(
        self, jsonl: str, format: str, *, project: str | None = None, project_folder: str | None = None
    ) -> dict[str, Any]:
        """Index one JSONL transcript file (claude-code-jsonl | codex-jsonl) inline."""
        body = {"format": format, "jsonl": jsonl, "project": project, "project_folder": project_folder}
        return dict(self.request("POST", "/v1/transcripts", json={k: v for k, v in body.items() if v is not None}))

    def ingest_messages(
        self, session_id: str, messages: list[dict[str, Any]], *, source: str, project: str = ""
    ) -> dict[str, Any]:
        """Index a session in the generic form: messages [{uuid, role, text, timestamp, kind?, …}]."""
        body = {"source": source, "project": project, "session_id": session_id, "messages": messages}
        return dict(self.request("POST", "/v1/transcripts", json=body))

    def upload_transcript(
        self, data: bytes, format: str, *, project: str | None = None, project_folder: str | None = None
    ) -> dict[str, Any]:
        """A presigned upload for a file of any size; the service indexes it asynchronously (searches
        report its scope stale until then). Returns {upload_id, upload_url, expires_at}. The PUT goes
        through the SDK's blob transport: retried on a cut connection or a 5xx, and a server that
        stays unreachable is a `DovecoteError` code `unavailable`, never a raw httpx error."""
        body = {"format": format, "project": project, "project_folder": project_folder}
        created = dict(
            self.request("POST", "/v1/transcripts/uploads", json={k: v for k, v in body.items() if v is not None})
        )
        self._put_blob(created["upload_url"], created.get("upload_headers") or {}, io.BytesIO(data), len(data), None)
        return created

    def check_transcripts(self, sha256: list[str]) -> list[str]:
        """`POST /v1/transcripts/check`: of these SHA-256 digests (hex) of transcript files, the ones
        this authority has not ingested (in batches of 1,000). A reset server or another authority's
        token lacks them all, so `recall push` sends them again."""
        unknown: list[str] = []
        for start in range(0, len(sha256), CHECK_BATCH):
            batch = sha256[start : start + CHECK_BATCH]
            unknown += self.request("POST", "/v1/transcripts/check", json={"sha256": batch})["unknown"]
        return unknown

    def push_transcript(
        self,
        path: Path,
        format: str,
        *,
        project: str | None = None,
        project_folder: str | None = None,
        data: bytes | None = None,
    ) -> dict[str, Any]:
        """Inline when small enough, else through a presigned upload (then `queued` is true). `data`
        is the file's bytes when the caller already read them (and hashed exactly those)."""
        data = path.read_bytes() if data is None else data
        if len(data) <= INLINE_TRANSCRIPT_BYTES:
            return self.ingest_transcript(
                data.decode("utf-8", "replace"), format, project=project, project_folder=project_folder
            )
        created = self.upload_transcript(data, format, project=project, project_folder=project_folder)
        return {"queued": True, "upload_id": created["upload_id"], "messages_indexed": 0}

    # ---- the verbs ----------------------------------------------------------------------------------

    def recall_search(self, q: str, **options: Any) -> dict[str, Any]:
        """The SearchEnvelope. Options: limit, role, sort, since, before, min_messages, project,
        source, include_path, exclude_path, current_session, include_tools, include_subagents, ranker,
        semantic. sort is relevance (absent), newest or oldest; semantic is on or off (absent: the
        deployment's default), and the envelope's vector_coverage says whether the tier ran."""
        return dict(self.request("GET", "/v1/recall/search", params=_params(q=q, **options)))

    def recall_search_oneline(self, q: str, **options: Any) -> str:
        """`<read_ref>\\t<ISO>\\t<project>\\t<snippet>` per hit, as the service renders it."""
        # `send` retries and maps failures like every other call (an error answer is JSON even here).
        return self.send("GET", "/v1/recall/search", params=_params(q=q, format="oneline", **options)).text

    def recall_read(self, ref: str, **options: Any) -> dict[str, Any]:
        """A bounded excerpt. Options: budget, more, around, window, include_tools, include_thinking."""
        return dict(self.request("GET", path("recall", "read", _level_part(ref)), params=_params(**options)))

    def recall_outline(self, session: str, **options: Any) -> dict[str, Any]:
        """Options: include_tools, include_thinking, include_subagents (default false)."""
        if options.get("include_subagents") is False:
            options["include_subagents"] = "false"
        return dict(self.request("GET", path("recall", "outline", _level_part(session)), params=_params(**options)))

    def recall_topics(self, q: str = "", *, limit: int | None = None, project: str = "") -> dict[str, Any]:
        return dict(self.request("GET", "/v1/recall/topics", params=_params(q=q, limit=limit, project=project)))

    def recall_label(self, ref: str, label: str) -> dict[str, Any]:
        """Label the segment that starts at `ref`."""
        return dict(self.request("POST", "/v1/recall/topics", json={"ref": ref, "label": label}))

    def recall_rebuild(self) -> dict[str, Any]:
        """Admin: re-create the authority's index from its archived transcripts."""
        return dict(self.request("POST", "/v1/recall/rebuild"))
