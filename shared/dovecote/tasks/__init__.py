"""Tasks: a durable task lifecycle between callers and workers (docs/design/tasks.md):
idempotent commands, revision CAS, fenced leases."""
