"""Leases (docs/design/leases.md): acquire one task, claim a claimable one (long-poll), heartbeat,
fence (the owner releasing, an admin, or the dispatcher's expiry of a silent lease or of a grant not
accepted in time), and the lease reads. Acquire, claim and fence are receipted commands; a heartbeat
is one conditional write."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, NamedTuple

from dovecote.platform.errors import (
    Forbidden,
    LeaseFenceExhausted,
    LeaseUnavailable,
    NotFound,
    RevisionConflict,
    StaleLease,
    TerminalTask,
)
from dovecote.platform.principal import Principal
from dovecote.platform.records import fields_json
from dovecote.tasks import machine
from dovecote.tasks.command_loop import CommandLoop, Outcome, Recorded, answered, commit_of, replay
from dovecote.tasks.commands import Acquire, Claim, Fence, Heartbeat, worker_id
from dovecote.tasks.limits import MAX_FENCE
from dovecote.tasks.model import (
    Grant,
    Receipt,
    Task,
    TaskView,
    accept_deadline,
    intent_digest,
    page_limit,
    silence_deadline,
    stale_lease,
)
from dovecote.tasks.ports import ClaimableLayout, Commit, Expect, ReceiptTaken, TaskChanged
from dovecote.tasks.reads import ListPage, Pages
from dovecote.tasks.storage import created_order

# A claim reads this many candidates (oldest first) of a claimable shard; each lost CAS race moves
# on to another one of them.
CLAIM_CANDIDATES = 16
# With several shards, a claim picks at random among the oldest this many candidates of the page it
# took, so concurrent claimers rarely race for one task; with one shard it takes strictly the oldest.
CLAIM_PICK = 8
# A long-poll claim re-checks with backoff between these bounds (seconds).
CLAIM_BACKOFF = (0.25, 2.0)
# A reshard pass scans the claimable index this many entries a page, and stops for the next run
# while less than this much of its time is left (milliseconds).
RESHARD_PAGE = 100
RESHARD_MARGIN_MS = 5_000


class Assignment(NamedTuple):
    """A lease as its worker holds it: the task, the fence, the grant, its last sign of life and
    (once the grant is accepted) its acceptance. What acquire and claim answer (and their receipts
    keep: `to_json`), and what a heartbeat and the lease reads answer."""

    task: TaskView
    fence: int
    worker: str
    granted_at: str
    heartbeat_at: str
    accepted_at: str | None = None  # absent while the grant is not accepted (its accept deadline runs)

    @classmethod
    def of(cls, task: Task) -> Assignment:
        """The task's current lease."""
        return cls(
            TaskView.of(task),
            task.fence,
            task.owner,
            task.granted_at,
            task.heartbeat_at or task.granted_at,
            task.accepted_at or None,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Assignment:
        found = data["assignment"]
        return cls(
            TaskView.from_json(found["task"]),
            found["fence"],
            found["worker"],
            found["granted_at"],
            found["heartbeat_at"],
            found.get("accepted_at"),
        )

    def to_json(self) -> dict[str, Any]:
        out = {"task": self.task.to_json(), **fields_json(self, ("fence", "worker", "granted_at", "heartbeat_at"))}
        if self.accepted_at:
            out["accepted_at"] = self.accepted_at
        return {"assignment": out}


@dataclass(eq=False)
class Leases:
    work: CommandLoop
    pages: Pages
    _: KW_ONLY
    sleep: Callable[[float], None] = time.sleep
    monotonic: Callable[[], float] = time.monotonic
    # Which shards and candidates a claim tries. The OS's randomness: two containers restored from
    # one SnapStart snapshot must not make the same choices.
    rng: random.Random = field(default_factory=random.SystemRandom)

    def acquire(self, principal: Principal, command: Acquire) -> Outcome[Assignment]:
        """Lease this task: fence = previous fence + 1."""
        worker = principal.worker
        intent = {"task": command.task, "worker": worker}
        recorded = self.work.run(
            principal,
            "acquire_lease",
            command.command_id,
            command.task,
            intent,
            lambda task: self._grant(task, worker, command.task),
        )
        return answered(recorded, Assignment.from_json)

    def claim(self, principal: Principal, command: Claim) -> Outcome[Assignment]:
        """A claimable task, close to the oldest (with one shard, strictly the oldest; see
        `_candidates`). With `wait_seconds`, a claim that finds nothing waits, re-checking with
        backoff, and answers as soon as a task becomes claimable (or 404 at the deadline). The wait
        is not part of the command: a retry with another wait replays."""
        worker = principal.worker
        digest = intent_digest("claim_lease", {"worker": worker})
        replayed = replay(
            self.work.store.read(principal.authority, command.command_id, None).receipt, "claim_lease", digest
        )
        if replayed is not None:
            return answered(replayed, Assignment.from_json)
        deadline = self.monotonic() + command.wait_seconds
        pause = CLAIM_BACKOFF[0]
        while True:
            try:
                return answered(self._claim_once(principal, worker, command.command_id, digest), Assignment.from_json)
            except NotFound:
                left = deadline - self.monotonic()
                if left <= 0:
                    raise
                self.sleep(min(pause, left))
                pause = min(pause * 2, CLAIM_BACKOFF[1])

    def _candidates(self, authority: str) -> Iterator[Task]:
        """The claim's candidates. Two random shards are read, and the one whose oldest task is older
        goes first: two choices keep the shards' heads level, so how far a claim lands from the
        oldest task stays bounded (bench/claims.py measures it). Within a page, a random pick among
        its oldest CLAIM_PICK, then another on a lost race. Then the other of the two, then every
        other shard in random order, each read only once the pages before it are used up: a claim
        that finds nothing has read every shard. One shard: strictly the oldest first."""
        store = self.work.store
        shards = self.rng.sample(range(store.claim_shards), store.claim_shards)
        pick = CLAIM_PICK if store.claim_shards > 1 else 1
        chosen = [store.claimable(authority, shard, CLAIM_CANDIDATES) for shard in shards[:2]]
        chosen.sort(key=lambda page: created_order(page[0]) if page else ("~",))  # an empty page last
        rest = (store.claimable(authority, shard, CLAIM_CANDIDATES) for shard in shards[2:])  # read lazily
        for page in itertools.chain(chosen, rest):
            while page:
                yield page.pop(self.rng.randrange(min(pick, len(page))))

    def _claim_once(self, principal: Principal, worker: str, command_id: str, digest: str) -> Recorded:
        store = self.work.store
        # At most CLAIM_CANDIDATES tries, whichever shards they come from: under contention a long-poll
        # backs off rather than spending one transaction per lost race without bound.
        for candidate in itertools.islice(self._candidates(principal.authority), CLAIM_CANDIDATES):
            try:
                decided = self._grant(candidate, worker, candidate.id)
            except (LeaseUnavailable, TerminalTask):
                # A stale index entry (the task was leased or ended since): try another.
                # An exhausted fence is not skipped: the candidate answers it (docs/design/leases.md#claims).
                continue
            commit = Commit(
                receipt=Receipt(principal.authority, command_id, "claim_lease", digest, 200, decided.receipt.result),
                task=decided.task,
                expect=decided.expect,
                grant=decided.grant,
            )
            try:
                store.commit(commit)
            except TaskChanged:
                continue  # another worker won this one; try another
            except ReceiptTaken:
                replayed = replay(store.read(principal.authority, command_id, None).receipt, "claim_lease", digest)
                if replayed is not None:
                    return replayed
                raise
            return Recorded(200, commit.receipt.result)
        raise NotFound("no claimable task")

    def _grant(self, task: Task | None, worker: str, task_id: str) -> Commit:
        if task is None:
            raise NotFound("task not found", task=task_id)
        if machine.is_terminal(task.state):
            raise TerminalTask(f"the task is {task.state}; it cannot be leased", state=task.state)
        if task.owner:
            raise LeaseUnavailable("the task is already leased", fence=task.fence)
        if task.fence >= MAX_FENCE:
            raise LeaseFenceExhausted("the task's lease fence is exhausted", fence=task.fence)
        now = self.work.now()
        fence = task.fence + 1
        after = task.evolve(owner=worker, fence=fence, granted_at=now, heartbeat_at=now, accepted_at="")
        return commit_of(
            after,
            Expect(task.revision, "", task.fence),
            200,
            Assignment.of(after).to_json(),
            grant=Grant(task.id, worker, fence, now, previous=task.last_end),
        )

    def fence(
        self,
        principal: Principal,
        command: Fence,
        *,
        if_silent_since: str | None = None,
        if_unaccepted: bool = False,
    ) -> Outcome[None]:
        """Retire the current lease generation (the owner releasing it, or an admin). The
        dispatcher passes `if_silent_since`, the heartbeat it judged stale: the fence then commits
        only if no sign of life arrived since, so a late heartbeat or worker command wins cleanly.
        Or `if_unaccepted`, for a grant past its accept deadline: the fence commits only if the grant
        is still not accepted, so an accept (or first sign of life) that lands first wins."""
        fence = command.fence
        # The acting worker is part of the intent: the same command id from another worker is an
        # idempotency conflict, never a replay of someone else's fence (docs/design/leases.md).
        intent = {"task": command.task, "fence": fence, "worker": principal.worker, "role": principal.role}

        def decide(task: Task | None) -> Commit | Recorded:
            if task is None:
                raise NotFound("task not found", task=command.task)
            if not task.owner or task.fence != fence:
                raise StaleLease(
                    "that lease generation is not current",
                    fence=fence,
                    current_fence=task.fence if task.owner else None,
                )
            if principal.role != "admin" and task.owner != principal.worker:
                raise Forbidden("only the owning worker or an admin may fence this lease")
            if if_silent_since is not None and task.heartbeat_at != if_silent_since:
                raise StaleLease("the lease showed a sign of life; it is not silent", fence=fence)
            if if_unaccepted and task.accepted_at:
                raise StaleLease("the grant was accepted; it is not stranded", fence=fence)
            after = task.evolve(owner="", granted_at="", heartbeat_at="", accepted_at="")
            expect = Expect(
                task.revision, task.owner, task.fence, heartbeat_at=if_silent_since, unaccepted=if_unaccepted
            )
            if if_silent_since is not None or if_unaccepted:
                reason = "expired" if if_silent_since is not None else "unaccepted"
            else:
                reason = "released" if task.owner == principal.worker else "fenced"
            return commit_of(after, expect, 204, {}, ends_lease=reason)

        recorded = self.work.run(principal, "fence_lease", command.command_id, command.task, intent, decide)
        return answered(recorded, lambda _: None)

    def heartbeat(self, principal: Principal, command: Heartbeat) -> Assignment:
        """A sign of life of the lease: one conditional write, no receipt (a repeat is harmless),
        never a revision change. A fence that is not current is `stale_lease`."""
        worker = principal.worker
        try:
            task = self.work.store.heartbeat(principal.authority, command.task, worker, command.fence, self.work.now())
        except TaskChanged as exc:
            if exc.actual is None:
                raise NotFound("task not found", task=command.task) from None
            raise stale_lease(exc.actual, command.fence, "heartbeat") from None
        return Assignment.of(task)

    def expire_silent_leases(self, shard: int, *, limit: int, command_id: Callable[[Task], str]) -> dict[str, int]:
        """The dispatcher's pass over one expiry shard: fence every lease silent past its lease
        timeout, and every grant not accepted within its accept timeout, with the ordinary fence
        command (receipt, CAS, fence kept), conditioned on what made it due: the heartbeat it saw,
        or the grant still unaccepted. Each outcome is data: fenced, or lost to a sign of life, an
        accept or another fence."""
        fenced = lost = 0
        now = self.work.now()
        for task in self.work.store.expired(shard, now, limit):
            admin = Principal(task.authority, "admin")
            silent = (silence_deadline(task) or now) < now
            stranded = (accept_deadline(task) or now) < now
            try:
                if not (silent or stranded):
                    raise StaleLease("not due yet", fence=task.fence)  # an index entry behind its item
                command = Fence(task.id, command_id(task), task.fence)
                if silent:
                    self.fence(admin, command, if_silent_since=task.heartbeat_at)
                else:
                    self.fence(admin, command, if_unaccepted=True)
                fenced += 1
            except (StaleLease, NotFound, RevisionConflict):
                lost += 1
        return {"fenced": fenced, "lost": lost}

    def reshard_claimable(self, *, time_left_ms: Callable[[], int] = lambda: 10**9) -> dict[str, Any]:
        """Bring the claimable index under the store's shard count once the count has changed (the
        dispatcher's first step each run, and `dovecote dev`'s as it starts): one pass scans every
        entry and moves the ones written under another count, resuming where the last run stopped.
        A pass that moved something is followed by another, in the next run: an entry a writer
        still on the old count wrote meanwhile (a deployment rolling out) is caught by it. The
        layout is current once a whole pass moved nothing; until then a claim may miss a task not
        moved yet. When the layout is current this is one read."""
        store = self.work.store
        layout = store.claimable_layout()
        want = store.claim_shards
        if layout.shards == want and layout.target in (0, want):
            return {"moved": 0, "done": True}
        if layout.target != want:  # a first pass, or passes toward a count the deployment left
            layout = ClaimableLayout(shards=layout.shards, target=want)
        resume, moved = layout.resume, layout.moved
        while True:
            count, resume = store.reshard_claimable(resume, RESHARD_PAGE)
            moved += count
            if resume is None:
                done = moved == 0
                store.record_claimable_layout(
                    ClaimableLayout(shards=want) if done else replace(layout, resume=None, moved=0)
                )
                return {"moved": moved - layout.moved, "done": done}
            if time_left_ms() < RESHARD_MARGIN_MS:
                store.record_claimable_layout(replace(layout, resume=resume, moved=moved))
                return {"moved": moved - layout.moved, "done": False}

    # ---- reads ----------------------------------------------------------------------------------

    def get_lease(self, principal: Principal, task_id: str) -> Assignment:
        principal.require("worker")
        task = self.work.load(principal, task_id)
        if not task.owner:
            raise NotFound("the task has no current lease", task=task_id)
        # The current lease must be the grant history's record for this fence.
        grant = self.work.store.grant(principal.authority, task_id, task.fence)
        if grant is None or grant.worker != task.owner:
            raise self.work.corrupt(
                "lease",
                authority=task.authority,
                task=task.id,
                fence=task.fence,
                owner=task.owner,
                granted_to=grant.worker if grant else None,
            )
        return Assignment.of(task)

    def list_leases(self, principal: Principal, limit: int | None, cursor: str | None) -> ListPage[Assignment]:
        """This worker's current leases: the restart-recovery scan."""
        worker = worker_id(principal)
        size = page_limit(limit)
        scope = "leases:" + worker
        after = self.pages.open(principal, cursor, scope)
        page = self.work.store.leases(principal.authority, worker, after, size)
        return ListPage(tuple(Assignment.of(t) for t in page.items), self.pages.seal(principal, scope, page.after))
