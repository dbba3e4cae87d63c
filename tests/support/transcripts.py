"""Generic-format transcripts for the recall tests (the shape `POST /v1/transcripts` takes)."""

from __future__ import annotations

import uuid
from typing import Any


def transcript(session_id: str, texts: list[str], project: str = "e2e", source: str = "e2e") -> dict[str, Any]:
    """`texts` alternate user and assistant, a minute apart; message uuids follow from the session id."""
    return {
        "source": source,
        "project": project,
        "session_id": session_id,
        "messages": [
            {
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{i}")),
                "role": "user" if i % 2 == 0 else "assistant",
                "text": text,
                "timestamp": f"2025-06-01T00:{i:02d}:00Z",
            }
            for i, text in enumerate(texts)
        ],
    }
