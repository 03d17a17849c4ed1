"""Scheduling: outcomes, due times, uniqueness per (queue, key), the on_conflict policies
and requests for a key whose job is running."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import pytest
from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    fail,
    get,
    ids,
    release,
    schedule,
    spec,
)

from crawlq.exceptions import CrawlqError
from crawlq.jobs import ConflictPolicy, Job, JobState, Outcome, ScheduleResult
from crawlq.stores.base import JobFilter, Store

REPLACE, KEEP, EARLIEST = ConflictPolicy.REPLACE, ConflictPolicy.KEEP, ConflictPolicy.EARLIEST


# -- created ----------------------------------------------------------------------------


def test_schedule_creates_a_pending_job_with_every_field(store: Store) -> None:
    [result] = schedule(
        store,
        spec(
            args=[1, "a", None],
            kwargs={"x": [True, 2.5]},
            key="k",
            priority=4,
            max_attempts=5,
            lease_seconds=12.5,
            timeout=3.0,
        ),
    )
    assert result.outcome is Outcome.CREATED
    assert get(store, result.job_id) == Job(
        id=result.job_id,
        queue="q",
        task="t",
        args=[1, "a", None],
        kwargs={"x": [True, 2.5]},
        key="k",
        priority=4,
        run_at=T0,
        state=JobState.PENDING,
        attempts=0,
        max_attempts=5,
        lease_seconds=12.5,
        timeout=3.0,
        worker_id=None,
        lease_token=None,
        lease_expires_at=None,
        last_error=None,
        dead_reason=None,
        result=None,
        created_at=T0,
        started_at=None,
        finished_at=None,
    )


def test_job_ids_grow_in_scheduling_order(store: Store) -> None:
    first = add(store)
    second, third = (r.job_id for r in schedule(store, spec(), spec(queue="other")))
    assert first < second < third
    assert ids(all_jobs(store)) == [first, second, third]


def test_unknown_job_is_none(store: Store) -> None:
    assert store.job_get(12345) is None


def test_delay_is_counted_from_now(store: Store) -> None:
    job_id = add(store, now=T0 + 3, delay=7.5)
    job = get(store, job_id)
    assert (job.run_at, job.created_at, job.state) == (T0 + 10.5, T0 + 3, JobState.PENDING)


def test_run_at_wins_over_delay(store: Store) -> None:
    assert get(store, add(store, run_at=T0 + 5, delay=100)).run_at == T0 + 5


def test_run_at_in_the_past_is_due_at_once(store: Store) -> None:
    job_id = add(store, run_at=T0 - 50)
    assert get(store, job_id).run_at == T0 - 50
    assert ids(claim(store, now=T0)) == [job_id]


def test_without_now_the_store_clock_is_used(store: Store) -> None:
    before = store.now()
    [result] = store.job_schedule([spec(delay=60)])
    after = store.now()
    job = get(store, result.job_id)
    assert before - 1 <= job.created_at <= after + 1
    assert job.run_at == pytest.approx(job.created_at + 60)


def test_batch_returns_one_result_per_spec_in_order(store: Store) -> None:
    results = schedule(
        store,
        spec(key="a"),
        spec(),
        spec(key="a", priority=2),
        spec(queue="q2", key="a"),
        spec(key="a", priority=9, on_conflict=KEEP),
        spec(key="b"),
    )
    a, plain, a2, b = results[0].job_id, results[1].job_id, results[3].job_id, results[5].job_id
    assert a < plain < a2 < b
    assert results == [
        ScheduleResult(a, Outcome.CREATED),
        ScheduleResult(plain, Outcome.CREATED),
        ScheduleResult(a, Outcome.UPDATED),
        ScheduleResult(a2, Outcome.CREATED),
        ScheduleResult(a, Outcome.UNCHANGED),
        ScheduleResult(b, Outcome.CREATED),
    ]
    assert get(store, a).priority == 2
    assert ids(all_jobs(store)) == [a, plain, a2, b]


def test_empty_batch_schedules_nothing(store: Store) -> None:
    assert store.job_schedule([], now=T0) == []
    assert all_jobs(store) == []


def test_batch_is_one_transaction(store: Store) -> None:
    """A spec that cannot be stored takes the whole batch down with it."""
    unstorable = spec(args=[cast(Any, object())])
    with pytest.raises((TypeError, ValueError, CrawlqError)):
        schedule(store, spec(key="a"), spec(), unstorable)
    assert all_jobs(store) == []
    assert store.queue_stats(now=T0) == []


def test_jobs_without_key_never_conflict(store: Store) -> None:
    results = schedule(store, spec(args=[1]), spec(args=[1]))
    assert [r.outcome for r in results] == [Outcome.CREATED, Outcome.CREATED]
    assert results[0].job_id != results[1].job_id


# -- conflicts with a pending job --------------------------------------------------------


def _reschedule(store: Store, **second: Any) -> tuple[Job, ScheduleResult, Job]:
    """A pending job with key "k" (args [1], priority 1, due T0+10), then a second request
    for "k" at T0+1. Returns the job before, the second result, and the job after."""
    first = add(store, key="k", args=[1], kwargs={"a": 1}, priority=1, delay=10)
    before = get(store, first)
    [result] = schedule(store, spec(key="k", **second), now=T0 + 1)
    assert result.job_id == first
    after = get(store, first)
    assert ids(store.job_list(JobFilter(queue="q"))) == [first], "one live job per key"
    return before, result, after


def test_replace_is_the_default_policy(store: Store) -> None:
    assert spec().on_conflict is REPLACE
    _, result, after = _reschedule(store, args=[2], priority=5, delay=50)
    assert result.outcome is Outcome.UPDATED
    assert (after.args, after.priority, after.run_at) == ([2], 5, T0 + 51)


def test_replace_takes_the_new_run_at_priority_and_arguments(store: Store) -> None:
    before, result, after = _reschedule(
        store, args=[2], kwargs={"b": 2}, priority=0, delay=2, on_conflict=REPLACE
    )
    assert result.outcome is Outcome.UPDATED
    assert after == replace(before, args=[2], kwargs={"b": 2}, priority=0, run_at=T0 + 3)


def test_replace_with_an_identical_request_is_unchanged(store: Store) -> None:
    first = add(store, key="k", args=[1], delay=10)
    before = get(store, first)
    [result] = schedule(store, spec(key="k", args=[1], delay=10))
    assert result == ScheduleResult(first, Outcome.UNCHANGED)
    assert get(store, first) == before


def test_keep_leaves_the_pending_job_as_it_is(store: Store) -> None:
    before, result, after = _reschedule(store, args=[2], priority=9, delay=0, on_conflict=KEEP)
    assert result.outcome is Outcome.UNCHANGED
    assert after == before


@pytest.mark.parametrize(
    ("delay", "priority", "outcome", "run_at", "expected_priority"),
    [
        (4, 0, Outcome.UPDATED, T0 + 5, 1),  # earlier, lower priority: takes run_at
        (20, 3, Outcome.UPDATED, T0 + 10, 3),  # later, higher priority: takes priority
        (4, 3, Outcome.UPDATED, T0 + 5, 3),  # earlier and higher: takes both
        (20, 0, Outcome.UNCHANGED, T0 + 10, 1),  # later and lower: nothing
        (9, 1, Outcome.UNCHANGED, T0 + 10, 1),  # same run_at and priority: nothing
    ],
)
def test_earliest_takes_the_earlier_run_at_and_the_higher_priority(
    store: Store,
    delay: float,
    priority: int,
    outcome: Outcome,
    run_at: float,
    expected_priority: int,
) -> None:
    before, result, after = _reschedule(
        store, args=[2], kwargs={}, priority=priority, delay=delay, on_conflict=EARLIEST
    )
    assert result.outcome is outcome
    assert (after.run_at, after.priority) == (run_at, expected_priority)
    assert (after.args, after.kwargs) == ([1], {"a": 1}), "earliest keeps the arguments"
    assert (after.created_at, after.state, after.id) == (
        before.created_at,
        JobState.PENDING,
        before.id,
    )


def test_a_pending_job_that_was_retried_is_merged_too(store: Store) -> None:
    job_id = add(store, key="k", args=[1])
    assert fail(store, claim_one(store).lease, retry_delay=30)
    [result] = schedule(store, spec(key="k", args=[2], delay=5), now=T0 + 1)
    assert result == ScheduleResult(job_id, Outcome.UPDATED)
    job = get(store, job_id)
    assert (job.state, job.args, job.run_at, job.attempts) == (JobState.PENDING, [2], T0 + 6, 1)


# -- uniqueness --------------------------------------------------------------------------


def test_same_key_in_another_queue_is_independent(store: Store) -> None:
    a = add(store, key="k", args=[1])
    b = add(store, queue="q2", key="k", args=[2])
    assert a != b
    assert claim_one(store, ["q"]).id == a
    assert claim_one(store, ["q2"]).id == b
    [result] = schedule(store, spec(queue="q3", key="k"))
    assert result.outcome is Outcome.CREATED


def _end_done(store: Store, job: Job) -> None:
    assert complete(store, job.lease)


def _end_dead(store: Store, job: Job) -> None:
    assert fail(store, job.lease, retry_delay=None)


def _end_cancelled(store: Store, job: Job) -> None:
    assert store.job_cancel([job.id], now=T0) == [job.id]


ENDINGS: dict[str, tuple[Callable[[Store, Job], None], JobState]] = {
    "done": (_end_done, JobState.DONE),
    "dead": (_end_dead, JobState.DEAD),
    "cancelled": (_end_cancelled, JobState.CANCELLED),
}


@pytest.mark.parametrize("together", [False, True], ids=["alone", "in a bulk call"])
@pytest.mark.parametrize("ending", sorted(ENDINGS))
def test_a_key_is_free_again_once_its_job_has_ended(
    store: Store, ending: str, together: bool
) -> None:
    end, state = ENDINGS[ending]
    first = add(store, key="k", args=[1])
    end(store, claim_one(store))
    others = [spec(key="other", args=[3]), spec(args=[4])] if together else []
    [result, *_] = schedule(store, spec(key="k", args=[2]), *others, now=T0 + 1)
    assert result.outcome is Outcome.CREATED and result.job_id > first
    assert get(store, first).state is state
    assert get(store, result.job_id).args == [2]
    [again] = schedule(store, spec(key="k", args=[5]), now=T0 + 2)
    assert (again.outcome, again.job_id) == (Outcome.UPDATED, result.job_id)


def test_uniqueness_holds_under_concurrent_scheduling(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    others = [open_same_store() for _ in range(3)]
    results: list[ScheduleResult] = []
    barrier = threading.Barrier(len(others) + 1)

    def schedule_many(s: Store) -> None:
        barrier.wait()
        for i in range(20):
            results.extend(schedule(s, spec(key=f"k{i % 5}", args=[i])))

    threads = [threading.Thread(target=schedule_many, args=(s,)) for s in [store, *others]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80
    created = [r for r in results if r.outcome is Outcome.CREATED]
    assert len(created) == 5
    jobs = all_jobs(store)
    assert sorted(j.key or "" for j in jobs) == ["k0", "k1", "k2", "k3", "k4"]
    assert {r.job_id for r in results} == set(ids(jobs))


# -- a key whose job is running ----------------------------------------------------------


def _running(store: Store) -> Job:
    """A job with key "k" and args [1], claimed at T0."""
    job_id = add(store, key="k", args=[1], priority=3)
    job = claim_one(store)
    assert job.id == job_id
    return job


def _new_jobs(store: Store, after: Job) -> list[Job]:
    return store.job_list(JobFilter(after_id=after.id))


def test_scheduling_a_running_key_is_deferred(store: Store) -> None:
    job = _running(store)
    [result] = schedule(store, spec(key="k", args=[2], delay=100), now=T0 + 1)
    assert result == ScheduleResult(job.id, Outcome.DEFERRED)
    assert get(store, job.id) == job, "the running job is left alone"
    assert all_jobs(store) == [job], "no second live job for the key"
    assert claim(store, now=T0 + 1000) == []


@pytest.mark.parametrize("ending", ["complete", "fail", "expire"])
def test_the_remembered_request_becomes_pending_when_the_job_ends_done_or_dead(
    store: Store, ending: str
) -> None:
    job_id = add(store, key="k", args=[1], max_attempts=1)
    job = claim_one(store)
    [result] = schedule(
        store, spec(key="k", args=[2], kwargs={"b": 1}, priority=7, delay=100), now=T0 + 1
    )
    assert result == ScheduleResult(job_id, Outcome.DEFERRED)
    end_at = T0 + 2
    if ending == "complete":
        assert complete(store, job.lease, now=end_at)
        ended = JobState.DONE
    elif ending == "fail":
        assert fail(store, job.lease, now=end_at, retry_delay=None)
        ended = JobState.DEAD
    else:
        end_at = T0 + job.lease_seconds + 100
        assert store.job_expire_leases(now=end_at) == [job_id]
        ended = JobState.DEAD
    assert get(store, job_id).state is ended
    [new] = _new_jobs(store, job)
    assert (new.queue, new.task, new.key, new.args, new.kwargs) == ("q", "t", "k", [2], {"b": 1})
    assert (new.state, new.attempts, new.priority) == (JobState.PENDING, 0, 7)
    assert new.run_at == T0 + 101, "the request's due time was fixed when it was made"
    assert new.created_at == end_at
    assert (new.lease_token, new.started_at, new.finished_at) == (None, None, None)
    assert claim(store, now=T0 + 100.5) == []
    assert ids(claim(store, now=T0 + 101)) == [new.id]


@pytest.mark.parametrize("ending", ["retry", "release", "expire"])
def test_the_remembered_request_waits_while_the_job_goes_back_to_pending(
    store: Store, ending: str
) -> None:
    job = _running(store)
    [result] = schedule(store, spec(key="k", args=[2], delay=100), now=T0 + 1)
    assert result.outcome is Outcome.DEFERRED
    if ending == "retry":
        assert fail(store, job.lease, now=T0 + 2, retry_delay=0)
    elif ending == "release":
        assert release(store, job.lease, now=T0 + 2)
    else:
        assert store.job_expire_leases(now=T0 + job.lease_seconds + 1) == [job.id]
    assert get(store, job.id).state is JobState.PENDING
    assert _new_jobs(store, job) == []
    again = claim_one(store, now=T0 + 50)
    assert again.id == job.id
    assert complete(store, again.lease, now=T0 + 51)
    [new] = _new_jobs(store, job)
    assert (new.args, new.run_at, new.state) == ([2], T0 + 101, JobState.PENDING)


@pytest.mark.parametrize(
    ("policy", "outcome", "args", "priority", "run_at"),
    [
        (REPLACE, Outcome.DEFERRED, [3], 7, T0 + 6),
        (KEEP, Outcome.UNCHANGED, [2], 1, T0 + 11),
        (EARLIEST, Outcome.DEFERRED, [2], 7, T0 + 6),
    ],
)
def test_one_request_is_remembered_per_key_merged_by_policy(
    store: Store,
    policy: ConflictPolicy,
    outcome: Outcome,
    args: list[int],
    priority: int,
    run_at: float,
) -> None:
    job = _running(store)
    first = spec(key="k", args=[2], priority=1, delay=10, on_conflict=policy)
    second = spec(key="k", args=[3], priority=7, delay=5, on_conflict=policy)
    assert schedule(store, first, now=T0 + 1) == [ScheduleResult(job.id, Outcome.DEFERRED)]
    assert schedule(store, second, now=T0 + 1) == [ScheduleResult(job.id, outcome)]
    assert all_jobs(store) == [job]
    assert complete(store, job.lease, now=T0 + 2)
    [new] = _new_jobs(store, job)
    assert (new.args, new.priority, new.run_at) == (args, priority, run_at)


def test_an_identical_remembered_request_is_unchanged(store: Store) -> None:
    job = _running(store)
    request = spec(key="k", args=[2], delay=10)
    assert schedule(store, request, now=T0 + 1) == [ScheduleResult(job.id, Outcome.DEFERRED)]
    assert schedule(store, request, now=T0 + 1) == [ScheduleResult(job.id, Outcome.UNCHANGED)]
    assert complete(store, job.lease, now=T0 + 2)
    assert len(_new_jobs(store, job)) == 1


def test_cancelling_a_running_job_drops_its_remembered_request(store: Store) -> None:
    job = _running(store)
    schedule(store, spec(key="k", args=[2]), now=T0 + 1)
    assert store.job_cancel([job.id], now=T0 + 2) == [job.id]
    assert ids(all_jobs(store)) == [job.id]
    assert store.job_expire_leases(now=T0 + 1000) == []
    assert ids(all_jobs(store)) == [job.id]
    assert complete(store, job.lease, now=T0 + 3) is False
    assert ids(all_jobs(store)) == [job.id]


def test_cancelling_a_retried_job_drops_its_remembered_request(store: Store) -> None:
    job = _running(store)
    schedule(store, spec(key="k", args=[2]), now=T0 + 1)
    assert fail(store, job.lease, now=T0 + 2, retry_delay=5)
    assert store.job_cancel([job.id], now=T0 + 3) == [job.id]
    assert ids(all_jobs(store)) == [job.id]
    [result] = schedule(store, spec(key="k", args=[4]), now=T0 + 4)
    assert result.outcome is Outcome.CREATED
    assert get(store, result.job_id).args == [4]


def test_a_remembered_request_becomes_a_job_only_once(store: Store) -> None:
    """Requeueing and finishing the dead job must not replay a request already spent."""
    job = _running(store)
    schedule(store, spec(key="k", args=[2]), now=T0 + 1)
    assert fail(store, job.lease, now=T0 + 2, retry_delay=None)
    [follow_up] = _new_jobs(store, job)
    assert complete(store, claim_one(store, now=T0 + 3).lease, now=T0 + 3)
    assert store.job_requeue(JobFilter(ids=[job.id]), now=T0 + 4) == [job.id]
    again = claim_one(store, now=T0 + 4)
    assert again.id == job.id
    assert complete(store, again.lease, now=T0 + 5)
    assert ids(all_jobs(store)) == [job.id, follow_up.id]
