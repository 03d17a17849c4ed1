"""Waiting for work: the next due time, job_wait's wake-ups and timeouts, and
job_wait_claim (a worker's wait, ending in its claim)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from store_helpers import T0, add, claim_one, complete, spec

from crawlq.jobs import JobState
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Store, WaitParams


def test_next_due_is_none_without_pending_jobs(store: Store) -> None:
    assert store.job_next_due(["q"]) is None
    add(store, queue="other")
    assert store.job_next_due(["q", "nowhere"]) is None


def test_next_due_is_the_earliest_run_at_of_the_asked_queues(store: Store) -> None:
    add(store, queue="a", delay=30)
    add(store, queue="b", delay=20)
    add(store, queue="a", delay=25)
    add(store, queue="c", delay=5)
    assert store.job_next_due(["a"]) == T0 + 25
    assert store.job_next_due(["a", "b"]) == T0 + 20
    assert store.job_next_due(["b", "c", "a"]) == T0 + 5


def test_next_due_includes_past_due_jobs(store: Store) -> None:
    add(store, run_at=T0 - 100)
    add(store, delay=10)
    assert store.job_next_due(["q"]) == T0 - 100


def test_next_due_ignores_running_and_finished_jobs(store: Store) -> None:
    add(store, run_at=T0 - 10)
    add(store, run_at=T0 - 5)
    add(store, delay=50)
    assert complete(store, claim_one(store).lease)
    assert store.job_next_due(["q"]) == T0 - 5
    claim_one(store)
    assert store.job_next_due(["q"]) == T0 + 50
    claim_one(store, now=T0 + 50)
    assert store.job_next_due(["q"]) is None


def test_wait_returns_after_about_its_timeout_when_nothing_happens(store: Store) -> None:
    start = time.monotonic()
    store.job_wait(WaitParams(queues=["q"], timeout=0.2))
    elapsed = time.monotonic() - start
    assert 0.1 <= elapsed < 2.0


def test_wait_wakes_up_when_another_store_object_schedules(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    if not store.capabilities.notify:
        pytest.skip("without the notify capability job_wait may sleep out its timeout")
    other = open_same_store()
    done = threading.Event()
    elapsed: list[float] = []

    def wait() -> None:
        start = time.monotonic()
        store.job_wait(WaitParams(queues=["q"], timeout=10.0))
        elapsed.append(time.monotonic() - start)
        done.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.1)
    assert not done.is_set(), "job_wait returned before anything happened"
    other.job_schedule([spec()])
    assert done.wait(5.0), "job_wait did not wake up within 5 s of a new job"
    waiter.join()
    assert elapsed[0] < 5.0


def test_wait_returns_when_a_scheduled_job_becomes_due(store: Store) -> None:
    store.job_schedule([spec(delay=0.3)])
    start = time.monotonic()
    store.job_wait(WaitParams(queues=["q"], timeout=10.0))
    assert time.monotonic() - start < 5.0


def worker_claim(limit: int = 4, now: float | None = None) -> ClaimParams:
    return ClaimParams(queues=["other", "q"], worker_id="w1", limit=limit, now=now)


def test_wait_claim_claims_a_due_job_at_once(store: Store) -> None:
    job_id = add(store)
    start = time.monotonic()
    (job,) = store.job_wait_claim(worker_claim(now=T0 + 1), timeout=10.0)
    assert time.monotonic() - start < 5.0
    assert (job.id, job.state, job.worker_id, job.attempts) == (job_id, JobState.RUNNING, "w1", 1)
    assert store.job_get(job_id) == job


def test_wait_claim_returns_nothing_after_about_its_timeout(store: Store) -> None:
    add(store, queue="elsewhere")
    start = time.monotonic()
    assert store.job_wait_claim(worker_claim(), timeout=0.2) == []
    assert 0.1 <= time.monotonic() - start < 2.0


def test_wait_claim_claims_what_another_store_object_schedules(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    if not store.capabilities.notify:
        pytest.skip("without the notify capability job_wait may sleep out its timeout")
    other = open_same_store()
    got: list[list[int]] = []
    waiter = threading.Thread(
        target=lambda: got.append([j.id for j in store.job_wait_claim(worker_claim(), 10.0)])
    )
    start = time.monotonic()
    waiter.start()
    time.sleep(0.1)
    assert not got, "job_wait_claim returned before anything happened"
    [result] = other.job_schedule([spec()])
    waiter.join(10.0)
    assert got == [[result.job_id]] and time.monotonic() - start < 5.0
    running = other.job_get(result.job_id)
    assert running is not None and (running.state, running.worker_id) == (JobState.RUNNING, "w1")
    assert store.job_wait_claim(worker_claim(), timeout=0.05) == []


def test_wait_claim_takes_no_job_of_a_key_at_its_cap(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1))
    first, second = (
        r.job_id for r in store.job_schedule([spec(limit_key="k"), spec(limit_key="k")])
    )
    (running,) = store.job_claim(worker_claim(limit=1))
    assert running.id == first
    assert store.job_wait_claim(worker_claim(), timeout=0.2) == []
    assert complete(store, running.lease, now=store.now())
    assert [j.id for j in store.job_wait_claim(worker_claim(), timeout=5.0)] == [second]
