"""The body of a push notification (push/ports.EventBodies): the A2A StreamResponses the task's
stream sends for one event of its log, built by the stream's own code (dovecote/a2a/streaming.py
`event_updates`), each serialized as protobuf JSON (camelCase), compact, UTF-8. Read as the task's
authority (the notification belongs to it).

Round trips per event: the task record (1 read), the event (1 Query), the agent's message that
goes with a waiting or final state (1 read), and on a completion with an artifact, the artifact
(1 read, S3 past 8 KiB): the stream's own reads.
"""

from __future__ import annotations

import json

from dovecote.a2a.mapping import as_json
from dovecote.a2a.service import A2AService
from dovecote.a2a.streaming import event_updates
from dovecote.platform.errors import Unavailable
from dovecote.platform.principal import Principal
from dovecote.push.ports import Built
from dovecote.tasks import machine
from dovecote.tasks.streams import Logged


class A2ABodies:
    def __init__(self, a2a: A2AService) -> None:
        self.a2a = a2a

    def built(self, authority: str, task: str, sequence: int) -> Built:
        principal = Principal(authority, "caller")
        record = self.a2a.record(principal, task)
        # The event as the task stream reads it (dovecote/tasks/streams.py): the store's log, consistent.
        page = self.a2a.tasks.store.events(authority, task, sequence - 1, 1)
        if not page or page[0].sequence != sequence:
            # The stream only names committed events, and the read is consistent: never skip one.
            raise Unavailable("the task event is not readable yet", task_id=task, sequence=sequence)
        item = Logged(page[0])
        updates = event_updates(self.a2a, principal, task, record.context, item)
        bodies = [
            json.dumps(as_json(u.response), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            for u in updates
            if u.response is not None
        ]
        return Built(bodies, machine.is_terminal(item.event.state))
