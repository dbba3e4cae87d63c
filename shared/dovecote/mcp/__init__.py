"""`dovecote mcp`: a Model Context Protocol server over the Python SDK (the official `mcp` package's
`MCPServer`), so an agent's model reaches notes, tasks, recall and memory as tools.

Layout: `server.py` builds the server from one `DovecoteClient` (and decides whether the worker
tools exist by asking the API what the token may do); `notes.py`, `tasks.py`, `recall.py` and
`memory.py` register each service's tools, each with the hints `annotations.py` decides for it
(read-only, destructive, idempotent); `resources.py` the two resource templates; `errors.py` turns
every failure into a tool error whose text is the API's error envelope as JSON.

Round trips: a tool is one SDK call (one HTTP request, plus the SDK's retries of the same command);
a note's get is one request (inline bodies travel in the answer). The server holds no state of its
own: ids a model leaves out are generated and returned, so it can replay a command by passing the
same `command_id` again (the API answers a replay with the original result).

Client-side only: excluded from the Lambda layer (infra/build.py LAYER_EXCLUDES)."""
