"""The A2A 1.0 binding: A2A's wire (a2a-sdk's types) mapped onto the task service's commands and reads.

- errors.py   the spec's error types, Dovecote's errors mapped onto them, JSON-RPC and AIP-193 forms
- mapping.py  A2A objects ↔ Dovecote tasks, messages and artifacts (pure)
- service.py  SendMessage (blocking or not), GetTask, ListTasks, CancelTask over TaskService
- bindings.py JSON-RPC 2.0 and HTTP+JSON requests parsed, answered and serialized
- card.py     the public Agent Card
"""
