"""The tasks context's constants, in one place: every bound, pattern, enumeration and default its
contract states (docs/reference/limits.md), whoever enforces it. The rules (tasks/inputs.py) and the
records (tasks/model.py) enforce them, the edge models (tasks/bodies.py) state them in the OpenAPI
document, the adapters size their pages by them. Tuning of one algorithm (how many claim candidates,
how often a stream polls) stays beside that algorithm. Constants only: importing it costs nothing.
"""

from __future__ import annotations

# ---- messages ----------------------------------------------------------------------------------------

MAX_PARTS = 32
MAX_MESSAGE_BYTES = 2 * 1024 * 1024
# A message's metadata: a JSON object the service stores and returns but never reads (a protocol
# binding keeps its own message fields there, e.g. A2A's messageId), at most this many bytes as
# canonical JSON, so a message item stays far below DynamoDB's 400 KB.
MAX_METADATA_BYTES = 16 * 1024
# A part's filename (characters) and a URL part's URL (characters).
MAX_FILENAME_CHARS = 255
MAX_URL_CHARS = 2048
PART_FORMS = ("text", "data_b64", "data", "url")
DATA_MEDIA_TYPE = "application/json"  # a `data` part's media type unless it names one
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

# ---- counters, leases, claims -----------------------------------------------------------------------------

MAX_COUNTER = 2**63 - 1
MAX_FENCE = 2**63 - 1
# A lease that stays silent (no heartbeat, no worker command) this long is fenced by the dispatcher.
# 0 means never: the reference's explicit fencing only.
MAX_LEASE_TIMEOUT = 86_400
DEFAULT_LEASE_TIMEOUT = 300
# A grant not accepted this long after it was made is fenced by the dispatcher, so a worker that
# dies between its claim and its accept strands the task for seconds, not a lease timeout. 0 means
# never. An hour at most: a grant nobody takes up for longer is a stranded task, not a slow worker.
MAX_ACCEPT_TIMEOUT = 3_600
DEFAULT_ACCEPT_TIMEOUT = 30
# The lease-expiry index is spread over this many partitions, so heartbeats from many workers do
# not all write one GSI partition; the dispatcher queries each (a constant number per run).
EXPIRY_SHARDS = 8
# Long-poll claim: at most this long.
MAX_CLAIM_WAIT = 20
WORKER_EVENT_KINDS = ("accept_task", "reject_task", "request_input", "fail_task", "freeze_artifact", "complete_task")

# ---- reads ------------------------------------------------------------------------------------------------

DEFAULT_PAGE = 100
MAX_PAGE = 100
# `total_size` counts at most this many tasks: a list request never reads more than it returns plus
# this constant. Past it, the count is reported as a lower bound.
TOTAL_SIZE_CAP = 1000
# A page of messages stops before its parts pass this many bytes (inline parts; remote ones are URLs),
# so a page stays far below the 6 MB Lambda response limit whatever `limit` asks for.
MESSAGE_PAGE_BYTES = 4 * 1024 * 1024
# A stream ends itself before the cloud front's 15 minutes, with a margin (tasks/streams.py).
DEFAULT_STREAM_SECONDS = 840.0

# ---- artifacts, workspace heads, apply receipts -----------------------------------------------------------

ARTIFACT_DEFAULT_MAX = 16 * 1024 * 1024
ARTIFACT_HARD_MAX = 64 * 1024 * 1024
# GET artifact answers a payload up to this size inline (read back and checked against its digest);
# a larger one comes as a presigned download_url.
ARTIFACT_INLINE_ANSWER = 4 * 1024 * 1024
ARTIFACT_STATES = ("frozen", "published", "discarded")
MAX_REVISION_BYTES = 512
REVISION_CHARS = r"[^\x00-\x1f\x7f]+"  # a workspace revision: no control characters
MAX_RECEIPT_CODE_BYTES = 128
MAX_RECEIPT_MESSAGE_BYTES = 4096
# Why a worker failed a task (fail_task's optional `reason`, kept on its task_failed event).
MAX_FAIL_REASON_BYTES = 2048
DECISIONS = ("success", "conflict", "rejected", "indeterminate")
SHA256_HEX = r"(sha256:)?[0-9a-f]{64}"  # an upload's SHA-256, with or without its prefix
DIGEST = r"sha256:[0-9a-f]{64}"  # an artifact digest
