"""The Python SDK (httpx). It computes a note's Ref on the client side, so an agent can address a
note from its coordinates without a lookup, and it moves large bodies through presigned URLs."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from dovecote.client.recall import RecallMixin
from dovecote.notes.model import INLINE_LIMIT, note_ref

__all__ = ["DovecoteClient", "DovecoteError", "Note", "note_ref"]

DEV_TOKENS_FILE = Path(".dovecote/dev-tokens.json")


class DovecoteError(Exception):
    """A non-2xx answer, with the stable code and facts of the error envelope."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}


@dataclass(frozen=True)
class Note:
    ref: str
    key: str
    run: int
    name: str
    author: str
    size: int
    sha256: str
    content_type: str
    updated_at: str
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8")


class DovecoteClient(RecallMixin):
    def __init__(self, endpoint: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._token = token or ""
        self.endpoint = endpoint.rstrip("/")
        self._http = httpx.Client(base_url=self.endpoint, headers=headers, timeout=timeout)

    @classmethod
    def from_env(cls, role: str = "caller", tokens_file: Path = DEV_TOKENS_FILE) -> DovecoteClient:
        """DOVECOTE_ENDPOINT / DOVECOTE_TOKEN, else the dev tokens file that `dovecote dev` writes."""
        endpoint = os.environ.get("DOVECOTE_ENDPOINT")
        token = os.environ.get("DOVECOTE_TOKEN")
        if (not endpoint or not token) and tokens_file.exists():
            dev = json.loads(tokens_file.read_text())
            endpoint = endpoint or dev["endpoint"]
            token = token or dev["tokens"].get(role)
        if not endpoint:
            raise DovecoteError(0, "configuration", "set DOVECOTE_ENDPOINT and DOVECOTE_TOKEN, or run `make dev`")
        return cls(endpoint, token)

    def close(self) -> None:
        self._http.close()

    def derived_id(self, prefix: str, *parts: object) -> str:
        """A command (or message, submission) id that is the same every time for the same parts,
        across restarts, yet unguessable without this client's token. Command ids share one
        namespace per authority, so guessable ids (`echo.t1.1.accept`) would let anyone in the
        authority take a worker's id first and block its command."""
        import hmac

        material = "\x1f".join(str(p) for p in parts).encode("utf-8")
        digest = hmac.new(self._token.encode("utf-8"), material, hashlib.sha256).hexdigest()[:32]
        return f"{prefix}-{digest}"

    def __enter__(self) -> DovecoteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport ----------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                error = response.json().get("error") or {}
            except ValueError:
                error = {}
            if not error:  # the gateway's own answers (401/403/413) carry only {"message"}
                message = response.text
                try:
                    message = response.json().get("message", message)
                except ValueError:
                    pass
                code = {401: "unauthenticated", 403: "forbidden", 413: "payload_too_large"}.get(
                    response.status_code, "http_error"
                )
                raise DovecoteError(response.status_code, code, message)
            raise DovecoteError(
                response.status_code, error.get("code", ""), error.get("message", ""), error.get("details")
            )
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # ---- meta ---------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/health"))

    def create_token(
        self,
        authority: str,
        role: str,
        worker: str | None = None,
        *,
        agent: str | None = None,
        expires_in_days: int | None = None,
    ) -> dict[str, Any]:
        """Mint a token (admin). The answer holds the token once; only its hash is stored."""
        body: dict[str, Any] = {"authority": authority, "role": role}
        for name, value in (("worker", worker), ("agent", agent), ("expires_in_days", expires_in_days)):
            if value is not None:
                body[name] = value
        return dict(self.request("POST", "/v1/admin/tokens", json=body))

    def list_tokens(self, limit: int | None = None, cursor: str | None = None) -> dict[str, Any]:
        """One page of the authority's tokens, newest first (admin): ids and claims, never secrets."""
        params = {k: v for k, v in (("limit", limit), ("cursor", cursor)) if v}
        return dict(self.request("GET", "/v1/admin/tokens", params=params))

    def revoke_token(self, token_id: str) -> None:
        """Revoke a token of the authority (admin). Effective once the authorizer cache expires."""
        self.request("DELETE", f"/v1/admin/tokens/{token_id}")

    # ---- notes --------------------------------------------------------------------------------

    @staticmethod
    def note_ref(key: str, run: int, name: str, author: str = "") -> str:
        return note_ref(key, run, name, author)

    def put_note(
        self,
        key: str,
        run: int,
        name: str,
        body: bytes | str = b"",
        *,
        author: str = "",
        content_type: str | None = None,
    ) -> dict[str, Any]:
        """Store a note. Bodies over the inline limit go through a presigned upload and a commit."""
        coordinates: dict[str, Any] = {"key": key, "run": run, "name": name, "author": author}
        if content_type:
            coordinates["content_type"] = content_type
        data = body.encode("utf-8") if isinstance(body, str) else body
        if len(data) > INLINE_LIMIT:
            digest = hashlib.sha256(data).hexdigest()
            upload = self.request(
                "POST", "/v1/notes/uploads", json={**coordinates, "size": len(data), "sha256": digest}
            )
            put = httpx.put(upload["upload_url"], content=data, timeout=300)
            put.raise_for_status()
            return dict(
                self.request(
                    "PUT", "/v1/notes", json={**coordinates, "upload": True, "sha256": digest, "size": len(data)}
                )
            )
        if isinstance(body, str):
            return dict(self.request("PUT", "/v1/notes", json={**coordinates, "text": body}))
        return dict(self.request("PUT", "/v1/notes", json={**coordinates, "body_b64": base64.b64encode(data).decode()}))

    def get_note(self, ref: str) -> Note:
        raw = self.request("GET", f"/v1/notes/{ref}")
        if raw.get("download_url"):
            response = httpx.get(raw["download_url"], timeout=300)
            response.raise_for_status()
            body = response.content
        elif raw.get("body_b64") is not None:
            body = base64.b64decode(raw["body_b64"])
        else:
            body = (raw.get("text") or "").encode("utf-8")
        fields = {
            k: raw[k] for k in ("ref", "key", "run", "name", "author", "size", "sha256", "content_type", "updated_at")
        }
        return Note(**fields, body=body)

    def get_note_at(self, key: str, run: int, name: str, author: str = "") -> Note:
        return self.get_note(note_ref(key, run, name, author))

    def list_notes(
        self,
        *,
        key: str = "",
        run: int | None = None,
        name: str = "",
        author: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {}
        for field, value in (("key", key), ("name", name)):
            if value:
                params[field] = value
        if run is not None:
            params["run"] = run
        if author is not None:
            params["author"] = author  # "" selects the shared scope
        if limit:
            params["limit"] = limit
        if cursor:
            params["cursor"] = cursor
        return dict(self.request("GET", "/v1/notes", params=params))

    def iter_notes(self, **filters: Any) -> Iterator[dict[str, Any]]:
        cursor = None
        while True:
            page = self.list_notes(**filters, cursor=cursor)
            yield from page["items"]
            cursor = page.get("cursor")
            if not cursor:
                return

    def delete_note(self, ref: str) -> None:
        self.request("DELETE", f"/v1/notes/{ref}")

    # ---- tasks (caller) -----------------------------------------------------------------------
    # Every command takes a command_id: reuse it to retry safely (an exact retry returns the
    # original result); a fresh one is generated when none is given.

    @staticmethod
    def text_message(text: str, message_id: str | None = None) -> dict[str, Any]:
        return {"id": message_id or new_id("m"), "parts": [{"media_type": "text/plain", "text": text}]}

    def create_task(
        self,
        task_id: str,
        message: dict[str, Any] | str,
        *,
        workspace: str = "default",
        context: str = "default",
        command_id: str | None = None,
    ) -> dict[str, Any]:
        body = {
            "command_id": command_id or new_id("c"),
            "workspace": workspace,
            "id": task_id,
            "context": context,
            "message": self.text_message(message) if isinstance(message, str) else message,
        }
        return dict(self.request("POST", "/v1/tasks", json=body)["task"])

    def get_task(self, task_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"/v1/tasks/{task_id}")["task"])

    def list_tasks(self, **params: Any) -> dict[str, Any]:
        return dict(self.request("GET", "/v1/tasks", params={k: v for k, v in params.items() if v not in (None, "")}))

    def reply(
        self, task_id: str, expected_revision: int, message: dict[str, Any] | str, command_id: str | None = None
    ) -> dict[str, Any]:
        body = {
            "command_id": command_id or new_id("c"),
            "expected_revision": expected_revision,
            "message": self.text_message(message) if isinstance(message, str) else message,
        }
        return dict(self.request("POST", f"/v1/tasks/{task_id}/reply", json=body)["task"])

    def cancel(self, task_id: str, expected_revision: int, command_id: str | None = None) -> dict[str, Any]:
        body = {"command_id": command_id or new_id("c"), "expected_revision": expected_revision}
        return dict(self.request("POST", f"/v1/tasks/{task_id}/cancel", json=body)["task"])

    def messages(self, task_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        params = {"after": after, **({"limit": limit} if limit else {})}
        return dict(self.request("GET", f"/v1/tasks/{task_id}/messages", params=params))

    def events(self, task_id: str, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        params = {"after": after, **({"limit": limit} if limit else {})}
        return dict(self.request("GET", f"/v1/tasks/{task_id}/events", params=params))

    # ---- tasks (worker) -----------------------------------------------------------------------

    def claim(self, command_id: str | None = None) -> dict[str, Any] | None:
        """The oldest claimable task's assignment, or None when nothing is claimable."""
        try:
            answer = self.request("POST", "/v1/leases/claim", json={"command_id": command_id or new_id("c")})
        except DovecoteError as exc:
            if exc.status == 404:
                return None
            raise
        return dict(answer["assignment"])

    def leases(self) -> list[dict[str, Any]]:
        """Every current lease of this worker (the restart-recovery scan), all pages."""
        items: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = self.request("GET", "/v1/leases", params={"cursor": cursor} if cursor else {})
            items += page["items"]
            cursor = page.get("cursor")
            if not cursor:
                return items

    def worker_command(
        self, kind: str, task_id: str, expected_revision: int, fence: int, command_id: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """accept, reject, fail, request-input (message=…) or complete (message=…, submission_id=…)."""
        body = {"command_id": command_id or new_id("c"), "expected_revision": expected_revision, "fence": fence}
        for name, value in extra.items():
            body[name] = self.text_message(value) if name == "message" and isinstance(value, str) else value
        return dict(self.request("POST", f"/v1/tasks/{task_id}/{kind}", json=body)["task"])


def new_id(prefix: str) -> str:
    import uuid

    return f"{prefix}-{uuid.uuid4().hex}"
