"""The worker loop: claim tasks, keep their leases alive, hand each to a handler, survive restarts.

    from dovecote.client import DovecoteClient
    from dovecote.client.worker import Job, Worker

    def handle(job: Job) -> None:           # called with the task accepted (state working)
        question = job.messages()[0]
        job.complete(f"done: {Job.text_of(question)}")

    with DovecoteClient.from_env("worker") as client:
        Worker(client, handle).run()

Threads and requests:
- the loop thread long-polls `POST /v1/leases/claim {wait_seconds}` (20 s by default) while a
  handler slot is free, so an idle worker makes about 3 requests a minute and picks a new task up
  as soon as it is created;
- handler threads (`concurrency`, 1 by default) run `handle(job)`;
- one heartbeat thread beats every held lease at a quarter of its task's `lease_timeout_seconds`
  (every worker command counts as a beat, so a busy lease is not beaten twice). A lease that comes
  back `stale_lease` (the dispatcher fenced it, or the task ended) is dropped and `job.lost` is set:
  the handler's next command would fail with `stale_lease` anyway, since the store checks the fence.
  A task that arrives past `submitted` (a fenced worker's, taken over) is beaten at once: its first
  sign of life is what accepts its grant before the task's `accept_timeout_seconds`.
- A handler that returns with the task in `input_required` parks it: the worker keeps the lease and
  beats it (at most every `park_poll_seconds`), and when a beat shows the caller replied (state
  working again) the job goes back to a handler.

Restart recovery: `run()` starts with `GET /v1/leases` and resumes those exact (task, fence) pairs
before claiming anything new: every one waiting for the caller, and as many of the others as it has
handler slots (working ones first); an unaccepted one it cannot start now is released, so another
worker takes it at once instead of after its accept timeout.

Stopping: `stop()`, or SIGINT / SIGTERM while `run()` runs in the main thread. The worker claims
nothing more (a signal interrupts the long-poll in flight, then replays that claim's id, so a task it
granted meanwhile is found and released), releases every lease it holds and has not accepted, lets
running handlers finish (for a signal, at most `stop_grace_seconds`; a second signal stops waiting)
and logs the accepted leases it keeps: a restart resumes them, or the dispatcher fences them after
their lease timeout. `worker.released` and `worker.kept` name them.

An inherited frozen artifact: a task that arrives working with a frozen artifact this job did not
freeze (a fenced worker froze it, or this worker before a restart) is completed naming that artifact,
without calling `handle`: a task freezes at most one artifact, immutable, so it is the task's
finished result and no other can replace it. If it cannot be read as this task's frozen artifact,
the task is failed and the reason logged. Command ids are `derived_id(task, fence, command, expected revision)`:
a command retried after a crash is the same command and replays, and no other holder of the
authority can guess it. Message and submission ids derive from the command id.

Worker events: with `events=True` the job's commands (accept, reject, fail, request_input, complete,
freeze) go through `POST /v1/worker/events` instead of the per-command routes. Each event's id is
derived like a command id and its delivery id from that, so a retried event is the same delivery and
answers the same settlement. An ACK moves the job's task on (revision + 1, the kind's state; the
settlement carries no task); a NACK raises `EventNacked` with the settlement's code (`stale_lease` and
`not_found` drop the job like the commands' errors do).

After `handle` returns: a terminal task is done; `input_required` is parked; a task still
`submitted` or `working` is released (its lease fenced by its owner) so another worker can take it.
An exception from `handle` fails the task (`reject` if still submitted) and is logged; a lost lease
(`stale_lease`) or an ended task just drops the job, and so does Dovecote staying unreachable past
the SDK's retries (the silent lease is then fenced by the dispatcher and the task claimed again).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dovecote.client.artifacts import EVENT_STATES, ArtifactPayload
from dovecote.client.errors import DovecoteError
from dovecote.client.notes import Progress
from dovecote.client.tasks import MAX_CLAIM_WAIT, TERMINAL_STATES, Message

if TYPE_CHECKING:
    from dovecote.client import DovecoteClient

log = logging.getLogger("dovecote.worker")

LOST_CODES = ("stale_lease", "terminal_task", "not_found")
TRANSIENT_CODES = ("unavailable", "commit_unknown", "throttled")
# A job's command kinds (the route names) and the worker event kind of each.
EVENT_KINDS = {
    "accept": "accept_task",
    "reject": "reject_task",
    "fail": "fail_task",
    "request-input": "request_input",
    "complete": "complete_task",
    "freeze": "freeze_artifact",
}


class EventNacked(DovecoteError):
    """A worker event was settled with a NACK: a deterministic rejection (status 0, the settlement's
    code: invalid, forbidden, not_found, stale_lease, revision_conflict, state_conflict,
    command_conflict). Retrying the same event answers the same NACK."""

    def __init__(self, settlement: dict[str, Any]) -> None:
        code = str(settlement.get("code") or "nack")
        message = str(settlement.get("message") or "the worker event was rejected")
        details = {"delivery_id": settlement.get("delivery_id"), "event_id": settlement.get("event_id")}
        super().__init__(0, code, message, details)
        self.settlement = settlement


class Job:
    """One leased task as a handler sees it: the latest task object, the fence, and the worker
    commands, each carrying the current revision and a derived command id."""

    def __init__(self, worker: Worker, assignment: dict[str, Any]) -> None:
        self._client = worker.client
        self._worker = worker
        self.fence: int = int(assignment["fence"])
        self.task: dict[str, Any] = dict(assignment["task"])
        self.id: str = self.task["id"]
        self.lost = threading.Event()
        self.parked = False
        self.next_beat = 0.0
        # The grant is taken up (the server's `accepted_at`: a worker command, or a heartbeat of a
        # task past submitted); `froze`: this job froze the task's artifact; `running`: in a handler.
        self.accepted = bool(assignment.get("accepted_at"))
        self.froze = False
        self.running = False
        self._lock = threading.Lock()
        # Held by a worker command on the wire; the heartbeat thread skips the job meanwhile (the
        # command is a beat) and a command waits for a beat in flight, so a beat never races a
        # terminal command into a stale_lease.
        self.wire = threading.Lock()

    def __repr__(self) -> str:
        return f"Job({self.id!r}, fence={self.fence}, state={self.state!r}, revision={self.revision})"

    @property
    def client(self) -> DovecoteClient:
        """The worker's client, for reads the job does not wrap (a workspace head, a note)."""
        return self._client

    @property
    def state(self) -> str:
        return str(self.task["state"])

    @property
    def revision(self) -> int:
        return int(self.task["revision"])

    @property
    def lease_timeout(self) -> int:
        return int(self.task.get("lease_timeout_seconds") or 0)

    def observe(self, task: dict[str, Any]) -> None:
        """Keep the newest task object (answers from the handler and the heartbeat interleave)."""
        with self._lock:
            if int(task["revision"]) >= self.revision:
                self.task = dict(task)

    def command_id(self, kind: str) -> str:
        return self._client.derived_id("w", self.id, self.fence, kind, self.revision)

    def _run(self, kind: str, **extra: Any) -> dict[str, Any]:
        if self._worker.events:
            fields = {"message": extra.get("message"), "submission": extra.get("submission_id")}
            fields.update(artifact=extra.get("artifact_id"), reason=extra.get("reason"))
            self.event(EVENT_KINDS[kind], **{k: v for k, v in fields.items() if v is not None})
            return self.task
        try:
            with self.wire:
                task = self._client.worker_command(
                    kind, self.id, self.revision, self.fence, self.command_id(kind), **extra
                )
                self.observe(task)
                self.accepted = True
                self._worker.beaten(self)  # every worker command is a heartbeat
        except DovecoteError as exc:
            if exc.code == "stale_lease":
                self.lost.set()
            raise
        return task

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Settle one worker event of this job (`kind`: accept_task, reject_task, request_input,
        fail_task, freeze_artifact, complete_task; `fields`: message, submission, artifact, freeze,
        reason)
        at the job's fence and revision. Returns the ACK settlement and moves the job's task on; a
        NACK raises `EventNacked` (and marks the job lost when its lease is gone)."""
        event_id = self._client.derived_id("w", self.id, self.fence, f"event:{kind}", self.revision)
        expected = self.revision
        event: dict[str, Any] = {"event_id": event_id, "kind": kind, "task": self.id, "fence": self.fence}
        event.update(expected_revision=expected, **fields)
        with self.wire:
            settlement = self._client.worker_event(event)
            if settlement.get("decision") != "ack":
                if settlement.get("code") in ("stale_lease", "not_found"):
                    self.lost.set()
                raise EventNacked(settlement)
            # The settlement carries no task: an ACK means the command committed at expected + 1.
            state = EVENT_STATES.get(kind, self.state)
            self.observe({**self.task, "state": state, "revision": expected + 1})
            self.accepted = True
            self._worker.beaten(self)
        return settlement

    # The commands (docs/services/workers.md).

    def accept(self) -> dict[str, Any]:
        return self._run("accept")

    def reject(self) -> dict[str, Any]:
        return self._run("reject")

    def fail(self, reason: str | None = None) -> dict[str, Any]:
        """working or input_required → failed; `reason` (≤ 2 KiB) is kept on the task_failed event."""
        return self._run("fail", reason=reason)

    def request_input(self, message: Message) -> dict[str, Any]:
        return self._run("request-input", message=message)

    def complete(
        self, message: Message, *, submission_id: str | None = None, artifact_id: str | None = None
    ) -> dict[str, Any]:
        return self._run("complete", message=message, submission_id=submission_id, artifact_id=artifact_id)

    def freeze(
        self,
        artifact_id: str,
        expected_base_revision: str,
        payload: ArtifactPayload,
        *,
        media_type: str | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Freeze the task's one artifact (inline, or a presigned upload for a large payload) and
        return it; name it in `complete(..., artifact_id=...)`. With `events`, a freeze_artifact
        event: the answer is then the artifact as far as this job knows it (id, base, media type)."""
        if self._worker.events:
            staged = self._client.artifact_payload(
                self.id, payload, fence=self.fence, media_type=media_type, progress=progress
            )
            freeze = {"artifact": artifact_id, "expected_base_revision": expected_base_revision, "payload": staged}
            self.event("freeze_artifact", freeze=freeze)
            with self._lock:
                self.task = {**self.task, "artifact": artifact_id}
            self.froze = True
            return {"id": artifact_id, "base_revision": expected_base_revision, "media_type": staged["media_type"]}
        try:
            answer = self._client.freeze_artifact(
                self.id,
                self.revision,
                self.fence,
                artifact_id,
                expected_base_revision,
                payload,
                media_type=media_type,
                command_id=self.command_id("freeze"),
                progress=progress,
            )
        except DovecoteError as exc:
            if exc.code == "stale_lease":
                self.lost.set()
            raise
        self.observe(answer["task"])
        self.froze = self.accepted = True
        self._worker.beaten(self)
        return dict(answer["artifact"])

    def heartbeat(self) -> dict[str, Any]:
        """A sign of life of the lease; for a task past submitted, it also accepts the grant."""
        assignment = self._client.heartbeat(self.id, self.fence)
        self.observe(assignment["task"])
        if assignment.get("accepted_at"):
            self.accepted = True
        return assignment

    def release(self) -> None:
        """Fence this lease as its owner: the task becomes claimable by any worker."""
        self._client.release(self.id, self.fence, self._client.derived_id("w", self.id, self.fence, "release"))
        self.lost.set()

    # Reading the conversation.

    def messages(self) -> list[dict[str, Any]]:
        """Every message of the task, oldest first."""
        return list(self._client.iter_messages(self.id))

    @staticmethod
    def text_of(message: dict[str, Any]) -> str:
        """The text parts of a message, joined by newlines."""
        return "\n".join(p["text"] for p in message.get("parts", []) if p.get("text") is not None)


class _Interrupted(BaseException):
    """Raised by the signal handler into a claim in flight (a BaseException, like KeyboardInterrupt,
    so no retry loop takes it for a failed request)."""


# The final message of a task completed with an artifact it inherited (see the module's docstring).
INHERITED = "Completed with artifact {artifact} ({digest}), frozen before this worker took the task over."


class Worker:
    def __init__(
        self,
        client: DovecoteClient,
        handle: Callable[[Job], None],
        *,
        wait_seconds: int = MAX_CLAIM_WAIT,
        concurrency: int = 1,
        heartbeat_fraction: float = 0.25,
        park_poll_seconds: float = 5.0,
        auto_accept: bool = True,
        events: bool = False,
        stop_grace_seconds: float = 10.0,
    ) -> None:
        """`wait_seconds`: the claim long-poll (0-20). `heartbeat_fraction`: beat a lease every
        this share of its timeout. `park_poll_seconds`: how often a parked job (waiting for the
        caller) is checked at most. `auto_accept`: accept a submitted task before `handle` sees it
        (False: `handle` sees it submitted and must `accept` or `reject` it within the task's
        `accept_timeout_seconds`). `events`: drive tasks with worker events (`POST /v1/worker/events`)
        instead of the per-command routes. `stop_grace_seconds`: after SIGINT / SIGTERM, how long
        running handlers may take to finish before `run` returns."""
        if not 0 <= wait_seconds <= MAX_CLAIM_WAIT:
            raise ValueError(f"wait_seconds must be between 0 and {MAX_CLAIM_WAIT}")
        self.client = client
        self.handle = handle
        self.wait_seconds = wait_seconds
        self.concurrency = max(1, concurrency)
        self.heartbeat_fraction = heartbeat_fraction
        self.park_poll_seconds = park_poll_seconds
        self.auto_accept = auto_accept
        self.events = events
        self.stop_grace_seconds = stop_grace_seconds
        self.held: dict[str, Job] = {}
        self.handled = 0
        # What the last stop did: the unaccepted leases it released, the accepted ones it kept.
        self.released: list[str] = []
        self.kept: list[str] = []
        self._ready: deque[Job] = deque()
        self._running = 0
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._hurry = threading.Event()  # a second signal: stop waiting for handlers
        self._signals = 0
        self._claiming = False
        self._beats_stop = threading.Event()
        # Claim ids: derived, never reused after a claim that succeeded (it would replay that
        # claim), reused after one that found nothing (that reserves nothing).
        self._nonce = uuid.uuid4().hex
        self._claims = 0

    # ---- control ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask `run` to return: it does once the claim in flight (at most `wait_seconds`) and the
        handlers running end. Unaccepted leases are released; accepted ones stay held (a restarted
        worker resumes them)."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, *, once: bool = False, handle_signals: bool = True) -> int:
        """Work until `stop()` (or SIGINT / SIGTERM, when called from the main thread and
        `handle_signals`); with `once`, return after one handler call (or when one long-poll found
        nothing to do; a claimed task that waits for its caller is kept, not counted). Returns how
        many times `handle` was called."""
        self._beats_stop.clear()
        self._hurry.clear()
        self._signals = 0
        self.released, self.kept = [], []
        restore = self._install_signals() if handle_signals else None
        try:
            self.recover()
            beats = threading.Thread(target=self._beat_loop, name="dovecote-heartbeats", daemon=True)
            beats.start()
            try:
                while not self._stop.is_set():
                    job = self._next_job(once)
                    if job is None:
                        if once:
                            break
                        continue
                    if once:
                        handled = self.handled
                        self._work(job)
                        if self.handled == handled and job.parked and self._keep_parked(job):
                            continue
                        break
                    # Daemon threads: a handler still running after a signal's grace does not keep
                    # the process alive (its lease is kept, and resumed after a restart).
                    threading.Thread(target=self._work, args=(job,), name="dovecote-handler", daemon=True).start()
            finally:
                self._stop.set()
                try:
                    self._wind_down()
                finally:
                    self._beats_stop.set()
                    beats.join(timeout=10)
        finally:
            if restore is not None:
                restore()
        return self.handled

    def _keep_parked(self, job: Job) -> bool:
        """`once` claimed a task that waits for its caller (its lease expired while it waited): there
        is nothing to do on it now. Keep it, accepting the grant as a first run keeps the task it
        parked, and go on to the next task: released, it would be the next claim's answer again
        (the oldest claimable), and every `--once` run would end on it."""
        with job.wire:
            try:
                job.heartbeat()
            except DovecoteError as exc:
                log.info("%s: could not keep the lease (%s)", job.id, exc.code)
                return False
        self.beaten(job)
        log.info("%s: waits for its caller; kept, taking the next task", job.id)
        return job.accepted

    def _install_signals(self) -> Callable[[], None] | None:
        """SIGINT and SIGTERM stop the worker (see the module's docstring); only the main thread
        may set signal handlers. Returns what puts the previous handlers back."""
        if threading.current_thread() is not threading.main_thread():
            return None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _on_signal(self, signum: int, frame: Any) -> None:
        self._signals += 1
        if self._signals > 1:
            # Stop now, leases as they are (held ones are resumed after a restart, or expire).
            self._hurry.set()
            raise KeyboardInterrupt
        log.info("%s: stopping; releasing the leases not accepted", signal.Signals(signum).name)
        self._stop.set()  # no lock here: the interrupted frame may hold it
        if self._claiming:
            raise _Interrupted()

    def recover(self) -> list[Job]:
        """Resume this worker's current leases (`GET /v1/leases`): parked when waiting for the
        caller; ready, up to its handler slots, otherwise (working ones first); the unaccepted rest
        is released for another worker to take now."""
        jobs = [Job(self, a) for a in self.client.leases()]
        resumed: list[Job] = []
        surplus: list[Job] = []
        with self._cond:
            fresh = [j for j in jobs if j.id not in self.held]
            slots = self.concurrency - self._running - len(self._ready)
            for job in sorted(fresh, key=lambda j: j.state == "submitted"):  # stable: working first
                if job.state == "input_required":
                    job.parked = True
                elif slots > 0 or job.state != "submitted":
                    slots -= 1
                    self._ready.append(job)
                else:
                    surplus.append(job)
                    continue
                self.held[job.id] = job
                self._took(job)
                resumed.append(job)
        if resumed:
            log.info("resuming %d lease(s): %s", len(resumed), ", ".join(sorted(j.id for j in resumed)))
        for job in surplus:
            self._release(job)
        if surplus:
            log.info("released %d lease(s) it cannot start now: %s", len(surplus), ", ".join(j.id for j in surplus))
        return resumed

    def _took(self, job: Job) -> None:
        """A job just came in: beat it at once if its task is past submitted (that accepts the
        grant, which has nothing else to accept), else a full interval from now."""
        if job.state == "submitted":
            self.beaten(job)
        else:
            job.next_beat = 0.0

    # ---- the loop -----------------------------------------------------------------------------

    def _next_job(self, once: bool) -> Job | None:
        with self._cond:
            while self._running >= self.concurrency and not self._stop.is_set():
                self._cond.wait(0.5)
            if self._stop.is_set():
                return None
            if self._ready:
                self._running += 1
                job = self._ready.popleft()
                job.running = True
                return job
            parked = any(j.parked for j in self.held.values())
        # A parked job may come back while the claim waits: wait no longer than its poll.
        wait = self.wait_seconds if not parked else min(self.wait_seconds, int(self.park_poll_seconds) or 1)
        assignment = self._claim(wait, once)
        if assignment is None:
            return None
        job = Job(self, assignment)
        if self._stop.is_set():
            # Granted while the worker was stopping: nobody here will accept it.
            self._release(job)
            self.released.append(job.id)
            log.info("%s: granted while stopping; released", job.id)
            return None
        with self._cond:
            self.held[job.id] = job
            self._running += 1
            job.running = True
            self._took(job)
        log.info("%s: claimed with fence %d", job.id, job.fence)
        return job

    def _claim(self, wait: int, once: bool) -> dict[str, Any] | None:
        command_id = self.client.derived_id("claim", self._nonce, self._claims)
        try:
            try:
                self._claiming = True
                if self._stop.is_set():
                    return None
                assignment = self.client.claim(command_id, wait_seconds=wait)
            finally:
                self._claiming = False
        except _Interrupted:
            # The long-poll was cut, not its server side: the same id again (no wait) answers the
            # task that claim granted, if it did, so the caller can release it.
            try:
                assignment = self.client.claim(command_id, wait_seconds=0)
            except DovecoteError as exc:
                log.warning("could not settle the interrupted claim (%s); its grant, if any, expires", exc)
                return None
        except DovecoteError as exc:
            if once or exc.code not in TRANSIENT_CODES:
                raise
            log.warning("claim failed (%s); trying again", exc)
            self._stop.wait(min(30.0, 1.0 + wait))
            return None
        if assignment is not None:
            self._claims += 1
        return assignment

    def _work(self, job: Job) -> None:
        try:
            if job.state == "submitted" and self.auto_accept:
                job.accept()
            if job.state == "working" and job.task.get("artifact") and not job.froze:
                self._complete_inherited(job)
            elif job.state in ("working", "submitted"):
                with self._cond:
                    self.handled += 1
                self.handle(job)
        except DovecoteError as exc:
            if exc.code in LOST_CODES:
                log.info("%s: lease lost or task ended (%s); dropping it", job.id, exc.code)
                job.lost.set()
            elif exc.retryable:
                # Dovecote is unreachable even after the SDK's retries: drop the job without a
                # word more. Its silent lease is fenced by the dispatcher and the task claimed again
                # (or this worker resumes it from GET /v1/leases after a restart).
                log.warning("%s: %s; dropping the job, its lease will expire", job.id, exc)
                job.lost.set()
            else:
                log.warning("%s: %s", job.id, exc)
                self._give_up(job, f"a command of the worker was refused: {exc.code}")
        except Exception as exc:
            log.exception("%s: the handler raised; failing the task", job.id)
            # The exception's type only: its text may hold what the worker keeps to itself.
            self._give_up(job, f"the worker's handler raised {type(exc).__name__}")
        finally:
            self._settle(job)

    def _complete_inherited(self, job: Job) -> None:
        """The task already froze its one artifact: complete naming it, or fail it when it is not
        this task's frozen artifact (see the module's docstring)."""
        artifact_id = str(job.task["artifact"])
        try:
            artifact = self.client.get_artifact(job.task["workspace"], artifact_id)["artifact"]
        except DovecoteError as exc:
            if exc.code != "not_found":
                raise
            artifact = {"state": "missing", "task": job.id}
        if artifact.get("state") != "frozen" or artifact.get("task") != job.id:
            log.warning(
                "%s: failing the task: its artifact %s is %s, not a frozen artifact of this task",
                job.id,
                artifact_id,
                artifact.get("state"),
            )
            job.fail(f"its artifact {artifact_id} is {artifact.get('state')}, not a frozen artifact of this task")
            return
        job.complete(INHERITED.format(artifact=artifact_id, digest=artifact.get("digest")), artifact_id=artifact_id)
        log.info("%s: completed with the artifact %s it inherited", job.id, artifact_id)

    def _give_up(self, job: Job, reason: str | None = None) -> None:
        try:
            if job.state == "submitted":
                job.reject()
            elif job.state in ("working", "input_required"):
                job.fail(reason)
        except DovecoteError as exc:
            log.warning("%s: could not end the task (%s); releasing the lease", job.id, exc)
            self._release(job)

    def _release(self, job: Job) -> None:
        try:
            job.release()
        except DovecoteError as exc:
            log.warning("%s: could not release the lease (%s)", job.id, exc)
            job.lost.set()

    def _settle(self, job: Job) -> None:
        if not job.lost.is_set() and job.state in ("working", "submitted") and not self._hurry.is_set():
            log.warning("%s: the handler returned with the task %s; releasing the lease", job.id, job.state)
            self._release(job)
        with self._cond:
            if job.lost.is_set() or job.state in TERMINAL_STATES:
                self.held.pop(job.id, None)
            else:
                job.parked = True  # input_required: wait for the caller's reply
                self.beaten(job)  # next beat (and check) at the parked pace
            job.running = False
            self._running -= 1
            self._cond.notify_all()

    def _wind_down(self) -> None:
        """After the loop: release the idle leases not accepted, let running handlers finish (for
        a signal, within the grace), release what is still unaccepted (a handler past the grace
        then finds its lease stale), and report what is kept."""
        self._release_unaccepted(running=False)
        grace = self.stop_grace_seconds if self._signals else None
        deadline = None if grace is None else time.monotonic() + grace
        with self._cond:
            while self._running > 0 and not self._hurry.is_set():
                left = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
                if left <= 0:
                    break
                self._cond.wait(left)
        self._release_unaccepted(running=True)
        with self._cond:
            kept = [j for j in self.held.values() if not j.lost.is_set() and j.state not in TERMINAL_STATES]
        self.kept = sorted(j.id for j in kept)
        if self.released:
            log.info("released %d unaccepted lease(s): %s", len(self.released), ", ".join(sorted(self.released)))
        if kept:
            log.info(
                "keeping %d accepted lease(s): %s (a restart resumes them; otherwise they are fenced "
                "after their lease timeout)",
                len(kept),
                ", ".join(f"{j.id} (fence {j.fence}, {j.state})" for j in sorted(kept, key=lambda j: j.id)),
            )

    def _release_unaccepted(self, *, running: bool) -> None:
        with self._cond:
            found = [
                j for j in self.held.values() if (running or not j.running) and not j.lost.is_set() and not j.accepted
            ]
            for job in found:
                self.held.pop(job.id, None)
                if job in self._ready:
                    self._ready.remove(job)
        for job in found:
            self._release(job)
            self.released.append(job.id)

    # ---- heartbeats ---------------------------------------------------------------------------

    def interval(self, job: Job) -> float:
        timeout = job.lease_timeout
        every = max(0.2, timeout * self.heartbeat_fraction) if timeout > 0 else float("inf")
        return min(every, self.park_poll_seconds) if job.parked else every

    def beaten(self, job: Job) -> None:
        """The lease just showed a sign of life: the next beat is a full interval away."""
        job.next_beat = time.monotonic() + self.interval(job)

    def _beat_loop(self) -> None:
        while not self._beats_stop.is_set():
            now = time.monotonic()
            with self._cond:
                jobs = list(self.held.values())
            for job in jobs:
                if job.next_beat <= now and not job.lost.is_set():
                    self._beat(job)
            upcoming = min((j.next_beat for j in jobs), default=now + 1.0)
            self._beats_stop.wait(min(max(upcoming - time.monotonic(), 0.05), 0.5))

    def _beat(self, job: Job) -> None:
        if not job.wire.acquire(blocking=False):
            return  # a command is on the wire: it is the beat (and sets the next one)
        try:
            if job.next_beat > time.monotonic() or job.state in TERMINAL_STATES:
                return  # a command just beat it (or ended the task)
            job.heartbeat()
        except DovecoteError as exc:
            if exc.code in LOST_CODES:
                log.info("%s: lease lost (%s); dropping it", job.id, exc.code)
                job.lost.set()
                with self._cond:
                    if job.parked:
                        self.held.pop(job.id, None)
                return
            log.warning("%s: heartbeat failed (%s); trying again soon", job.id, exc)
            job.next_beat = time.monotonic() + min(self.interval(job), 1.0)
            return
        finally:
            job.wire.release()
        with self._cond:
            if job.parked and job.state != "input_required":
                job.parked = False
                if job.state in TERMINAL_STATES:
                    self.held.pop(job.id, None)
                else:
                    self._ready.append(job)  # the caller replied
                    self._cond.notify_all()
        self.beaten(job)
