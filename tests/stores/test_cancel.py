"""Cancelling: pending and running jobs only; it frees the key and fences the lease."""

from __future__ import annotations

from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    fail,
    get,
    make_dead,
    release,
    schedule,
    spec,
)

from crawlq.jobs import JobState, Outcome
from crawlq.stores.base import Store


def test_cancel_a_pending_job(store: Store) -> None:
    job_id = add(store, delay=10)
    assert store.job_cancel([job_id], now=T0 + 1) == [job_id]
    job = get(store, job_id)
    assert (job.state, job.finished_at, job.attempts) == (JobState.CANCELLED, T0 + 1, 0)
    assert claim(store, now=T0 + 100) == []


def test_cancel_a_running_job_fences_its_lease(store: Store) -> None:
    job_id = add(store)
    job = claim_one(store)
    assert store.job_cancel([job_id], now=T0 + 1) == [job_id]
    cancelled = get(store, job_id)
    assert (cancelled.state, cancelled.finished_at, cancelled.lease_token) == (
        JobState.CANCELLED,
        T0 + 1,
        None,
    )
    assert store.job_heartbeat([job.lease], now=T0 + 2) == [False]
    assert complete(store, job.lease, now=T0 + 2) is False
    assert fail(store, job.lease, now=T0 + 2, retry_delay=0) is False
    assert release(store, job.lease, now=T0 + 2) is False
    assert store.job_expire_leases(now=T0 + 1000) == []
    assert get(store, job_id) == cancelled
    assert claim(store, now=T0 + 1000) == []


def test_cancel_returns_only_the_jobs_it_cancelled_in_id_order(store: Store) -> None:
    later = add(store, delay=100)
    running = add(store)
    assert claim_one(store).id == running
    done = add(store, queue="d")
    assert complete(store, claim_one(store, ["d"]).lease)
    dead = make_dead(store, queue="x")
    before = {j.id: j for j in all_jobs(store)}
    answer = store.job_cancel([dead, 9999, later, done, running, running], now=T0 + 1)
    assert answer == [later, running]
    assert get(store, done) == before[done]
    assert get(store, dead) == before[dead]
    assert [get(store, i).state for i in (later, running)] == [JobState.CANCELLED] * 2


def test_cancelling_a_cancelled_job_does_nothing(store: Store) -> None:
    job_id = add(store)
    assert store.job_cancel([job_id], now=T0 + 1) == [job_id]
    assert store.job_cancel([job_id], now=T0 + 2) == []
    assert get(store, job_id).finished_at == T0 + 1


def test_cancel_nothing(store: Store) -> None:
    assert store.job_cancel([], now=T0) == []
    assert store.job_cancel([42], now=T0) == []


def test_cancel_frees_the_key(store: Store) -> None:
    first = add(store, key="k")
    assert store.job_cancel([first], now=T0) == [first]
    [result] = schedule(store, spec(key="k"), now=T0 + 1)
    assert result.outcome is Outcome.CREATED and result.job_id != first
