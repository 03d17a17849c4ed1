"""Claiming: order, due times, limits, exclusivity, attempts and lease tokens."""

from __future__ import annotations

import threading
from collections.abc import Callable

from store_helpers import T0, add, claim, claim_one, get, ids, release, schedule, spec

from crawlq.jobs import ConflictPolicy, JobState, Outcome
from crawlq.stores.base import Store
from crawlq.types import JobId


def _mixed(store: Store, queue: str = "q") -> dict[str, JobId]:
    """Jobs whose claim order differs from their scheduling order."""
    return {
        "low_old": add(store, queue=queue, priority=0, run_at=T0 - 10),
        "high_new": add(store, queue=queue, priority=5, run_at=T0),
        "high_old": add(store, queue=queue, priority=5, run_at=T0 - 5),
        "low_old_2": add(store, queue=queue, priority=0, run_at=T0 - 10),
        "negative": add(store, queue=queue, priority=-1, run_at=T0 - 100),
        "later": add(store, queue=queue, priority=9, run_at=T0 + 1),
    }


CLAIM_ORDER = ["high_old", "high_new", "low_old", "low_old_2", "negative"]


def test_claim_order_is_priority_desc_then_run_at_then_id(store: Store) -> None:
    jobs = _mixed(store)
    assert ids(claim(store, limit=10)) == [jobs[n] for n in CLAIM_ORDER]


def test_one_at_a_time_follows_the_same_order(store: Store) -> None:
    jobs = _mixed(store)
    claimed = [claim_one(store).id for _ in CLAIM_ORDER]
    assert claimed == [jobs[n] for n in CLAIM_ORDER]
    assert claim(store) == []


def test_claim_order_holds_across_queues(store: Store) -> None:
    a = add(store, queue="a", priority=1, run_at=T0 - 1)  # 3rd: same as c, lower id
    b = add(store, queue="b", priority=2, run_at=T0)  # 2nd
    c = add(store, queue="c", priority=1, run_at=T0 - 1)  # 4th
    d = add(store, queue="a", priority=2, run_at=T0 - 3)  # 1st
    e = add(store, queue="b", priority=0, run_at=T0 - 50)  # 5th
    add(store, queue="other", priority=100)  # not asked for
    assert ids(claim(store, ["a", "b", "c"], limit=10)) == [d, b, a, c, e]


def test_one_at_a_time_across_queues_takes_the_global_best(store: Store) -> None:
    a = add(store, queue="a", priority=0, run_at=T0 - 1)
    b = add(store, queue="b", priority=0, run_at=T0 - 2)
    c = add(store, queue="a", priority=1, run_at=T0)
    d = add(store, queue="b", priority=0, run_at=T0 - 1)
    order = [claim_one(store, ["b", "a"]).id for _ in range(4)]
    assert order == [c, b, a, d]


def test_only_the_asked_queues_are_claimed(store: Store) -> None:
    add(store, queue="a")
    b = add(store, queue="b")
    assert ids(claim(store, ["b", "c"], limit=5)) == [b]
    assert claim(store, ["b", "c"], limit=5) == []


def test_a_job_is_never_claimed_before_its_run_at(store: Store) -> None:
    job_id = add(store, delay=10)
    assert claim(store, now=T0) == []
    assert claim(store, now=T0 + 9.999) == []
    job = claim_one(store, now=T0 + 10)
    assert (job.id, job.run_at, job.started_at) == (job_id, T0 + 10, T0 + 10)


def test_limit_is_respected(store: Store) -> None:
    jobs = [add(store) for _ in range(5)]
    assert ids(claim(store, limit=3)) == jobs[:3]
    assert ids(claim(store, limit=3)) == jobs[3:]
    assert claim(store, limit=3) == []


def test_limit_is_respected_across_queues(store: Store) -> None:
    for queue in ("a", "b"):
        for _ in range(3):
            add(store, queue=queue)
    assert len(claim(store, ["a", "b"], limit=2)) == 2
    assert len(claim(store, ["a", "b"], limit=5)) == 4


def test_a_claimed_job_is_not_claimed_again(store: Store) -> None:
    job_id = add(store)
    assert claim_one(store, worker="a").id == job_id
    assert claim(store, worker="b", limit=10) == []
    assert claim(store, worker="b", limit=10, now=T0 + 1000) == []


def test_claim_on_an_empty_or_unknown_queue_is_empty(store: Store) -> None:
    assert claim(store, ["nowhere"], limit=5) == []
    job_id = add(store, queue="q")
    assert claim(store, ["nowhere"], limit=5) == []
    assert claim(store, ["q"], limit=0) == []
    assert get(store, job_id).state is JobState.PENDING


def test_claim_leases_the_job(store: Store) -> None:
    job_id = add(store, args=["x"], lease_seconds=12.5, max_attempts=4)
    job = claim_one(store, now=T0 + 2, worker="worker-7")
    assert job == get(store, job_id), "claim returns the job as stored"
    assert job.state is JobState.RUNNING
    assert job.attempts == 1, "attempts are counted at claim"
    assert job.worker_id == "worker-7"
    assert job.lease_token
    assert job.lease_expires_at == T0 + 2 + 12.5
    assert job.started_at == T0 + 2
    assert (job.finished_at, job.args, job.max_attempts) == (None, ["x"], 4)


def test_each_claim_issues_a_new_lease_token(store: Store) -> None:
    job_id = add(store, max_attempts=10)
    tokens = []
    for i in range(4):
        job = claim_one(store, now=T0 + i)
        assert (job.id, job.attempts) == (job_id, 1)
        tokens.append(job.lease_token)
        assert release(store, job.lease, now=T0 + i)
    assert len(set(tokens)) == 4
    other = add(store)
    assert claim_one(store, now=T0 + 5).lease_token not in tokens
    assert claim_one(store, now=T0 + 5).id == other


def test_attempts_count_every_claim(store: Store) -> None:
    job_id = add(store, max_attempts=3)
    for attempt in (1, 2, 3):
        job = claim_one(store, now=T0 + attempt)
        assert job.attempts == attempt == get(store, job_id).attempts
        assert store.job_expire_leases(now=T0 + attempt + job.lease_seconds + 0.5) == [job_id]
    assert get(store, job_id).state is JobState.DEAD


def test_a_job_moved_into_the_future_by_replace_waits_until_then(store: Store) -> None:
    first = add(store, priority=9)
    moved = add(store, key="k", delay=5)
    # A claim after T0+5 looks at "moved" (it is due) but takes the higher priority job.
    assert claim_one(store, now=T0 + 6).id == first
    [result] = schedule(store, spec(key="k", delay=100), now=T0 + 6)
    assert result.outcome is Outcome.UPDATED
    assert claim(store, now=T0 + 7) == []
    assert claim(store, now=T0 + 105.9) == []
    assert claim_one(store, now=T0 + 106).id == moved


def test_a_job_moved_earlier_by_earliest_is_due_earlier(store: Store) -> None:
    job_id = add(store, key="k", delay=100)
    [result] = schedule(store, spec(key="k", delay=2, on_conflict=ConflictPolicy.EARLIEST), now=T0)
    assert result.outcome is Outcome.UPDATED
    assert claim(store, now=T0 + 1) == []
    assert claim_one(store, now=T0 + 2).id == job_id


def test_claim_is_atomic_across_connections(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    expected = {r.job_id for r in schedule(store, *(spec(args=[i]) for i in range(60)))}
    stores = [store, *(open_same_store() for _ in range(3))]
    claimed: list[list[JobId]] = [[] for _ in stores]
    barrier = threading.Barrier(len(stores))

    def work(index: int) -> None:
        barrier.wait()
        while jobs := claim(stores[index], limit=3, worker=f"w{index}", now=T0 + 1):
            claimed[index].extend(ids(jobs))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    everything = [job_id for part in claimed for job_id in part]
    assert sorted(everything) == sorted(expected), "each job leased exactly once"
    for index, part in enumerate(claimed):
        assert all(get(store, job_id).worker_id == f"w{index}" for job_id in part)
