"""Crawls and limits against a plain-Python model of their contract.

A hypothesis state machine drives a real store on a clock of its own: create crawls,
schedule into them, claim, complete with children, fail (retry or dead), release, expire
leases, cancel jobs, pause / resume / cancel crawls, set limits and block keys. After
every step:

- each crawl's state and counters equal the model's, and a crawl is finished exactly
  when the model says nothing of it is pending or running (with one on_finish job);
- no claim broke a limit: per key, running <= max_running, starts at least min_interval
  apart and not before blocked_until; no job of a paused crawl was claimed; no job was
  claimed before its run_at.

At the end every crawl is resumed and time runs far ahead: claiming and completing until
nothing is left must end every job and finish every open crawl (no job is stuck behind
its key).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

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

from crawlq.crawls import CrawlSpec, CrawlState
from crawlq.exceptions import CrawlClosed
from crawlq.jobs import Job, JobSpec, JobState, Lease
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Completion, Failure, JobFilter, Release

SETTINGS = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

KEYS = (None, "h1", "h2")
LEASE = 30.0
MAX_ATTEMPTS = 2
ON_FINISH = JobSpec(queue="q", task="report", max_attempts=MAX_ATTEMPTS, lease_seconds=LEASE)


@dataclass
class MJob:
    crawl: int | None
    key: str | None
    run_at: float
    state: JobState = JobState.PENDING
    attempts: int = 0
    token: str | None = None


@dataclass
class MKey:
    limits: Limits = field(default_factory=Limits)
    blocked_until: float = 0.0
    last_start: float | None = None


@dataclass
class MCrawl:
    state: CrawlState = CrawlState.RUNNING
    on_finish_job: int | None = None


def job_spec(key: str | None, delay: float, crawl: int | None = None) -> JobSpec:
    return JobSpec(
        queue="q",
        task="page",
        limit_key=key,
        delay=delay,
        crawl=crawl,
        max_attempts=MAX_ATTEMPTS,
        lease_seconds=LEASE,
    )


class CrawlMachine(RuleBasedStateMachine):
    store_name: ClassVar[str] = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.TemporaryDirectory(prefix="crawlq-model-")
        self.store = STORE_FACTORIES[self.store_name](Path(self.directory.name))
        self.now = T0
        self.jobs: dict[int, MJob] = {}
        self.crawls: dict[int, MCrawl] = {}
        self.keys: dict[str, MKey] = {k: MKey() for k in KEYS if k is not None}

    # -- model helpers -----------------------------------------------------------------

    def adopt(self, expected: list[tuple[int | None, str | None, float]]) -> None:
        """Learn the ids of the jobs the last step created, in creation order."""
        known = max(self.jobs, default=0)
        new = self.store.job_list(JobFilter(after_id=known))
        fresh = [j for j in new if j.task == "page"]
        assert [(j.crawl_id, j.limit_key) for j in fresh] == [(c, k) for c, k, _ in expected]
        for job, (_c, _k, run_at) in zip(fresh, expected, strict=True):
            self.jobs[job.id] = MJob(crawl=job.crawl_id, key=job.limit_key, run_at=run_at)
        for job in new:
            if job.task == "report":
                self.jobs[job.id] = MJob(crawl=None, key=None, run_at=job.run_at)

    def outstanding(self, crawl_id: int) -> int:
        return sum(
            1
            for j in self.jobs.values()
            if j.crawl == crawl_id and j.state in (JobState.PENDING, JobState.RUNNING)
        )

    def settle_finishes(self) -> None:
        """Open crawls with nothing outstanding are finished, each with its on_finish."""
        for crawl_id, crawl in self.crawls.items():
            open_ = crawl.state in (CrawlState.RUNNING, CrawlState.PAUSED)
            if open_ and self.outstanding(crawl_id) == 0:
                crawl.state = CrawlState.FINISHED
                info = self.store.crawl_get(crawl_id)
                assert info is not None and info.on_finish_job is not None
                crawl.on_finish_job = info.on_finish_job
                report = self.store.job_get(info.on_finish_job)
                assert report is not None and report.kwargs == {"crawl_id": crawl_id}
                assert report.crawl_id is None
                self.jobs[report.id] = MJob(crawl=None, key=None, run_at=report.run_at)

    def running_of(self, key: str) -> int:
        return sum(1 for j in self.jobs.values() if j.key == key and j.state is JobState.RUNNING)

    def running_jobs(self) -> list[int]:
        return sorted(i for i, j in self.jobs.items() if j.state is JobState.RUNNING)

    def pending_jobs(self) -> list[int]:
        return sorted(i for i, j in self.jobs.items() if j.state is JobState.PENDING)

    def end_running(self, job_id: int, state: JobState, retry_delay: float | None = None) -> None:
        job = self.jobs[job_id]
        job.token = None
        job.state = state
        if state is JobState.PENDING and retry_delay is not None:
            job.run_at = self.now + retry_delay

    # -- rules: crawls -------------------------------------------------------------------

    @rule(
        starts=st.lists(
            st.tuples(st.sampled_from(KEYS), st.sampled_from([0.0, 0.0, 2.0])), max_size=4
        )
    )
    def create_crawl(self, starts: list[tuple[str | None, float]]) -> None:
        specs = [job_spec(k, d) for k, d in starts]
        info = self.store.crawl_create(
            CrawlSpec(name="c", on_finish=ON_FINISH), specs, now=self.now
        )
        self.crawls[info.id] = MCrawl()
        self.adopt([(info.id, k, self.now + d) for k, d in starts])
        self.settle_finishes()

    @rule(data=st.data(), key=st.sampled_from(KEYS))
    def schedule_into_a_crawl(self, data: st.DataObject, key: str | None) -> None:
        if not self.crawls:
            return
        crawl_id = data.draw(st.sampled_from(sorted(self.crawls)))
        crawl = self.crawls[crawl_id]
        if crawl.state in (CrawlState.FINISHED, CrawlState.CANCELLED):
            with pytest.raises(CrawlClosed):
                self.store.job_schedule([job_spec(key, 0.0, crawl_id)], now=self.now)
            return
        self.store.job_schedule([job_spec(key, 0.0, crawl_id)], now=self.now)
        self.adopt([(crawl_id, key, self.now)])

    @rule(data=st.data(), action=st.sampled_from(["pause", "resume", "cancel"]))
    def change_a_crawl(self, data: st.DataObject, action: str) -> None:
        if not self.crawls:
            return
        crawl_id = data.draw(st.sampled_from(sorted(self.crawls)))
        crawl = self.crawls[crawl_id]
        if action == "pause":
            expected = crawl.state is CrawlState.RUNNING
            assert self.store.crawl_pause(crawl_id, now=self.now) is expected
            if expected:
                crawl.state = CrawlState.PAUSED
        elif action == "resume":
            expected = crawl.state is CrawlState.PAUSED
            assert self.store.crawl_resume(crawl_id, now=self.now) is expected
            if expected:
                crawl.state = CrawlState.RUNNING
        else:
            expected = crawl.state in (CrawlState.RUNNING, CrawlState.PAUSED)
            assert self.store.crawl_cancel(crawl_id, now=self.now) is expected
            if expected:
                crawl.state = CrawlState.CANCELLED
                for job in self.jobs.values():
                    if job.crawl == crawl_id and job.state is JobState.PENDING:
                        job.state = JobState.CANCELLED

    # -- rules: limits -------------------------------------------------------------------

    @rule(
        key=st.sampled_from(KEYS[1:]),
        max_running=st.sampled_from([None, 1, 2]),
        min_interval=st.sampled_from([0.0, 1.0, 5.0]),
    )
    def set_limit(self, key: str, max_running: int | None, min_interval: float) -> None:
        limits = Limits(max_running=max_running, min_interval=min_interval)
        self.store.limit_set(key, limits, now=self.now)
        self.keys[key].limits = limits

    @rule(key=st.sampled_from(KEYS[1:]), seconds=st.sampled_from([1.0, 4.0, 30.0]))
    def block_key(self, key: str, seconds: float) -> None:
        self.store.limit_block(key, self.now + seconds, now=self.now)
        self.keys[key].blocked_until = max(self.keys[key].blocked_until, self.now + seconds)

    # -- rules: jobs ---------------------------------------------------------------------

    @rule(limit=st.integers(1, 4))
    def claim(self, limit: int) -> None:
        claimed = self.store.job_claim(
            ClaimParams(queues=["q"], worker_id="w", limit=limit, now=self.now)
        )
        assert len(claimed) <= limit
        starts: dict[str, int] = {}
        for job in claimed:
            self.check_claim_allowed(job, starts)

    def check_claim_allowed(self, job: Job, starts: dict[str, int]) -> None:
        mine = self.jobs[job.id]
        assert mine.state is JobState.PENDING, (job.id, mine)
        assert mine.run_at <= self.now, "claimed before its run_at"
        if mine.crawl is not None:
            assert self.crawls[mine.crawl].state is not CrawlState.PAUSED, "claimed while paused"
        mine.state, mine.token, mine.attempts = JobState.RUNNING, job.lease_token, job.attempts
        if mine.key is None:
            return
        key = self.keys[mine.key]
        cap = key.limits.max_running
        assert cap is None or self.running_of(mine.key) <= cap, f"{mine.key} over max_running"
        assert self.now >= key.blocked_until, f"{mine.key} started while blocked"
        if key.last_start is not None:
            gap = self.now - key.last_start
            assert gap >= key.limits.min_interval - 1e-6, f"{mine.key} started {gap} s apart"
        key.last_start = self.now
        starts[mine.key] = starts.get(mine.key, 0) + 1

    @rule(data=st.data(), children=st.lists(st.sampled_from(KEYS), max_size=2))
    def complete(self, data: st.DataObject, children: list[str | None]) -> None:
        running = self.running_jobs()
        if not running:
            return
        job_id = data.draw(st.sampled_from(running))
        job = self.jobs[job_id]
        assert job.token is not None
        kids = [job_spec(k, 0.0, job.crawl) for k in children] if job.crawl else []
        done = self.store.job_complete(
            [Completion(lease=self.lease_of(job_id), children=kids)], now=self.now
        )
        assert done == [True]
        self.end_running(job_id, JobState.DONE)
        crawl = self.crawls.get(job.crawl or 0)
        if crawl is not None and crawl.state is not CrawlState.CANCELLED:
            self.adopt([(job.crawl, k, self.now) for k in children])
        else:
            self.adopt([])  # a cancelled crawl's running job adds nothing
        self.settle_finishes()

    def lease_of(self, job_id: int) -> Lease:
        token = self.jobs[job_id].token
        assert token is not None
        return Lease(job_id, token)

    @rule(data=st.data(), retry=st.sampled_from([None, 0.0, 3.0]))
    def fail(self, data: st.DataObject, retry: float | None) -> None:
        running = self.running_jobs()
        if not running:
            return
        job_id = data.draw(st.sampled_from(running))
        job = self.jobs[job_id]
        if retry is not None and job.attempts >= MAX_ATTEMPTS:
            retry = None  # the caller decides; with no attempt left it would not retry
        failure = Failure(lease=self.lease_of(job_id), error="boom", retry_delay=retry)
        assert self.store.job_fail([failure], now=self.now) == [True]
        self.end_running(job_id, JobState.DEAD if retry is None else JobState.PENDING, retry)
        self.settle_finishes()

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        running = self.running_jobs()
        if not running:
            return
        job_id = data.draw(st.sampled_from(running))
        release = Release(lease=self.lease_of(job_id))
        assert self.store.job_release([release], now=self.now) == [True]
        self.end_running(job_id, JobState.PENDING)
        self.jobs[job_id].attempts -= 1  # a release gives the attempt back

    @rule(data=st.data())
    def cancel_job(self, data: st.DataObject) -> None:
        live = self.running_jobs() + self.pending_jobs()
        if not live:
            return
        job_id = data.draw(st.sampled_from(sorted(live)))
        assert self.store.job_cancel([job_id], now=self.now) == [job_id]
        self.jobs[job_id].state = JobState.CANCELLED
        self.jobs[job_id].token = None
        self.settle_finishes()

    @rule(seconds=st.sampled_from([0.5, 1.0, 3.0, 10.0]))
    def advance_time(self, seconds: float) -> None:
        self.now += seconds

    @precondition(lambda self: any(j.state is JobState.RUNNING for j in self.jobs.values()))
    @rule()
    def expire_leases(self) -> None:
        self.now += LEASE + 1
        expired = self.store.job_expire_leases(now=self.now)
        assert expired == self.running_jobs()
        for job_id in expired:
            job = self.jobs[job_id]
            left = job.attempts < MAX_ATTEMPTS
            self.end_running(job_id, JobState.PENDING if left else JobState.DEAD)
        self.settle_finishes()

    # -- invariants ----------------------------------------------------------------------

    @invariant()
    def crawls_match_the_model(self) -> None:
        for crawl_id, crawl in self.crawls.items():
            info = self.store.crawl_get(crawl_id)
            assert info is not None
            mine = [j for j in self.jobs.values() if j.crawl == crawl_id]
            counts = {s: sum(1 for j in mine if j.state is s) for s in JobState}
            assert (info.state, info.on_finish_job) == (crawl.state, crawl.on_finish_job)
            assert (info.pending, info.running, info.done, info.dead, info.cancelled) == (
                counts[JobState.PENDING],
                counts[JobState.RUNNING],
                counts[JobState.DONE],
                counts[JobState.DEAD],
                counts[JobState.CANCELLED],
            ), (crawl_id, info)

    @invariant()
    def job_states_match_the_model(self) -> None:
        for job in self.store.job_list(JobFilter()):
            mine = self.jobs.get(job.id)
            assert mine is not None, f"job {job.id} the model does not know"
            assert job.state is mine.state, (job.id, job.state, mine)

    def teardown(self) -> None:
        try:
            self.drain_everything()
        finally:
            self.store.close()
            self.directory.cleanup()

    def drain_everything(self) -> None:
        for crawl_id, crawl in self.crawls.items():
            if crawl.state is CrawlState.PAUSED:
                assert self.store.crawl_resume(crawl_id, now=self.now)
                crawl.state = CrawlState.RUNNING
        self.now += 100.0
        for _ in range(200):
            claimed = self.store.job_claim(
                ClaimParams(queues=["q"], worker_id="w", limit=10, now=self.now)
            )
            for job in claimed:
                self.check_claim_allowed(job, {})
            running = self.running_jobs()
            if running:
                done = [Completion(lease=self.lease_of(i)) for i in running]
                assert self.store.job_complete(done, now=self.now) == [True] * len(running)
                for job_id in running:
                    self.end_running(job_id, JobState.DONE)
                self.settle_finishes()
            elif not self.pending_jobs():
                break
            self.now += 6.0  # past every min_interval
        assert self.pending_jobs() == [], "jobs stuck pending behind their keys"
        for crawl_id, crawl in self.crawls.items():
            assert crawl.state in (CrawlState.FINISHED, CrawlState.CANCELLED), crawl_id
        self.crawls_match_the_model()


@pytest.mark.parametrize("store_name", sorted(STORE_FACTORIES))
def test_crawls_and_limits_follow_the_model(store_name: str) -> None:
    machine = type(f"{store_name.title()}CrawlMachine", (CrawlMachine,), {"store_name": store_name})
    run_state_machine_as_test(machine, settings=SETTINGS)
