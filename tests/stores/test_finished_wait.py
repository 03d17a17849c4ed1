"""Waiting for a job to finish (``app.wait``, ``app.result``, ``Store.job_wait_finished``)
on every store: woken by the job's end, within 50 ms on PostgreSQL and Redis (their
notifications) and within the poll interval on SQLite; a timeout, a dead job, a cancelled
job and a missing one raise, each with what the caller needs to know."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable

import pytest
from store_helpers import T0, add, claim_one, complete, fail, new_crawl, spec

from crawlq import App, JobCancelled, JobFailed, JobNotFound, JobState, WaitTimeout
from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Outcome, ScheduleResult, WorkerInfo
from crawlq.stores.base import JobFilter, Store

NOTIFY_LATENCY = 0.05
"""The most a wait may take after the job's end, on a store with notifications."""


def _latency_bound(store: Store) -> float:
    """50 ms on PostgreSQL and Redis; the poll interval (plus the 50 ms every store gets
    for its own read of the job and the test machine's load) on SQLite."""
    return NOTIFY_LATENCY + getattr(store.settings, "poll_interval", 0.0)  # type: ignore[attr-defined]


def _wait_in_thread(app: App, job_id: int) -> tuple[threading.Thread, list[object], list[float]]:
    """Start ``app.result(job_id)`` in a thread: what it returned or raised, and when."""
    outcome: list[object] = []
    ended: list[float] = []

    def run() -> None:
        try:
            outcome.append(app.result(job_id, timeout=10.0))
        except Exception as exc:
            outcome.append(exc)
        ended.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome, ended


def _finish_while_waiting(
    store: Store, other: Store, finish: Callable[[Store, int], None]
) -> tuple[object, float]:
    """Schedule a job, wait for it in a thread while ``finish`` ends it through another
    Store object (another process); what the wait gave and how long after the end."""
    app = App(store)
    job_id = add(other)
    thread, outcome, ended = _wait_in_thread(app, job_id)
    time.sleep(0.15)  # the waiter is waiting, registered with the store
    assert not outcome, f"the wait returned before the job ended: {outcome}"
    finish(other, job_id)
    finished_at = time.monotonic()
    thread.join(10.0)
    assert outcome and ended, "the wait did not return within 10 s of the job's end"
    return outcome[0], ended[0] - finished_at


def _complete(store: Store, job_id: int) -> None:
    job = claim_one(store)
    assert job.id == job_id
    assert complete(store, job.lease, result={"status": 200, "id": job_id})


def test_result_returns_within_50_ms_of_the_completion(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    other = open_same_store()
    latencies = []
    for _ in range(5):
        result, latency = _finish_while_waiting(store, other, _complete)
        assert isinstance(result, dict) and result["status"] == 200
        latencies.append(latency)
    bound = _latency_bound(store)
    assert statistics.median(latencies) < bound, latencies
    assert max(latencies) < 10 * bound, latencies


def test_a_dead_job_raises_job_failed_with_its_last_error(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    def kill(s: Store, job_id: int) -> None:
        assert fail(s, claim_one(s).lease, error="Traceback ...\nValueError: no price")

    error, latency = _finish_while_waiting(store, open_same_store(), kill)
    assert isinstance(error, JobFailed)
    assert error.reason == "error" and error.error.endswith("ValueError: no price")
    assert error.job.state is JobState.DEAD
    assert "ValueError: no price" in str(error) and "dead" in str(error)
    assert latency < _latency_bound(store)


def test_a_cancelled_job_raises_job_cancelled(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    def cancel(s: Store, job_id: int) -> None:
        assert s.job_cancel([job_id]) == [job_id]

    error, latency = _finish_while_waiting(store, open_same_store(), cancel)
    assert isinstance(error, JobCancelled)
    assert error.job.state is JobState.CANCELLED and "cancelled" in str(error)
    assert latency < _latency_bound(store)


@pytest.mark.parametrize("how", ["expired lease", "reaped worker", "cancelled crawl"])
def test_every_way_a_job_ends_wakes_its_waiter(
    store: Store, open_same_store: Callable[[], Store], how: str
) -> None:
    """The ends no caller asks for by id: a lease that expired on the last attempt, a
    worker declared dead, a crawl cancelled with its pending jobs."""
    other = open_same_store()

    def end(s: Store, job_id: int) -> None:
        if how == "cancelled crawl":
            assert s.crawl_cancel(crawl_id)
            return
        if how == "expired lease":
            assert claim_one(s).id == job_id
            assert s.job_expire_leases(now=T0 + 100) == [job_id]
        else:
            worker = WorkerInfo(
                id="w1", host="h", pid=1, queues=("q",), runtime="thread", concurrency=1
            )
            s.worker_register(worker, now=T0)
            assert claim_one(s, worker="w1").id == job_id
            assert s.worker_reap(dead_after=30, gone=["w1"], now=T0) == ["w1"]

    crawl_id = 0
    if how == "cancelled crawl":
        crawl_id = new_crawl(other, spec()).id
        [job] = other.job_list(JobFilter(crawl=crawl_id))
        job_id = job.id
    else:
        job_id = add(other, max_attempts=1)
    thread, outcome, ended = _wait_in_thread(App(store), job_id)
    time.sleep(0.15)
    assert not outcome
    end(other, job_id)
    finished_at = time.monotonic()
    thread.join(10.0)
    assert outcome, "the wait did not return within 10 s of the job's end"
    expected = JobCancelled if how == "cancelled crawl" else JobFailed
    assert isinstance(outcome[0], expected), outcome
    if isinstance(outcome[0], JobFailed):
        assert outcome[0].reason == ("lease_expired" if how == "expired lease" else "worker_lost")
    assert ended[0] - finished_at < _latency_bound(store)


def test_a_retried_attempt_does_not_end_the_wait(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    other = open_same_store()
    job_id = add(other)
    thread, outcome, _ = _wait_in_thread(App(store), job_id)
    time.sleep(0.1)
    assert fail(other, claim_one(other).lease, retry_delay=0.0)
    time.sleep(0.2)
    assert not outcome, "a retry is not the job's end"
    assert complete(other, claim_one(other, now=T0 + 1).lease, now=T0 + 1, result=7)
    thread.join(10.0)
    assert outcome == [7]


def test_the_wait_times_out_with_the_job_as_it_is(store: Store) -> None:
    app = App(store)
    job_id = add(store)
    start = time.monotonic()
    with pytest.raises(WaitTimeout) as caught:
        app.wait(job_id, timeout=0.2)
    elapsed = time.monotonic() - start
    assert 0.2 <= elapsed < 2.0
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.job.state is JobState.PENDING
    assert f"job {job_id} (t) did not finish within 0.2 s: it is pending" == str(caught.value)
    with pytest.raises(WaitTimeout):
        app.result(job_id, timeout=0)


def test_a_finished_job_is_returned_at_once(store: Store) -> None:
    app = App(store)
    job_id = add(store)
    assert complete(store, claim_one(store).lease, result=["a", 1])
    start = time.monotonic()
    assert app.result(job_id, timeout=5) == ["a", 1]
    assert app.wait(ScheduleResult(job_id, Outcome.CREATED)).state is JobState.DONE
    assert time.monotonic() - start < 1.0


def test_an_unknown_job_raises_job_not_found(store: Store) -> None:
    app = App(store)
    with pytest.raises(JobNotFound, match="no job with id 4242"):
        app.wait(4242, timeout=1)
    job_id = add(store)
    assert complete(store, claim_one(store).lease)
    assert store.job_purge(JobFilter(ids=[job_id])) == 1
    with pytest.raises(JobNotFound, match="pruned after the retention"):
        app.result(job_id, timeout=0)


def test_waiting_for_what_scheduled_no_job_of_its_own_is_refused(store: Store) -> None:
    app = App(store)
    with pytest.raises(ConfigurationError, match="deferred behind running job 7"):
        app.wait(ScheduleResult(7, Outcome.DEFERRED))
    with pytest.raises(ConfigurationError, match="outcome seen"):
        app.result(ScheduleResult(0, Outcome.SEEN))
    with pytest.raises(ConfigurationError, match="timeout must be"):
        app.wait(1, timeout=-1)


def test_many_waiters_of_one_job_all_wake(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    other = open_same_store()
    job_id = add(other)
    waits = [_wait_in_thread(App(open_same_store()), job_id) for _ in range(3)]
    time.sleep(0.2)
    _complete(other, job_id)
    finished_at = time.monotonic()
    for thread, outcome, ended in waits:
        thread.join(10.0)
        assert outcome == [{"status": 200, "id": job_id}]
        assert ended[0] - finished_at < 10 * _latency_bound(store)


def _announcements(
    store: Store, store_name: str, request: pytest.FixtureRequest
) -> Callable[[float], list[str]]:
    """A listener of every job-end announcement of the store (PostgreSQL's NOTIFY on
    crawlq_finished, Redis's {p}:fdone:* channels): a function returning what arrived
    within some seconds."""
    if store_name == "postgres":
        import psycopg

        conn = psycopg.connect(store.settings.conninfo(), autocommit=True)  # type: ignore[attr-defined]
        request.addfinalizer(conn.close)
        conn.execute("LISTEN crawlq_finished")

        def received(seconds: float) -> list[str]:
            return [n.payload for n in conn.notifies(timeout=seconds)]

        return received
    if store_name == "redis":
        pubsub = store._client.pubsub()  # type: ignore[attr-defined]
        request.addfinalizer(pubsub.close)
        pubsub.psubscribe(f"{store.settings.prefix}:fdone:*")  # type: ignore[attr-defined]

        def received_redis(seconds: float) -> list[str]:
            deadline = time.monotonic() + seconds
            got = []
            while (remaining := deadline - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=remaining)
                if message is not None and message["type"] == "pmessage":
                    got.append(f"{message['channel']}={message['data']}")
            return got

        return received_redis
    pytest.skip("SQLite announces nothing: waiters look at data_version")


def test_only_jobs_someone_waits_for_are_announced(
    store: Store, store_name: str, request: pytest.FixtureRequest
) -> None:
    received = _announcements(store, store_name, request)
    unwatched = [add(store), add(store)]
    watched = add(store)
    for _ in unwatched:
        assert complete(store, claim_one(store).lease)
    assert store.job_wait_finished(watched, 0.05).state is JobState.PENDING  # type: ignore[union-attr]
    assert store.job_cancel([watched]) == [watched]
    if store_name == "postgres":
        schema = store.settings.schema  # type: ignore[attr-defined]
        assert received(0.5) == [f"{schema}:{watched}"]
    else:
        prefix = store.settings.prefix  # type: ignore[attr-defined]
        assert received(0.5) == [f"{prefix}:fdone:{watched}=cancelled"]
