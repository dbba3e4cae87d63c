"""The sender's rules over the in-memory ports (dovecote/push/sender.py): headers and signature,
order and catch-up from the log, the verdicts (2xx, retry with backoff and Retry-After, dead at
once), the attempt bound, the config's cursor, expiry and failure record, and the SSRF check at
send time against the address actually dialled."""

from __future__ import annotations

import base64
import random
from dataclasses import dataclass, field

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from dovecote.platform.principal import Principal
from dovecote.push.addresses import Target
from dovecote.push.keys import KeyRing, new_ring, rotate
from dovecote.push.memory import MemoryConfigStore, MemoryQueue, MemoryTasks
from dovecote.push.model import (
    DEAD_LETTER_KEEP_SECONDS,
    GRACE_SECONDS,
    MAX_ATTEMPTS,
    Notice,
    gate_config,
    notification_id,
    retry_delay,
    retry_window,
)
from dovecote.push.ports import Answer, Built, TaskFacts
from dovecote.push.sender import Fanout, RetryLater, Sender
from dovecote.push.service import PushService
from tests.unit.test_push_addresses import Answers

NOW = 1_900_000_000.0
CALLER = Principal("acme", "caller")


@dataclass
class Log:
    """A task's log as the A2A stream would notify it: event n → its bodies."""

    events: dict[int, list[bytes]] = field(default_factory=dict)
    terminal: set[int] = field(default_factory=set)

    def built(self, authority: str, task: str, sequence: int) -> Built:
        return Built(self.events[sequence], sequence in self.terminal)


@dataclass
class Receiver:
    """A Poster that answers from a script, and keeps what it was sent."""

    script: list[Answer] = field(default_factory=list)
    got: list[tuple[Target, str, bytes, dict[str, str]]] = field(default_factory=list)

    def post(self, target: Target, address: str, body: bytes, headers: dict[str, str]) -> Answer:
        self.got.append((target, address, body, headers))
        return self.script.pop(0) if self.script else Answer(200)


class Ring:
    def __init__(self, ring: KeyRing) -> None:
        self.value = ring

    def ring(self) -> KeyRing:
        return self.value


def world(**answers: list[str]) -> tuple[Sender, MemoryConfigStore, MemoryQueue, Log, Receiver, Ring]:
    store = MemoryConfigStore(clock=lambda: NOW)
    queue = MemoryQueue()
    log = Log()
    receiver = Receiver()
    ring = Ring(new_ring(NOW))
    resolver = Answers({"hooks.example.com": ["93.184.215.14"], **answers})
    sender = Sender(store, queue, log, ring, receiver, resolver=resolver, now=lambda: NOW, rng=random.Random(7))
    return sender, store, queue, log, receiver, ring


def config(store: MemoryConfigStore, delivered: int = 0, **given: object) -> None:
    tasks = MemoryTasks()
    tasks.tasks[("acme", "t1")] = TaskFacts("working", delivered, False)
    resolver = Answers({"hooks.example.com": ["93.184.215.14"]})
    raw = {"id": "w1", "url": "https://hooks.example.com/in", **given}
    PushService(store, tasks, resolver=resolver, now=lambda: NOW).create(CALLER, "t1", gate_config(raw))


def verify(ring: KeyRing, headers: dict[str, str], body: bytes) -> bool:
    """A receiver's plain Ed25519 check of every v1a signature against the JWKS's keys."""
    message = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    for jwk in ring.jwks(NOW)["keys"]:
        key = Ed25519PublicKey.from_public_bytes(base64.urlsafe_b64decode(jwk["x"] + "=="))
        for signature in headers["webhook-signature"].split(" "):
            version, value = signature.split(",", 1)
            assert version == "v1a"
            try:
                key.verify(base64.b64decode(value), message)
                return True
            except Exception:  # noqa: BLE001 - another key's signature
                continue
    return False


def test_a_notification_carries_its_credentials_and_a_signature_that_verifies() -> None:
    sender, store, _, log, receiver, ring = world()
    config(store, token="tok-1", authentication={"scheme": "Bearer", "credentials": "s3cret"})
    log.events[1] = [b'{"statusUpdate":{}}']
    assert sender.deliver(Notice("acme", "t1", "w1", 1)) == "delivered"
    ((target, address, body, headers),) = receiver.got
    assert address == "93.184.215.14" and target.host == "hooks.example.com"
    assert headers["Authorization"] == "Bearer s3cret"
    assert headers["X-A2A-Notification-Token"] == "tok-1"
    assert headers["Content-Type"] == "application/a2a+json"
    assert headers["webhook-id"] == notification_id("acme", "t1", "w1", 1, 0)
    assert headers["webhook-timestamp"] == str(int(NOW))
    assert verify(ring.value, headers, body)
    assert not verify(ring.value, headers, body + b" ")  # a byte changed: no longer verifies
    assert store.get("acme", "t1", "w1").delivered == 1  # type: ignore[union-attr]
    assert store.published_keys() == ring.value.jwks(NOW)  # published before the first signature


def test_a_rotation_signs_with_both_keys_during_the_overlap() -> None:
    sender, store, _, log, receiver, ring = world()
    config(store)
    old = ring.value
    ring.value = rotate(old, NOW, overlap=3600)
    log.events[1] = [b"{}"]
    sender.deliver(Notice("acme", "t1", "w1", 1))
    headers, body = receiver.got[0][3], receiver.got[0][2]
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert verify(old, headers, body)  # a receiver still holding only the old key verifies it
    assert {k["kid"] for k in store.published_keys()["keys"]} == {k.kid for k in ring.value.keys}  # type: ignore[index]
    after = rotate(ring.value, NOW + 7200, overlap=3600)  # past the overlap the old key is gone
    assert old.keys[0].kid not in {k["kid"] for k in after.jwks(NOW + 7200)["keys"]}


def test_503_twice_keeps_the_same_webhook_id_until_200() -> None:
    sender, store, queue, log, receiver, _ = world()
    config(store)
    log.events[1] = [b"{}"]
    receiver.script = [Answer(503), Answer(503, retry_after=120)]
    with pytest.raises(RetryLater) as first:
        sender.deliver(Notice("acme", "t1", "w1", 1), receive_count=1, handle="h1")
    with pytest.raises(RetryLater) as second:
        sender.deliver(Notice("acme", "t1", "w1", 1), receive_count=2, handle="h1")
    assert sender.deliver(Notice("acme", "t1", "w1", 1), receive_count=3, handle="h1") == "delivered"
    ids = {got[3]["webhook-id"] for got in receiver.got}
    assert len(receiver.got) == 3 and len(ids) == 1
    assert 2 <= first.value.seconds <= 5  # attempt 1: between half and all of the 5 s base
    assert second.value.seconds == 120  # Retry-After honoured (longer than the backoff)
    assert queue.retries == [("h1", first.value.seconds), ("h1", 120)]
    found = store.get("acme", "t1", "w1")
    assert found is not None and found.delivered == 1 and found.last_failure["status"] == 503  # type: ignore[index]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 301, 302])
def test_another_answer_goes_to_the_dead_letter_queue_at_once_recorded(status: int) -> None:
    sender, store, queue, log, receiver, _ = world()
    config(store)
    log.events[1] = [b"{}"]
    log.events[2] = [b"{}"]
    receiver.script = [Answer(status)]
    assert sender.deliver(Notice("acme", "t1", "w1", 2), receive_count=1, handle="h") == "dead"
    assert queue.buried == [Notice("acme", "t1", "w1", 1)] and not queue.retries
    found = store.get("acme", "t1", "w1")
    assert found is not None
    assert found.delivered == 2  # the next event went on after it
    assert found.last_failure["status"] == status and found.last_failure["dead_lettered"]  # type: ignore[index]
    assert found.expires_at == int(NOW) + DEAD_LETTER_KEEP_SECONDS  # kept for a redrive


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504, 0])
def test_retryable_answers_are_retried_until_the_last_attempt(status: int) -> None:
    sender, store, queue, log, receiver, _ = world()
    config(store)
    log.events[1] = [b"{}"]
    receiver.script = [Answer(status)] * MAX_ATTEMPTS
    for attempt in range(1, MAX_ATTEMPTS):
        with pytest.raises(RetryLater):
            sender.deliver(Notice("acme", "t1", "w1", 1), receive_count=attempt, handle="h")
    assert sender.deliver(Notice("acme", "t1", "w1", 1), receive_count=MAX_ATTEMPTS, handle="h") == "dead"
    assert len(queue.buried) == 1 and len(queue.retries) == MAX_ATTEMPTS - 1


def test_backoff_is_bounded_in_hours() -> None:
    low, high = retry_window()
    assert 2 * 3600 < low < high < 6 * 3600
    waits = [retry_delay(n, rng=random.Random(n)) for n in range(1, MAX_ATTEMPTS)]
    assert waits[0] <= 5 and max(waits) <= 3600 and waits == sorted(waits[:9]) + waits[9:]
    assert retry_delay(3, retry_after=10**9) == 3600  # a huge Retry-After is capped


def test_a_late_notice_is_caught_up_from_the_log_in_order_and_never_twice() -> None:
    sender, store, _, log, receiver, _ = world()
    config(store)
    log.events = {1: [b"1"], 2: [b"2a", b"2b"], 3: [b"3"]}
    assert sender.deliver(Notice("acme", "t1", "w1", 3)) == "delivered"
    assert [got[2] for got in receiver.got] == [b"1", b"2a", b"2b", b"3"]
    assert len({got[3]["webhook-id"] for got in receiver.got}) == 4
    for sequence in (1, 2, 3):  # the stream's own notices for them, late or redelivered: skipped
        assert sender.deliver(Notice("acme", "t1", "w1", sequence)) == "skipped"
    assert len(receiver.got) == 4


def test_the_final_notification_settles_the_configs_lifetime() -> None:
    sender, store, _, log, _, _ = world()
    config(store)
    log.events[1] = [b"{}"]
    log.terminal.add(1)
    sender.deliver(Notice("acme", "t1", "w1", 1))
    assert store.get("acme", "t1", "w1").expires_at == int(NOW) + GRACE_SECONDS  # type: ignore[union-attr]


def test_a_deleted_config_gets_nothing_more() -> None:
    sender, store, _, log, receiver, _ = world()
    config(store)
    store.delete("acme", "t1", "w1")
    log.events[1] = [b"{}"]
    assert sender.deliver(Notice("acme", "t1", "w1", 1)) == "gone"
    assert not receiver.got


@pytest.mark.parametrize("rebound", ["127.0.0.1", "169.254.169.254", "10.0.0.1", "::ffff:10.0.0.1"])
def test_dns_rebinding_at_send_time_is_dead_lettered_and_never_dialled(rebound: str) -> None:
    sender, store, queue, log, receiver, _ = world()
    config(store)
    sender.resolver = Answers({"hooks.example.com": [rebound]})  # public at config time, not now
    log.events[1] = [b"{}"]
    assert sender.deliver(Notice("acme", "t1", "w1", 1)) == "dead"
    assert not receiver.got and len(queue.buried) == 1
    assert "refused at send time" in store.get("acme", "t1", "w1").last_failure["reason"]  # type: ignore[index]


def test_the_fan_out_queues_one_notice_per_live_config_behind_the_event() -> None:
    store = MemoryConfigStore(clock=lambda: NOW)
    queue = MemoryQueue()
    config(store)
    config(store, delivered=0, id="w2")
    store.advance(store.get("acme", "t1", "w2"), 5)  # type: ignore[arg-type]
    count = Fanout(store, queue, now=lambda: NOW).events([("acme", "t1", 5), ("acme", "t1", 6), ("acme", "t9", 1)])
    assert count == 3
    assert queue.sent == [Notice("acme", "t1", "w1", 5), Notice("acme", "t1", "w1", 6), Notice("acme", "t1", "w2", 6)]
    assert len({n.group_id for n in queue.sent}) == 1  # one FIFO group per task
    assert len({n.deduplication_id for n in queue.sent}) == 3


def test_no_secret_and_no_url_reaches_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """The token, the credentials and the URL (which may carry a token of its own) never reach a log
    line, through retries, a dead letter and a deleted config."""
    import logging

    sender, store, _, log, receiver, _ = world()
    config(
        store,
        url="https://hooks.example.com/in?key=url-secret",
        token="tok-secret",
        authentication={"scheme": "Bearer", "credentials": "cred-secret"},
    )
    log.events = {1: [b"{}"], 2: [b"{}"]}
    receiver.script = [Answer(503), Answer(400)]
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(RetryLater):
            sender.deliver(Notice("acme", "t1", "w1", 1), receive_count=1, handle="h")
        sender.deliver(Notice("acme", "t1", "w1", 2), receive_count=2, handle="h")
        store.delete("acme", "t1", "w1")
        sender.deliver(Notice("acme", "t1", "w1", 3))
    assert caplog.records, "the sender logs what it does"
    text = " ".join(f"{r.getMessage()} {r.__dict__}" for r in caplog.records)
    for secret in ("tok-secret", "cred-secret", "url-secret", "hooks.example.com"):
        assert secret not in text
