"""crawl_drop_pending (a crawl's queued jobs dropped in one operation, the crawl finishing
with its on_finish) and crawl_delete (a crawl with its jobs, results and seen set), on
every store. Time moves through ``now=`` only."""

from __future__ import annotations

import pytest
from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    counts,
    crawl_counts,
    crawl_of,
    get,
    ids,
    key_limit,
    new_crawl,
    spec,
)

from crawlq.crawls import CrawlState
from crawlq.exceptions import CrawlNotFound
from crawlq.jobs import JobState
from crawlq.limits import Limits
from crawlq.stores.base import JobFilter, Store

REPORT = spec(queue="reports", task="report")


def reports(store: Store) -> list[int]:
    return ids(store.job_list(JobFilter(queue="reports")))


def test_drop_pending_cancels_the_queued_jobs_and_the_crawl_finishes_after_the_running(
    store: Store,
) -> None:
    c = new_crawl(
        store,
        spec(args=["run"]),
        spec(args=["due"]),
        spec(args=["later"], delay=100),
        spec(args=["host"], limit_key="h"),
        spec(args=["host2"], limit_key="h"),
        on_finish=REPORT,
        limits=Limits(max_running=1, min_interval=0.0),
    )
    outside = add(store, args=["outside"], limit_key="h")
    running = claim_one(store)
    assert running.args == ["run"]
    assert store.crawl_drop_pending(c.id, now=T0 + 5) == 4
    info = crawl_of(store, c.id)
    assert info.state is CrawlState.RUNNING and info.on_finish_job is None
    assert crawl_counts(store, c.id) == (0, 1, 0, 0, 4)
    assert {tuple(j.args) for j in all_jobs(store) if j.state is JobState.CANCELLED} == {
        ("due",),
        ("later",),
        ("host",),
        ("host2",),
    }
    assert key_limit(store, "h", now=T0 + 5).pending == 1  # the outside job only
    assert ids(claim(store, limit=10, now=T0 + 200)) == [outside], "the key's front moved on"
    assert store.crawl_drop_pending(c.id, now=T0 + 6) == 0
    assert complete(store, running.lease, now=T0 + 7)
    info = crawl_of(store, c.id)
    assert (info.state, info.finished_at) == (CrawlState.FINISHED, T0 + 7)
    assert info.on_finish_job is not None and reports(store) == [info.on_finish_job]


def test_drop_pending_with_nothing_running_finishes_the_crawl_at_once(store: Store) -> None:
    c = new_crawl(store, spec(), spec(delay=10), on_finish=REPORT)
    assert store.crawl_drop_pending(c.id, now=T0 + 3) == 2
    info = crawl_of(store, c.id)
    assert (info.state, info.finished_at, info.pending, info.running) == (
        CrawlState.FINISHED,
        T0 + 3,
        0,
        0,
    )
    assert reports(store) == [info.on_finish_job]
    assert store.crawl_drop_pending(c.id, now=T0 + 4) == 0, "a finished crawl: nothing"
    assert reports(store) == [info.on_finish_job], "finished once"


def test_drop_pending_drops_the_held_jobs_of_a_paused_crawl(store: Store) -> None:
    c = new_crawl(store, spec(), spec(), on_finish=REPORT)
    assert store.crawl_pause(c.id, now=T0)
    assert store.crawl_drop_pending(c.id, now=T0 + 1) == 2
    assert crawl_of(store, c.id).state is CrawlState.FINISHED
    assert crawl_counts(store, c.id) == (0, 0, 0, 0, 2)


def test_drop_pending_leaves_closed_and_unknown_crawls_alone(store: Store) -> None:
    c = new_crawl(store, spec(), spec())
    assert store.crawl_cancel(c.id, now=T0)
    before = crawl_of(store, c.id)
    assert store.crawl_drop_pending(c.id, now=T0 + 1) == 0
    assert crawl_of(store, c.id) == before
    assert store.crawl_drop_pending(987654, now=T0) == 0


def test_delete_removes_the_crawl_its_jobs_results_and_seen_set(store: Store) -> None:
    c = new_crawl(
        store,
        spec(args=["run"], limit_key="h"),
        spec(args=["done"]),
        spec(args=["due"], limit_key="h"),
        spec(args=["later"], delay=100),
        on_finish=REPORT,
        limits=Limits(max_running=1, min_interval=0.0),
    )
    other = new_crawl(store, spec(args=["other"]), name="other")
    outside = add(store, args=["outside"], limit_key="h")
    assert store.seen_add(c.id, [b"a" * 16, b"b" * 16], now=T0) == [True, True]
    assert store.result_add(c.id, [(b"k" * 16, '{"url": "a"}')], now=T0) == [True]
    first = claim(store, limit=2, now=T0 + 1)
    assert sorted(tuple(j.args) for j in first) == [("done",), ("run",)]
    done = next(j for j in first if j.args == ["done"])
    running = next(j for j in first if j.args == ["run"])
    assert complete(store, done.lease, now=T0 + 2)
    assert key_limit(store, "h", now=T0 + 2).running == 1

    assert store.crawl_delete(c.id, now=T0 + 3)

    assert store.crawl_get(c.id) is None
    assert store.job_list(JobFilter(crawl=c.id)) == []
    assert [j.args for j in all_jobs(store) if j.queue == "q"] == [["other"], ["outside"]]
    for read in (
        lambda: store.seen_has(c.id, [b"a" * 16]),
        lambda: store.result_list(c.id),
        lambda: store.result_count(c.id),
    ):
        with pytest.raises(CrawlNotFound):
            read()
    assert reports(store) == [], "a deleted crawl runs no on_finish"
    assert not complete(store, running.lease, now=T0 + 4), "its lease is gone"
    key = key_limit(store, "h", now=T0 + 4)
    assert (key.running, key.pending) == (0, 1)
    assert counts(store, now=T0 + 4) == (2, 0, 0, 0, 0, 0), "other and outside are due"
    assert sorted(ids(claim(store, limit=10, now=T0 + 5))) == sorted(
        [outside, *(j.id for j in store.job_list(JobFilter(crawl=other.id)))]
    )
    assert crawl_of(store, other.id).name == "other"
    assert [c.id for c in store.crawl_list()] == [other.id]
    assert not store.crawl_delete(c.id, now=T0 + 6), "already deleted"


def test_delete_a_finished_crawl_and_totals_keep_counting(store: Store) -> None:
    c = new_crawl(store, spec(args=[1]), on_finish=REPORT)
    job = claim_one(store)
    assert complete(store, job.lease, now=T0 + 1)
    assert crawl_of(store, c.id).state is CrawlState.FINISHED
    before = {t.queue: t for t in store.queue_totals()}["q"]
    assert store.crawl_delete(c.id, now=T0 + 2)
    after = {t.queue: t for t in store.queue_totals()}["q"]
    assert (after.enqueued, after.completed) == (before.enqueued, before.completed) == (1, 1)
    assert store.job_get(job.id) is None
    assert get(store, reports(store)[0]).crawl_id is None, "on_finish is outside the crawl"
    assert not store.crawl_delete(12345, now=T0)
