"""Waiting for work: the next due time, and job_wait's wake-ups and timeouts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from store_helpers import T0, add, claim_one, complete, spec

from crawlq.stores.base import Store, WaitParams


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
