"""The notes context's constants, in one place: every bound its contract states
(docs/reference/limits.md), whoever enforces it. The rules (notes/model.py) enforce them, the edge
models (functions/notes_api/models.py) state them in the OpenAPI document, the SDK and the CLI pick
inline or upload by them. Tuning of one adapter (its retries, its read chunk) stays beside it.
Constants only: importing it costs nothing."""

from __future__ import annotations

# The reference's blob-backed store caps a note at 64 MiB.
MAX_NOTE_BYTES = 64 * 1024 * 1024
# Bodies up to this size travel inline (text / body_b64) and are kept inline in the index item so
# Get is one round trip. Larger bodies use the presigned upload and come back as download_url.
INLINE_LIMIT = 256 * 1024
# DynamoDB items are capped at 400 KB; bounded coordinates keep index items well under it.
MAX_COORDINATE_BYTES = 1024
# The reference's run is a Go int; the API promises what every JSON client can hold exactly (2^53-1,
# JavaScript's Number.MAX_SAFE_INTEGER): a larger run would be rounded by some client on its way back.
MAX_RUN = 2**53 - 1
# A list's page: this many notes unless the caller asks for fewer.
DEFAULT_LIST_LIMIT = 1000
MAX_LIST_LIMIT = 1000
