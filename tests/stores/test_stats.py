"""Queue statistics: counts by state, due vs scheduled, oldest due age, done per minute."""

from __future__ import annotations

from store_helpers import (
    T0,
    add,
    claim,
    claim_one,
    complete,
    counts,
    fail,
    release,
    schedule,
    spec,
    stats_by_queue,
)

from crawlq.jobs import JobState, QueueStats
from crawlq.stores.base import JobFilter, Store


def test_no_jobs_no_stats(store: Store) -> None:
    assert store.queue_stats(now=T0) == []


def test_stats_cover_every_queue_sorted_by_name(store: Store) -> None:
    add(store, queue="zeta")
    add(store, queue="alpha", delay=5)
    add(store, queue="mid")
    add(store, queue="alpha")
    stats = store.queue_stats(now=T0)
    assert [s.queue for s in stats] == ["alpha", "mid", "zeta"]
    assert stats[0] == QueueStats(
        queue="alpha",
        due=1,
        scheduled=1,
        running=0,
        done=0,
        dead=0,
        cancelled=0,
        oldest_due_age=0.0,
        done_last_minute=0,
    )
    assert stats[0].pending == 2


def test_due_and_scheduled_are_split_by_now(store: Store) -> None:
    add(store, run_at=T0 - 5)
    add(store, run_at=T0)
    add(store, run_at=T0 + 10)
    add(store, run_at=T0 + 20)
    s = stats_by_queue(store, T0)["q"]
    assert (s.due, s.scheduled, s.oldest_due_age) == (2, 2, 5.0)
    s = stats_by_queue(store, T0 + 10)["q"]
    assert (s.due, s.scheduled, s.oldest_due_age) == (3, 1, 15.0)
    s = stats_by_queue(store, T0 + 25)["q"]
    assert (s.due, s.scheduled, s.oldest_due_age) == (4, 0, 30.0)


def test_oldest_due_age_is_none_without_due_jobs(store: Store) -> None:
    add(store, delay=10)
    s = stats_by_queue(store, T0)["q"]
    assert (s.due, s.scheduled, s.oldest_due_age) == (0, 1, None)
    add(store)
    assert claim_one(store).run_at == T0
    assert stats_by_queue(store, T0 + 5)["q"].oldest_due_age is None
    assert stats_by_queue(store, T0 + 12)["q"].oldest_due_age == 2.0


def test_done_last_minute_counts_completions_of_the_last_60_seconds(store: Store) -> None:
    for _ in range(3):
        add(store)
    a, b, c = claim(store, limit=3)
    assert complete(store, a.lease, now=T0 + 1)
    assert complete(store, b.lease, now=T0 + 30)
    assert fail(store, c.lease, now=T0 + 30, retry_delay=None)
    assert stats_by_queue(store, T0 + 30)["q"].done_last_minute == 2
    assert stats_by_queue(store, T0 + 70)["q"].done_last_minute == 1
    assert stats_by_queue(store, T0 + 100)["q"].done_last_minute == 0
    assert stats_by_queue(store, T0 + 100)["q"].done == 2


def test_replace_moving_a_job_later_moves_it_from_due_to_scheduled(store: Store) -> None:
    add(store, key="k")
    assert counts(store, now=T0 + 1) == (1, 0, 0, 0, 0, 0)
    schedule(store, spec(key="k", delay=60), now=T0 + 1)
    assert counts(store, now=T0 + 1) == (0, 1, 0, 0, 0, 0)
    assert counts(store, now=T0 + 61) == (1, 0, 0, 0, 0, 0)


def test_queues_are_counted_apart(store: Store) -> None:
    add(store, queue="a")
    add(store, queue="a")
    add(store, queue="b", delay=9)
    claim_one(store, ["a"])
    assert counts(store, "a") == (1, 0, 1, 0, 0, 0)
    assert counts(store, "b") == (0, 1, 0, 0, 0, 0)


def test_counts_stay_right_through_every_transition(store: Store) -> None:
    def check(now: float, expected: tuple[int, ...]) -> None:
        assert counts(store, now=now) == expected
        pending = store.job_list(JobFilter(queue="q", state=JobState.PENDING))
        due = sum(1 for j in pending if j.run_at <= now)
        assert (due, len(pending) - due) == expected[:2]
        for state, n in zip(
            (JobState.RUNNING, JobState.DONE, JobState.DEAD, JobState.CANCELLED),
            expected[2:],
            strict=True,
        ):
            assert len(store.job_list(JobFilter(queue="q", state=state))) == n, state

    a = add(store)
    b = add(store, delay=50)
    c = add(store, delay=10)
    check(T0, (1, 2, 0, 0, 0, 0))
    check(T0 + 10, (2, 1, 0, 0, 0, 0))
    job_a = claim_one(store, now=T0 + 10)
    assert job_a.id == a
    check(T0 + 10, (1, 1, 1, 0, 0, 0))
    assert store.job_heartbeat([job_a.lease], now=T0 + 10) == [True]
    check(T0 + 10, (1, 1, 1, 0, 0, 0))
    assert fail(store, job_a.lease, now=T0 + 10, retry_delay=100)  # a due at T0+110
    check(T0 + 10, (1, 2, 0, 0, 0, 0))
    job_c = claim_one(store, now=T0 + 11)
    assert job_c.id == c
    check(T0 + 11, (0, 2, 1, 0, 0, 0))
    assert release(store, job_c.lease, now=T0 + 11)
    check(T0 + 11, (1, 2, 0, 0, 0, 0))
    job_c = claim_one(store, now=T0 + 12)
    assert complete(store, job_c.lease, now=T0 + 12)
    check(T0 + 12, (0, 2, 0, 1, 0, 0))
    assert store.job_cancel([b], now=T0 + 13) == [b]
    check(T0 + 13, (0, 1, 0, 1, 0, 1))
    d = add(store, now=T0 + 13, max_attempts=1, lease_seconds=30)
    check(T0 + 13, (1, 1, 0, 1, 0, 1))
    assert claim_one(store, now=T0 + 14).id == d
    check(T0 + 14, (0, 1, 1, 1, 0, 1))
    assert store.job_expire_leases(now=T0 + 45) == [d]
    check(T0 + 45, (0, 1, 0, 1, 1, 1))
    assert store.job_requeue(JobFilter(), now=T0 + 46) == [d]
    check(T0 + 46, (1, 1, 0, 1, 0, 1))
    assert fail(store, claim_one(store, now=T0 + 46).lease, now=T0 + 46)
    check(T0 + 46, (0, 1, 0, 1, 1, 1))
    assert store.job_purge(JobFilter(state=JobState.DEAD)) == 1
    check(T0 + 46, (0, 1, 0, 1, 0, 1))
    assert store.job_prune(retention=10, now=T0 + 100) == 2
    check(T0 + 100, (0, 1, 0, 0, 0, 0))
    check(T0 + 110, (1, 0, 0, 0, 0, 0))
    assert complete(store, claim_one(store, now=T0 + 110).lease, now=T0 + 110)
    check(T0 + 110, (0, 0, 0, 1, 0, 0))
    assert store.job_prune(retention=0, now=T0 + 111) == 1
    assert store.queue_stats(now=T0 + 111) == [
        QueueStats(
            queue="q",
            due=0,
            scheduled=0,
            running=0,
            done=0,
            dead=0,
            cancelled=0,
            oldest_due_age=None,
            done_last_minute=0,
        )
    ], "a queue that had jobs is still listed"
