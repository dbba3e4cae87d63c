"""Tasks: a durable task lifecycle between callers and workers (seeds/agent-tasks.txt, SEMANTICS §2):
idempotent commands, revision CAS, fenced leases."""
