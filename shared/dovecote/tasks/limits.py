"""The task commands' patterns and enumerations, written once: the gates (dovecote.tasks.commands)
compile and enforce them, and the edge's pydantic models (functions/tasks_api/models.py) state them in
the OpenAPI document. A module of constants, so the edge can describe the rules without importing
the commands' dataclasses, which a cold start whose first request is a read never needs."""

from __future__ import annotations

# Long-poll claim: at most this long.
MAX_CLAIM_WAIT = 20
# Written once, for the gates and (anchored) for the OpenAPI document.
SHA256_HEX = r"(sha256:)?[0-9a-f]{64}"  # an upload's SHA-256, with or without its prefix
DIGEST = r"sha256:[0-9a-f]{64}"  # an artifact digest
REVISION_CHARS = r"[^\x00-\x1f\x7f]+"  # a workspace revision: no control characters
# A part's filename: no control characters (C0, DEL, C1) and no path separator; "." and ".." are
# refused beside it (NOT_FILENAMES), so a filename is never a path.
FILENAME_CHARS = r"[^\x00-\x1f\x7f-\x9f/\\]+"
NOT_FILENAMES = (".", "..")
# A URL part's URL: http or https (any case; never javascript:, file:, data: or another scheme a
# reader could be made to open), then no whitespace (str.isspace) and no control characters. It also
# names its host (`HOST_MISSING` is what it must not look like, anchored at the start): written
# without lookahead, so the OpenAPI document can state it as `not`.
URL_CHARS = r"[Hh][Tt][Tt][Pp][Ss]?:[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
HOST_MISSING = r"[Hh][Tt][Tt][Pp][Ss]?:([^/]|/[^/]|//[/?#]|/?/?$)"

WORKER_EVENT_KINDS = ("accept_task", "reject_task", "request_input", "fail_task", "freeze_artifact", "complete_task")
PART_FORMS = ("text", "data_b64", "data", "url")
