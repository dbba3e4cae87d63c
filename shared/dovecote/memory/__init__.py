"""Memory: a serialized write queue (SQS FIFO) that applies memory writes one at a time per scope,
proposes PENDING relation candidates between a new memory and earlier ones, and records evidence
for every write (docs/design/memory.md)."""
