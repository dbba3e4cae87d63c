"""Push notifications (docs/guides/webhooks.md): webhook configs per task, and the durable, ordered,
signed delivery of every event a task's A2A stream carries. model → service → ports → adapters."""
