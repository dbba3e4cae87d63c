"""Notes over HTTP, as the e2e tests drive them."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx


def put_uploaded_note(
    http: httpx.Client, headers: dict[str, str], coords: dict[str, Any], body: bytes
) -> httpx.Response:
    """A note whose body goes through a presigned upload, as a client sends one past the inline limit:
    `POST /v1/notes/uploads`, the PUT straight to S3 with exactly the signed headers, then the commit
    (`PUT /v1/notes` with `upload`). Answers the commit, checked to be a 200."""
    digest = hashlib.sha256(body).hexdigest()
    upload = http.post("/v1/notes/uploads", json={**coords, "size": len(body), "sha256": digest}, headers=headers)
    assert upload.status_code == 200, upload.text
    url, signed = upload.json()["upload_url"], upload.json()["upload_headers"]  # exactly as signed
    assert httpx.put(url, content=body, headers=signed, timeout=60).status_code == 200
    committed = http.put("/v1/notes", json={**coords, "upload": True, "sha256": digest}, headers=headers)
    assert committed.status_code == 200, committed.text
    return committed
