"""Rescheduling: a pending job moves to a new run_at as a ``replace`` schedule moves it;
running and finished jobs stay as they are; held and limit-held jobs stay held."""

from __future__ import annotations

from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    counts,
    get,
    ids,
    make_dead,
    new_crawl,
    spec,
    stats_by_queue,
)

from crawlq.jobs import JobState
from crawlq.limits import Limits
from crawlq.stores.base import Store


def test_a_scheduled_job_moves_to_now(store: Store) -> None:
    job_id = add(store, delay=1000)
    assert claim(store, now=T0 + 1) == []
    assert store.job_reschedule([job_id], now=T0 + 1) == [job_id]
    job = get(store, job_id)
    assert (job.state, job.run_at, job.attempts) == (JobState.PENDING, T0 + 1, 0)
    assert counts(store, now=T0 + 1)[:2] == (1, 0)
    assert ids(claim(store, now=T0 + 1)) == [job_id]


def test_a_due_job_moves_later_and_is_not_claimed_before(store: Store) -> None:
    job_id = add(store)
    assert store.job_reschedule([job_id], T0 + 500, now=T0 + 1) == [job_id]
    assert get(store, job_id).run_at == T0 + 500
    assert counts(store, now=T0 + 1)[:2] == (0, 1)
    assert claim(store, now=T0 + 499) == []
    assert ids(claim(store, now=T0 + 500)) == [job_id]


def test_claim_order_follows_the_new_run_at(store: Store) -> None:
    first, second, third = (add(store, args=[i], delay=i) for i in range(3))
    assert store.job_reschedule([first], T0 + 50, now=T0) == [first]
    assert store.job_reschedule([third], T0 - 10, now=T0) == [third]
    order = [claim_one(store, now=T0 + 100).id for _ in range(3)]
    assert order == [third, second, first]


def test_running_and_finished_jobs_are_not_moved(store: Store) -> None:
    later = add(store, delay=100)
    running = add(store)
    assert claim_one(store).id == running
    done = add(store, queue="d")
    assert complete(store, claim_one(store, ["d"]).lease)
    dead = make_dead(store, queue="x")
    cancelled = add(store, queue="c")
    assert store.job_cancel([cancelled], now=T0) == [cancelled]
    before = {j.id: j for j in all_jobs(store)}
    answer = store.job_reschedule([dead, 9999, done, running, cancelled, later, later], T0 + 7)
    assert answer == [later]
    for job_id in (running, done, dead, cancelled):
        assert get(store, job_id) == before[job_id]
    assert get(store, later).run_at == T0 + 7


def test_reschedule_nothing(store: Store) -> None:
    assert store.job_reschedule([], now=T0) == []
    assert store.job_reschedule([42], T0, now=T0) == []


def test_a_limit_held_job_stays_behind_its_key(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    first = add(store, limit_key="k")
    waiting = add(store, limit_key="k", args=[2], delay=100)
    assert ids(claim(store, limit=10)) == [first]
    assert store.job_reschedule([waiting], now=T0 + 1) == [waiting]
    assert get(store, waiting).run_at == T0 + 1
    assert claim(store, limit=10, now=T0 + 2) == []  # the key is at its cap
    s = stats_by_queue(store, T0 + 2)["q"]
    assert (s.due, s.scheduled, s.running) == (0, 0, 1)
    assert complete(store, get(store, first).lease, now=T0 + 3)
    assert ids(claim(store, limit=10, now=T0 + 3)) == [waiting]


def test_a_keys_front_moved_later_lets_the_next_job_go_first(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    front = add(store, limit_key="k", args=[1])
    other = add(store, limit_key="k", args=[2], delay=5)
    assert store.job_reschedule([front], T0 + 50, now=T0) == [front]
    assert claim(store, limit=10, now=T0 + 1) == []
    assert ids(claim(store, limit=10, now=T0 + 5)) == [other]
    assert complete(store, get(store, other).lease, now=T0 + 6)
    assert claim(store, limit=10, now=T0 + 49) == []
    assert ids(claim(store, limit=10, now=T0 + 50)) == [front]


def test_a_min_interval_still_spaces_a_moved_job(store: Store) -> None:
    store.limit_set("k", Limits(min_interval=10), now=T0)
    first = add(store, limit_key="k")
    second = add(store, limit_key="k", args=[2], delay=100)
    assert ids(claim(store, limit=10, now=T0)) == [first]
    assert store.job_reschedule([second], now=T0 + 1) == [second]
    assert claim(store, limit=10, now=T0 + 9) == []
    assert ids(claim(store, limit=10, now=T0 + 10)) == [second]


def test_a_job_of_a_paused_crawl_stays_held(store: Store) -> None:
    c = new_crawl(store, spec(delay=1000))
    [job] = [j for j in all_jobs(store) if j.crawl_id == c.id]
    assert store.crawl_pause(c.id, now=T0)
    assert store.job_reschedule([job.id], now=T0 + 1) == [job.id]
    assert get(store, job.id).run_at == T0 + 1
    assert claim(store, limit=10, now=T0 + 2) == []
    assert stats_by_queue(store, T0 + 2)["q"].held == 1
    assert store.crawl_resume(c.id, now=T0 + 3)
    assert ids(claim(store, limit=10, now=T0 + 3)) == [job.id]
