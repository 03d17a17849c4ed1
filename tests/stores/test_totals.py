"""Queue totals (the ``_total`` counters of /metrics): they count what happened, only
grow, and pruning, purging, requeueing, releasing and cancelling do not count."""

from __future__ import annotations

from store_helpers import (
    T0,
    add,
    claim_one,
    complete,
    fail,
    get,
    make_dead,
    release,
    schedule,
    spec,
)

from crawlq.crawls import CrawlSpec
from crawlq.jobs import JobState, QueueTotals
from crawlq.limits import Limits
from crawlq.stores.base import JobFilter, Store


def totals(store: Store) -> dict[str, QueueTotals]:
    return {t.queue: t for t in store.queue_totals()}


def test_no_jobs_no_totals(store: Store) -> None:
    assert store.queue_totals() == []


def test_totals_count_what_happened(store: Store) -> None:
    first = add(store, key="k", max_attempts=3)
    others = [add(store, args=[i]) for i in range(3)]
    # a merge into a live key creates nothing
    schedule(store, spec(key="k", args=["again"], max_attempts=3))
    # completed, with one child (enqueued)
    job = claim_one(store)
    assert job.id == first
    assert fail(store, job.lease, retry_delay=0)  # retried
    job = claim_one(store)
    assert job.id == first
    assert complete(store, job.lease, now=T0 + 1, children=[spec(queue="kids")])
    # released: not counted; then dead on its only attempt
    job = claim_one(store, now=T0 + 1)
    assert release(store, job.lease, now=T0 + 1)
    job = claim_one(store, now=T0 + 1)
    assert fail(store, job.lease, now=T0 + 1)  # max_attempts=3 but no retry: dead
    # an expired lease with attempts left is a retry
    expiring = claim_one(store, now=T0 + 2)
    assert store.job_expire_leases(now=T0 + 1000) == [expiring.id]
    # cancelled: not counted
    assert store.job_cancel([others[2]], now=T0 + 1000) == [others[2]]
    dead = make_dead(store, queue="d", now=T0 + 1000)

    expected = {
        "q": QueueTotals(queue="q", enqueued=4, completed=1, retried=2, dead_lettered=1),
        "kids": QueueTotals(queue="kids", enqueued=1),
        "d": QueueTotals(queue="d", enqueued=1, dead_lettered=1),
    }
    assert totals(store) == expected
    assert expected["q"].failed == 3

    # requeueing, purging and pruning lower nothing and count nothing
    assert store.job_requeue(JobFilter(ids=[dead]), now=T0 + 1001) == [dead]
    assert store.job_cancel([dead], now=T0 + 1001) == [dead]
    assert store.job_purge(JobFilter(state=JobState.DEAD)) == 1
    assert store.job_prune(retention=0, now=T0 + 5000) >= 2
    assert get(store, others[1]).state is JobState.PENDING
    assert totals(store) == expected


def test_a_retry_behind_a_limit_key_counts_once(store: Store) -> None:
    store.limit_set("h", Limits(max_running=1), now=T0)
    job_id = add(store, limit_key="h", max_attempts=2)
    add(store, limit_key="h", args=[2])
    job = claim_one(store)
    assert job.id == job_id
    assert fail(store, job.lease, retry_delay=5)
    assert totals(store)["q"] == QueueTotals(queue="q", enqueued=2, retried=1)


def test_a_retry_into_a_paused_crawl_counts_once(store: Store) -> None:
    c = store.crawl_create(CrawlSpec(name="c"), [spec(max_attempts=2)], now=T0)
    job = claim_one(store)
    assert store.crawl_pause(c.id, now=T0)
    assert fail(store, job.lease, retry_delay=0)
    assert store.crawl_resume(c.id, now=T0)
    assert totals(store)["q"] == QueueTotals(queue="q", enqueued=1, retried=1)
