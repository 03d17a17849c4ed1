"""The store against a plain-Python model of its contract.

A hypothesis state machine drives a real store and ``Model`` side by side, on a clock
of its own that only moves forward (``advance_time``): schedule (unique keys, delays,
priorities, every on_conflict policy), claim, heartbeat, complete (with children), fail
(retry or dead), release, expire leases, cancel and requeue. After every step the whole
store must equal the model: each job's state, attempts, due time and lease token, the
queue statistics, one live job per key, and every lease but the current one refused.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from store_helpers import STORE_FACTORIES, T0

from crawlq.jobs import (
    LIVE_STATES,
    ConflictPolicy,
    Job,
    JobSpec,
    JobState,
    Lease,
    Outcome,
    QueueStats,
    ScheduleResult,
)
from crawlq.stores.base import ClaimParams, Completion, Failure, JobFilter, Release
from crawlq.types import JobId, JSONValue

SETTINGS = settings(
    max_examples=75,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

QUEUES = ("a", "b")
MAX_ATTEMPTS = {"a": 1, "b": 3}
"""Fixed per queue: a REPLACE also replaces max_attempts, and a job that already used
more attempts than its new maximum is a case the contract does not describe."""
KEYS = ("k",)
"""One key makes conflicts, deferrals and refused requeues frequent; the same key in the
other queue is independent of it."""
PENDING, RUNNING, DONE, DEAD, CANCELLED = (
    JobState.PENDING,
    JobState.RUNNING,
    JobState.DONE,
    JobState.DEAD,
    JobState.CANCELLED,
)


# -- the model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """What a schedule request may change (task, kwargs, timeout and max_attempts are
    the same for every request of a queue here)."""

    args: tuple[JSONValue, ...]
    priority: int
    run_at: float
    lease_seconds: float


def merge(existing: Request, incoming: Request, policy: ConflictPolicy) -> Request | None:
    """The contract's on_conflict rules, written again from the docs (not imported)."""
    if policy is ConflictPolicy.KEEP:
        return None
    if policy is ConflictPolicy.REPLACE:
        merged = incoming
    else:
        merged = replace(
            existing,
            run_at=min(existing.run_at, incoming.run_at),
            priority=max(existing.priority, incoming.priority),
        )
    return None if merged == existing else merged


@dataclass
class ModelJob:
    queue: str
    key: str | None
    request: Request
    id: JobId = 0
    """0 until the store's listing shows which id the new job got."""
    state: JobState = PENDING
    attempts: int = 0
    token: str | None = None
    lease_expires_at: float | None = None
    followup: Request | None = None
    dead_reason: str | None = None
    finished_at: float | None = None
    result: Any = None

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    @property
    def max_attempts(self) -> int:
        return MAX_ATTEMPTS[self.queue]

    def signature(self) -> tuple[Any, ...]:
        r = self.request
        return (self.queue, self.key, r.args, r.priority, r.run_at, r.lease_seconds)


def signature(job: Job) -> tuple[Any, ...]:
    return (job.queue, job.key, tuple(job.args), job.priority, job.run_at, job.lease_seconds)


@dataclass
class Model:
    now: float = T0
    jobs: dict[JobId, ModelJob] = field(default_factory=dict)
    new: list[ModelJob] = field(default_factory=list)
    """Jobs created by the current step, whose ids the store has not shown yet."""

    def live(self, queue: str, key: str | None) -> ModelJob | None:
        if key is None:
            return None
        for job in [*self.jobs.values(), *self.new]:
            if (job.queue, job.key) == (queue, key) and job.state in LIVE_STATES:
                return job
        return None

    def schedule(self, spec: JobSpec) -> tuple[ModelJob, Outcome]:
        incoming = Request(
            args=tuple(spec.args),
            priority=spec.priority,
            run_at=self.now + spec.delay if spec.run_at is None else spec.run_at,
            lease_seconds=spec.lease_seconds,
        )
        live = self.live(spec.queue, spec.key)
        if live is None:
            job = ModelJob(queue=spec.queue, key=spec.key, request=incoming)
            self.new.append(job)
            return job, Outcome.CREATED
        if live.state is PENDING:
            merged = merge(live.request, incoming, spec.on_conflict)
            if merged is None:
                return live, Outcome.UNCHANGED
            live.request = merged
            return live, Outcome.UPDATED
        if live.followup is None:
            merged = incoming
        else:
            merged = merge(live.followup, incoming, spec.on_conflict)
        if merged is None:
            return live, Outcome.UNCHANGED
        live.followup = merged
        return live, Outcome.DEFERRED

    def due(self, queues: Sequence[str], limit: int) -> list[ModelJob]:
        candidates = [
            j
            for j in self.jobs.values()
            if j.state is PENDING and j.queue in queues and j.request.run_at <= self.now
        ]
        candidates.sort(key=lambda j: (-j.request.priority, j.request.run_at, j.id))
        return candidates[:limit]

    def count(self, *states: JobState) -> int:
        return sum(1 for j in self.jobs.values() if j.state in states)

    def holder(self, lease: Lease) -> ModelJob | None:
        """The job if ``lease`` is its current lease, else None (the lease is stale)."""
        job = self.jobs.get(lease.job_id)
        if job is None or job.state is not RUNNING or job.token != lease.token:
            return None
        return job

    def end(self, job: ModelJob, state: JobState, reason: str | None = None) -> None:
        job.state, job.dead_reason, job.finished_at = state, reason, self.now
        job.token = job.lease_expires_at = None
        if state is not CANCELLED and job.followup is not None:
            self.new.append(ModelJob(queue=job.queue, key=job.key, request=job.followup))
        job.followup = None

    def back_to_pending(self, job: ModelJob) -> None:
        job.state = PENDING
        job.token = job.lease_expires_at = None

    def stats(self) -> list[QueueStats]:
        stats = []
        for queue in sorted({j.queue for j in self.jobs.values()}):
            jobs = [j for j in self.jobs.values() if j.queue == queue]
            pending = [j for j in jobs if j.state is PENDING]
            due = [j.request.run_at for j in pending if j.request.run_at <= self.now]
            n = Counter(j.state for j in jobs)
            stats.append(
                QueueStats(
                    queue=queue,
                    due=len(due),
                    scheduled=len(pending) - len(due),
                    running=n[RUNNING],
                    done=n[DONE],
                    dead=n[DEAD],
                    cancelled=n[CANCELLED],
                    oldest_due_age=self.now - min(due) if due else None,
                    done_last_minute=sum(
                        1 for j in jobs if j.state is DONE and (j.finished_at or 0) >= self.now - 60
                    ),
                )
            )
        return stats


# -- strategies --------------------------------------------------------------------------


@st.composite
def job_specs(draw: st.DrawFn) -> JobSpec:
    queue = draw(st.sampled_from(QUEUES))
    return JobSpec(
        queue=queue,
        task="t",
        args=[draw(st.integers(0, 2))],
        key=draw(st.none() | st.sampled_from(KEYS)),
        priority=draw(st.integers(0, 1)),
        # A negative delay stands for a run_at that far in the past (see ``at_now``).
        delay=draw(st.sampled_from([-10.0, -1.0, 0.0, 0.0, 1.0, 5.0, 20.0])),
        max_attempts=MAX_ATTEMPTS[queue],
        lease_seconds=draw(st.sampled_from([5.0, 20.0])),
        on_conflict=draw(st.sampled_from(ConflictPolicy)),
    )


# -- the machine -------------------------------------------------------------------------


class StoreMachine(RuleBasedStateMachine):
    store_name: ClassVar[str] = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory(prefix="crawlq-model-")
        self.store = STORE_FACTORIES[self.store_name](Path(self.directory.name))
        self.model = Model()
        self.leases: list[Lease] = []
        """Every lease the store ever issued, current or stale."""

    def teardown(self) -> None:
        self.store.close()
        self.directory.cleanup()

    @property
    def now(self) -> float:
        return self.model.now

    def adopt_new_jobs(self) -> None:
        """Match the jobs the store created in this step with the model's new jobs."""
        known = max(self.model.jobs, default=0)
        fresh = self.store.job_list(JobFilter(after_id=known))
        waiting = list(self.model.new)
        assert len(fresh) == len(waiting), (fresh, waiting)
        for job in fresh:
            match = next((m for m in waiting if m.signature() == signature(job)), None)
            assert match is not None, f"unexpected new job {job}"
            waiting.remove(match)
            match.id = job.id
            self.model.jobs[job.id] = match
        self.model.new.clear()

    def at_now(self, spec: JobSpec) -> JobSpec:
        """Turn a negative delay into a run_at in the past (due jobs of different ages)."""
        if spec.delay >= 0:
            return spec
        return replace(spec, delay=0.0, run_at=self.now + spec.delay)

    def pick_lease(self, data: st.DataObject) -> Lease:
        """Mostly a current lease; sometimes any lease ever issued, most likely stale.
        (Every stale lease is also tried by ``only_current_leases_are_honoured``.)"""
        current = [Lease(j.id, j.token or "") for j in self.model.jobs.values() if j.token]
        if data.draw(st.integers(0, 7), label="any lease if 0") > 0:
            return data.draw(st.sampled_from(sorted(current)), label="current lease")
        return data.draw(st.sampled_from(self.leases), label="any lease")

    # -- rules ---------------------------------------------------------------------------

    @rule(dt=st.sampled_from([0.5, 1.0, 5.0, 25.0]), expire=st.booleans())
    def advance_time(self, dt: float, expire: bool) -> None:
        """Move the clock, then maybe return the leases that expired meanwhile."""
        self.model.now += dt
        if expire:
            self.expire_leases()

    @rule(specs=st.lists(job_specs(), min_size=1, max_size=3))
    def schedule(self, specs: list[JobSpec]) -> None:
        specs = [self.at_now(spec) for spec in specs]
        expected = [self.model.schedule(spec) for spec in specs]
        results = self.store.job_schedule(specs, now=self.now)
        self.adopt_new_jobs()
        assert results == [ScheduleResult(job.id, outcome) for job, outcome in expected]

    @precondition(lambda self: self.model.count(PENDING))
    @rule(
        queues=st.lists(st.sampled_from(QUEUES), min_size=1, max_size=3),
        limit=st.integers(1, 3),
        worker=st.sampled_from(["w1", "w2"]),
    )
    def claim(self, queues: list[str], limit: int, worker: str) -> None:
        expected = self.model.due(queues, limit)
        params = ClaimParams(queues=queues, worker_id=worker, limit=limit, now=self.now)
        self.check_claim(self.store.job_claim(params), expected, worker)

    def check_claim(self, claimed: list[Job], expected: list[ModelJob], worker: str) -> None:
        """The store claimed what the model expects; the model follows."""
        assert [j.id for j in claimed] == [m.id for m in expected], "claim order"
        issued = {lease.token for lease in self.leases}
        for job, m in zip(claimed, expected, strict=True):
            assert job.run_at <= self.now, "claimed before its run_at"
            assert job.lease_token and job.lease_token not in issued, "a new lease token"
            assert job.worker_id == worker
            m.state, m.attempts, m.token = RUNNING, m.attempts + 1, job.lease_token
            m.lease_expires_at = self.now + m.request.lease_seconds
            self.leases.append(job.lease)

    @precondition(lambda self: self.model.count(RUNNING))
    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        lease = self.pick_lease(data)
        job = self.model.holder(lease)
        assert self.store.job_heartbeat([lease], now=self.now) == [job is not None]
        if job is not None:
            job.lease_expires_at = self.now + job.request.lease_seconds

    @precondition(lambda self: self.model.count(RUNNING))
    @rule(data=st.data(), child=st.none() | job_specs())
    def complete(self, data: st.DataObject, child: JobSpec | None) -> None:
        lease = self.pick_lease(data)
        job = self.model.holder(lease)
        children = [] if child is None else [self.at_now(child)]
        result: JSONValue = {"job": lease.job_id, "at": self.now}
        completion = Completion(lease=lease, result=result, children=children)
        assert self.store.job_complete([completion], now=self.now) == [job is not None]
        self.completed(job, result, children)

    def completed(self, job: ModelJob | None, result: JSONValue, children: list[JobSpec]) -> None:
        """The model follows a completion the store answered for ``job`` (None: stale)."""
        if job is not None:
            self.model.end(job, DONE)
            job.result = result
            for spec in children:
                self.model.schedule(spec)
        self.adopt_new_jobs()

    @precondition(lambda self: self.model.count(RUNNING))
    @rule(
        data=st.data(),
        child=st.none() | job_specs(),
        queues=st.lists(st.sampled_from(QUEUES), min_size=1, max_size=3),
        limit=st.integers(0, 3),
    )
    def complete_and_claim(
        self, data: st.DataObject, child: JobSpec | None, queues: list[str], limit: int
    ) -> None:
        """A worker's turn (``job_complete_claim``): the claim sees the completion."""
        lease = self.pick_lease(data)
        job = self.model.holder(lease)
        children = [] if child is None else [self.at_now(child)]
        completion = Completion(lease=lease, result=None, children=children)
        params = ClaimParams(queues=queues, worker_id="w1", limit=limit, now=self.now)
        answers, claimed = self.store.job_complete_claim([completion], params)
        assert answers == [job is not None]
        self.completed(job, None, children)
        self.check_claim(claimed, self.model.due(queues, limit), "w1")

    @precondition(lambda self: self.model.count(RUNNING))
    @rule(
        data=st.data(),
        retry=st.booleans(),
        delay=st.sampled_from([0.0, 1.0, 5.0]),
        reason=st.sampled_from(["error", "discarded"]),
    )
    def fail(self, data: st.DataObject, retry: bool, delay: float, reason: str) -> None:
        lease = self.pick_lease(data)
        job = self.model.holder(lease)
        # Like the worker's retry policy: no retry once the attempts are used up.
        if job is not None and job.attempts >= job.max_attempts:
            retry = False
        failure = Failure(
            lease=lease, error="boom", retry_delay=delay if retry else None, reason=reason
        )
        assert self.store.job_fail([failure], now=self.now) == [job is not None]
        if job is not None and retry:
            self.model.back_to_pending(job)
            job.request = replace(job.request, run_at=self.now + delay)
        elif job is not None:
            self.model.end(job, DEAD, reason)
        self.adopt_new_jobs()

    @precondition(lambda self: self.model.count(RUNNING))
    @rule(data=st.data(), delay=st.sampled_from([0.0, 3.0]))
    def release(self, data: st.DataObject, delay: float) -> None:
        lease = self.pick_lease(data)
        job = self.model.holder(lease)
        released = self.store.job_release([Release(lease=lease, delay=delay)], now=self.now)
        assert released == [job is not None]
        if job is not None:
            self.model.back_to_pending(job)
            job.attempts -= 1
            if delay > 0:
                job.request = replace(job.request, run_at=self.now + delay)

    def expire_leases(self) -> None:
        expired = sorted(
            j.id
            for j in self.model.jobs.values()
            if j.state is RUNNING and (j.lease_expires_at or 0) < self.now
        )
        assert self.store.job_expire_leases(now=self.now) == expired
        for job_id in expired:
            job = self.model.jobs[job_id]
            if job.attempts < job.max_attempts:
                self.model.back_to_pending(job)
            else:
                self.model.end(job, DEAD, "lease_expired")
        self.adopt_new_jobs()

    @precondition(lambda self: self.model.jobs)
    @rule(data=st.data(), unknown=st.booleans())
    def cancel(self, data: st.DataObject, unknown: bool) -> None:
        chosen = [data.draw(st.sampled_from(sorted(self.model.jobs)), label="job to cancel")]
        if unknown:
            chosen.append(10**9)
        expected = sorted({i for i in chosen if i in self.model.jobs and self.model.jobs[i].live})
        assert self.store.job_cancel(chosen, now=self.now) == expected
        for job_id in expected:
            self.model.end(self.model.jobs[job_id], CANCELLED)

    @precondition(lambda self: self.model.count(DEAD))
    @rule(data=st.data(), how=st.sampled_from(["all", "queue", "ids"]))
    def requeue(self, data: st.DataObject, how: str) -> None:
        dead = sorted(i for i, j in self.model.jobs.items() if j.state is DEAD)
        if how == "all":
            where, chosen = JobFilter(), dead
        elif how == "queue":
            queue = data.draw(st.sampled_from(QUEUES))
            where = JobFilter(queue=queue)
            chosen = [i for i in dead if self.model.jobs[i].queue == queue]
        else:
            pool = sorted(self.model.jobs) or [1]
            picked = data.draw(st.lists(st.sampled_from(pool), max_size=3))
            where, chosen = JobFilter(ids=picked), [i for i in dead if i in picked]
        expected = []
        for job_id in chosen:
            job = self.model.jobs[job_id]
            if self.model.live(job.queue, job.key) is not None:
                continue  # its key is live again: it stays dead
            job.state, job.attempts, job.dead_reason, job.finished_at = PENDING, 0, None, None
            job.request = replace(job.request, run_at=self.now)
            expected.append(job_id)
        assert self.store.job_requeue(where, now=self.now) == expected

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def every_job_matches_the_model(self) -> None:
        stored = {job.id: job for job in self.store.job_list(JobFilter())}
        assert sorted(stored) == sorted(self.model.jobs)
        for job_id, m in self.model.jobs.items():
            job = stored[job_id]
            assert job.state is m.state, job
            assert signature(job) == m.signature(), job
            assert job.attempts == m.attempts <= job.max_attempts == m.max_attempts, job
            assert (job.lease_token, job.lease_expires_at) == (m.token, m.lease_expires_at), job
            assert (job.dead_reason, job.finished_at) == (m.dead_reason, m.finished_at), job
            if m.state is DONE:
                assert job.result == m.result

    @invariant()
    def one_live_job_per_key(self) -> None:
        live = Counter(
            (j.queue, j.key)
            for j in self.store.job_list(JobFilter())
            if j.key is not None and j.state in LIVE_STATES
        )
        assert all(n == 1 for n in live.values()), live

    @invariant()
    def only_current_leases_are_honoured(self) -> None:
        stale = [lease for lease in self.leases if self.model.holder(lease) is None]
        if stale:
            assert self.store.job_heartbeat(stale, now=self.now) == [False] * len(stale)

    @invariant()
    def queue_stats_match_the_model(self) -> None:
        assert self.store.queue_stats(now=self.now) == self.model.stats()


@pytest.mark.parametrize("store_name", sorted(STORE_FACTORIES))
def test_store_follows_the_model(store_name: str) -> None:
    machine = type(f"{store_name.title()}Machine", (StoreMachine,), {"store_name": store_name})
    run_state_machine_as_test(machine, settings=SETTINGS)
