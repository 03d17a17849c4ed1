"""Crawls: counters, children joining the crawl with their parent's completion, finishing
exactly once (with ``on_finish``), closed crawls, pause / resume / cancel, listing, requeue
and pruning. Time moves through ``now=`` only."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    crawl_counts,
    crawl_of,
    fail,
    get,
    ids,
    key_limit,
    new_crawl,
    release,
    schedule,
    spec,
    stats_by_queue,
    worker,
)

from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState
from crawlq.exceptions import CrawlClosed, CrawlNotFound
from crawlq.jobs import JobState, Outcome
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Completion, JobFilter, Store
from crawlq.types import JobId

REPORT = spec(queue="reports", task="report", kwargs={"format": "csv"})
"""An on_finish spec, in a queue of its own."""


def in_crawl(crawl: CrawlInfo | int, **fields: Any) -> Any:
    """A spec of the crawl (queue "q")."""
    crawl_id = crawl if isinstance(crawl, int) else crawl.id
    return spec(crawl=crawl_id, **fields)


def add_to(store: Store, crawl: CrawlInfo | int, now: float = T0, **fields: Any) -> JobId:
    [result] = schedule(store, in_crawl(crawl, **fields), now=now)
    assert result.outcome is Outcome.CREATED
    return result.job_id


def reports(store: Store) -> list[JobId]:
    return ids(store.job_list(JobFilter(queue="reports")))


def assert_finished_once(store: Store, crawl_id: int, at: float) -> None:
    c = crawl_of(store, crawl_id)
    assert (c.state, c.finished_at, c.pending, c.running) == (CrawlState.FINISHED, at, 0, 0)
    assert c.on_finish_job is not None
    assert reports(store) == [c.on_finish_job], "on_finish scheduled exactly once"


def assert_open(store: Store, crawl_id: int) -> None:
    c = crawl_of(store, crawl_id)
    assert c.state in (CrawlState.RUNNING, CrawlState.PAUSED), c
    assert (c.finished_at, c.on_finish_job) == (None, None)
    assert reports(store) == []


# -- create, counters, crawl_id ------------------------------------------------------------


def test_create_schedules_the_start_jobs_into_a_new_running_crawl(store: Store) -> None:
    info = new_crawl(
        store,
        spec(args=[1]),
        spec(args=[2], delay=10),
        spec(queue="other", args=[3], crawl=12345),  # its crawl field is replaced
        name="books",
        meta={"site": "example.com", "depth": 2},
        now=T0 + 1,
    )
    assert info.id > 0
    assert info == CrawlInfo(
        id=info.id,
        name="books",
        meta={"site": "example.com", "depth": 2},
        state=CrawlState.RUNNING,
        pending=3,
        running=0,
        done=0,
        dead=0,
        cancelled=0,
        seen=0,
        created_at=T0 + 1,
        finished_at=None,
        on_finish_job=None,
        limits=None,
    )
    assert store.crawl_get(info.id) == info
    jobs = all_jobs(store)
    assert [(j.args, j.crawl_id, j.state) for j in jobs] == [
        ([1], info.id, JobState.PENDING),
        ([2], info.id, JobState.PENDING),
        ([3], info.id, JobState.PENDING),
    ]
    assert [j.run_at for j in jobs] == [T0 + 1, T0 + 11, T0 + 1]


def test_crawl_ids_are_positive_and_increasing(store: Store) -> None:
    made = [new_crawl(store, spec(), name=f"c{i}").id for i in range(3)]
    made.append(new_crawl(store, name="empty").id)  # finishes at once: still a new id
    made.append(new_crawl(store, spec(), name="last").id)
    assert made[0] > 0
    assert made == sorted(set(made)), made


def test_create_keeps_limits_and_on_finish_is_not_scheduled_yet(store: Store) -> None:
    info = new_crawl(
        store, spec(), on_finish=REPORT, limits=Limits(max_running=2, min_interval=1.5)
    )
    assert info.limits == Limits(max_running=2, min_interval=1.5)
    assert crawl_of(store, info.id).limits == Limits(max_running=2, min_interval=1.5)
    assert info.on_finish_job is None
    assert reports(store) == []


def test_unknown_crawl_is_none(store: Store) -> None:
    assert store.crawl_get(1) is None
    c = new_crawl(store, spec())
    assert store.crawl_get(c.id + 1000) is None


def test_jobs_carry_their_crawl_and_move_its_counters(store: Store) -> None:
    c = new_crawl(store, spec(args=["start"]))
    outside = add(store, args=["outside"])
    inside = add_to(store, c, args=["inside"], delay=5)
    assert get(store, outside).crawl_id is None
    assert get(store, inside).crawl_id == c.id
    assert crawl_counts(store, c.id) == (2, 0, 0, 0, 0)
    first = claim_one(store)
    assert first.crawl_id == c.id and first.args == ["start"]
    assert crawl_counts(store, c.id) == (1, 1, 0, 0, 0)
    assert claim_one(store).id == outside
    assert crawl_counts(store, c.id) == (1, 1, 0, 0, 0), "a job outside the crawl"
    assert complete(store, first.lease, now=T0 + 1)
    assert crawl_counts(store, c.id) == (1, 0, 1, 0, 0)
    assert_open(store, c.id)


# -- children -----------------------------------------------------------------------------


def test_children_of_a_completion_join_the_crawl(store: Store) -> None:
    c = new_crawl(store, spec(args=["root"]))
    root = claim_one(store)
    kids = [in_crawl(c, queue="kids", args=[i]) for i in range(3)]
    assert complete(store, root.lease, now=T0 + 1, children=kids)
    listed = store.job_list(JobFilter(queue="kids"))
    assert [(k.args, k.crawl_id, k.state) for k in listed] == [
        ([i], c.id, JobState.PENDING) for i in range(3)
    ]
    assert crawl_counts(store, c.id) == (3, 0, 1, 0, 0)
    assert_open(store, c.id)


def test_children_of_a_stale_lease_add_nothing_to_the_crawl(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=5))
    job = claim_one(store)
    assert release(store, job.lease, now=T0 + 1)
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)
    assert not complete(store, job.lease, now=T0 + 2, children=[in_crawl(c, queue="kids")])
    assert store.job_list(JobFilter(queue="kids")) == []
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)
    again = claim_one(store, now=T0 + 3)
    assert again.id == job.id
    # the new lease works and the old one still does not
    assert not complete(store, job.lease, now=T0 + 4, children=[in_crawl(c, queue="kids")])
    assert complete(store, again.lease, now=T0 + 4, children=[in_crawl(c, queue="kids")])
    assert len(store.job_list(JobFilter(queue="kids"))) == 1
    assert crawl_counts(store, c.id) == (1, 0, 1, 0, 0)


# -- finishing -----------------------------------------------------------------------------


def test_the_crawl_finishes_when_its_last_job_completes(store: Store) -> None:
    c = new_crawl(store, spec(args=[1]), spec(args=[2]), on_finish=REPORT)
    a, b = claim(store, limit=2)
    assert complete(store, a.lease, now=T0 + 1)
    assert_open(store, c.id)
    assert crawl_counts(store, c.id) == (0, 1, 1, 0, 0)
    assert complete(store, b.lease, now=T0 + 2)
    assert_finished_once(store, c.id, T0 + 2)
    assert crawl_counts(store, c.id) == (0, 0, 2, 0, 0)


def test_on_finish_is_scheduled_outside_the_crawl_with_crawl_id(store: Store) -> None:
    on_finish = spec(
        queue="reports", task="report", args=["x"], kwargs={"format": "csv"}, priority=3
    )
    c = new_crawl(store, spec(), on_finish=on_finish)
    assert complete(store, claim_one(store).lease, now=T0 + 7)
    info = crawl_of(store, c.id)
    assert info.on_finish_job is not None
    job = get(store, info.on_finish_job)
    assert (job.queue, job.task, job.args, job.priority) == ("reports", "report", ["x"], 3)
    assert job.kwargs == {"format": "csv", "crawl_id": c.id}
    assert job.crawl_id is None
    assert (job.state, job.created_at, job.run_at) == (JobState.PENDING, T0 + 7, T0 + 7)
    assert crawl_counts(store, c.id) == (0, 0, 1, 0, 0), "on_finish is not counted in it"
    # it runs like any job, and its end does not touch the finished crawl
    assert claim_one(store, ["reports"], now=T0 + 8).id == job.id
    assert complete(store, get(store, job.id).lease, now=T0 + 9)
    assert crawl_of(store, c.id) == info


def test_a_crawl_without_on_finish_finishes_with_no_job(store: Store) -> None:
    c = new_crawl(store, spec())
    assert complete(store, claim_one(store).lease, now=T0 + 1)
    info = crawl_of(store, c.id)
    assert (info.state, info.finished_at, info.on_finish_job) == (
        CrawlState.FINISHED,
        T0 + 1,
        None,
    )
    assert len(all_jobs(store)) == 1


def test_children_keep_the_crawl_open_until_they_end(store: Store) -> None:
    c = new_crawl(store, spec(args=["root"]), on_finish=REPORT)
    root = claim_one(store)
    assert complete(store, root.lease, now=T0 + 1, children=[in_crawl(c, args=["kid"])])
    assert_open(store, c.id)
    kid = claim_one(store, now=T0 + 2)
    assert kid.args == ["kid"]
    assert_open(store, c.id)
    assert complete(
        store, kid.lease, now=T0 + 3, children=[in_crawl(c, args=["grandkid"], delay=100)]
    )
    assert_open(store, c.id)
    assert claim(store, now=T0 + 50) == []
    grandkid = claim_one(store, now=T0 + 103)
    assert complete(store, grandkid.lease, now=T0 + 104)
    assert_finished_once(store, c.id, T0 + 104)
    assert crawl_counts(store, c.id) == (0, 0, 3, 0, 0)


def test_a_deferred_follow_up_of_the_last_job_keeps_the_crawl_open(store: Store) -> None:
    c = new_crawl(store, spec(key="page", args=["v1"]), on_finish=REPORT)
    first = claim_one(store)
    [result] = schedule(store, in_crawl(c, key="page", args=["v2"]), now=T0 + 1)
    assert result.outcome is Outcome.DEFERRED
    assert complete(store, first.lease, now=T0 + 2)
    assert_open(store, c.id)
    [follow_up] = store.job_list(JobFilter(state=JobState.PENDING, queue="q"))
    assert (follow_up.args, follow_up.crawl_id) == (["v2"], c.id)
    assert crawl_counts(store, c.id) == (1, 0, 1, 0, 0)
    assert complete(store, claim_one(store, now=T0 + 3).lease, now=T0 + 4)
    assert_finished_once(store, c.id, T0 + 4)


def test_a_retried_last_job_keeps_the_crawl_open_until_the_retry_ends(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=3), on_finish=REPORT)
    job = claim_one(store)
    assert fail(store, job.lease, now=T0 + 1, retry_delay=10)
    assert_open(store, c.id)
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)
    again = claim_one(store, now=T0 + 11)
    assert again.id == job.id
    assert_open(store, c.id)
    assert complete(store, again.lease, now=T0 + 12)
    assert_finished_once(store, c.id, T0 + 12)
    assert crawl_counts(store, c.id) == (0, 0, 1, 0, 0)


def test_a_crawl_with_dead_jobs_still_finishes_with_its_dead_count(store: Store) -> None:
    c = new_crawl(store, spec(args=[1]), spec(args=[2]), spec(args=[3]), on_finish=REPORT)
    a, b, d = claim(store, limit=3)
    assert fail(store, a.lease, now=T0 + 1, retry_delay=None)
    assert complete(store, b.lease, now=T0 + 2)
    assert_open(store, c.id)
    assert fail(store, d.lease, now=T0 + 3, retry_delay=None, reason="discarded")
    assert_finished_once(store, c.id, T0 + 3)
    assert crawl_counts(store, c.id) == (0, 0, 1, 2, 0)


def test_an_expired_lease_finishes_the_crawl_when_it_was_the_last_job(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=2, lease_seconds=10), on_finish=REPORT)
    job = claim_one(store)
    assert store.job_expire_leases(now=T0 + 11) == [job.id]
    # attempts were left: pending again, the crawl stays open
    assert_open(store, c.id)
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)
    again = claim_one(store, now=T0 + 12)
    assert store.job_expire_leases(now=T0 + 23) == [again.id]
    assert get(store, again.id).state is JobState.DEAD
    assert_finished_once(store, c.id, T0 + 23)
    assert crawl_counts(store, c.id) == (0, 0, 0, 1, 0)


def test_a_reaped_worker_finishes_the_crawl_when_it_held_the_last_job(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=1, lease_seconds=300), on_finish=REPORT)
    store.worker_register(worker("w1"), now=T0)
    job = claim_one(store, worker="w1")
    assert store.worker_reap(dead_after=30, now=T0 + 31) == ["w1"]
    assert get(store, job.id).state is JobState.DEAD
    assert_finished_once(store, c.id, T0 + 31)
    assert crawl_counts(store, c.id) == (0, 0, 0, 1, 0)


def test_a_reaped_job_with_attempts_left_keeps_the_crawl_open(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=3, lease_seconds=300), on_finish=REPORT)
    store.worker_register(worker("w1"), now=T0)
    job = claim_one(store, worker="w1")
    assert store.worker_reap(dead_after=30, now=T0 + 31) == ["w1"]
    assert get(store, job.id).state is JobState.PENDING
    assert_open(store, c.id)
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)


def test_cancelling_the_last_pending_job_finishes_the_crawl(store: Store) -> None:
    c = new_crawl(store, spec(args=[1]), spec(args=[2], delay=100), on_finish=REPORT)
    job = claim_one(store)
    assert complete(store, job.lease, now=T0 + 1)
    assert_open(store, c.id)
    [later] = store.job_list(JobFilter(state=JobState.PENDING))
    assert store.job_cancel([later.id], now=T0 + 2) == [later.id]
    assert_finished_once(store, c.id, T0 + 2)
    assert crawl_counts(store, c.id) == (0, 0, 1, 0, 1)


def test_cancelling_the_last_running_job_finishes_the_crawl(store: Store) -> None:
    c = new_crawl(store, spec(), on_finish=REPORT)
    job = claim_one(store)
    assert store.job_cancel([job.id], now=T0 + 2) == [job.id]
    assert_finished_once(store, c.id, T0 + 2)
    assert crawl_counts(store, c.id) == (0, 0, 0, 0, 1)


def test_a_crawl_finishes_once_and_nothing_reopens_it(store: Store) -> None:
    c = new_crawl(store, spec(), on_finish=REPORT)
    assert complete(store, claim_one(store).lease, now=T0 + 1)
    assert_finished_once(store, c.id, T0 + 1)
    info = crawl_of(store, c.id)
    # later writes that could finish a crawl touch nothing of it
    assert store.job_expire_leases(now=T0 + 1000) == []
    assert store.worker_reap(dead_after=1, now=T0 + 1000) == []
    assert crawl_of(store, c.id) == info
    assert reports(store) == [info.on_finish_job]


def test_an_empty_crawl_finishes_at_once(store: Store) -> None:
    info = new_crawl(store, on_finish=REPORT, now=T0 + 5)
    assert info.state is CrawlState.FINISHED
    assert info.finished_at == T0 + 5
    assert info.on_finish_job is not None
    assert crawl_of(store, info.id) == info
    job = get(store, info.on_finish_job)
    assert job.kwargs == {"format": "csv", "crawl_id": info.id}
    assert (job.crawl_id, job.created_at) == (None, T0 + 5)
    assert reports(store) == [info.on_finish_job]


def test_the_finish_of_several_crawls_in_one_completion_batch(store: Store) -> None:
    a = new_crawl(store, spec(args=["a"]), on_finish=REPORT, name="a")
    b = new_crawl(store, spec(args=["b"]), on_finish=REPORT, name="b")
    ja, jb = claim(store, limit=2)
    answers = store.job_complete(
        [Completion(lease=ja.lease), Completion(lease=jb.lease)], now=T0 + 1
    )
    assert answers == [True, True]
    fa, fb = crawl_of(store, a.id), crawl_of(store, b.id)
    assert fa.state is CrawlState.FINISHED and fb.state is CrawlState.FINISHED
    assert fa.on_finish_job is not None and fb.on_finish_job is not None
    assert sorted(reports(store)) == sorted([fa.on_finish_job, fb.on_finish_job])
    assert get(store, fa.on_finish_job).kwargs["crawl_id"] == a.id
    assert get(store, fb.on_finish_job).kwargs["crawl_id"] == b.id


# -- scheduling into unknown and closed crawls ---------------------------------------------


def test_scheduling_into_an_unknown_crawl_raises_and_writes_nothing(store: Store) -> None:
    with pytest.raises(CrawlNotFound):
        schedule(store, spec(args=["fine"]), spec(crawl=4242))
    assert all_jobs(store) == []
    c = new_crawl(store, spec())
    with pytest.raises(CrawlNotFound):
        schedule(store, in_crawl(c, args=["fine"]), spec(crawl=c.id + 1000))
    assert len(all_jobs(store)) == 1
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)


@pytest.mark.parametrize("how", ["finished", "cancelled"])
def test_scheduling_into_a_closed_crawl_raises_and_writes_nothing(store: Store, how: str) -> None:
    closed = new_crawl(store, spec(), name="closed")
    open_ = new_crawl(store, spec(queue="other"), name="open")
    if how == "finished":
        assert complete(store, claim_one(store).lease, now=T0 + 1)
    else:
        assert store.crawl_cancel(closed.id, now=T0 + 1)
    before_jobs = all_jobs(store)
    before = crawl_of(store, closed.id)
    with pytest.raises(CrawlClosed):
        schedule(store, spec(args=["free"]), in_crawl(open_), in_crawl(closed), now=T0 + 2)
    assert all_jobs(store) == before_jobs
    assert crawl_of(store, closed.id) == before
    assert crawl_counts(store, open_.id) == (1, 0, 0, 0, 0)


def test_children_into_a_cancelled_crawl_are_dropped_and_the_completion_holds(
    store: Store,
) -> None:
    c = new_crawl(store, spec(args=["running"]), spec(args=["pending"]), on_finish=REPORT)
    running = claim_one(store)
    assert store.crawl_cancel(c.id, now=T0 + 1)
    assert complete(
        store, running.lease, now=T0 + 2, children=[in_crawl(c, queue="kids", args=[1])]
    )
    assert get(store, running.id).state is JobState.DONE
    assert store.job_list(JobFilter(queue="kids")) == []
    info = crawl_of(store, c.id)
    assert (info.state, info.finished_at, info.on_finish_job) == (
        CrawlState.CANCELLED,
        T0 + 1,
        None,
    )
    assert crawl_counts(store, c.id) == (0, 0, 1, 0, 1)
    assert reports(store) == []


def test_children_into_a_finished_crawl_are_dropped_others_kept(store: Store) -> None:
    done = new_crawl(store, spec(args=["only"]), name="done")
    assert complete(store, claim_one(store).lease, now=T0 + 1)
    assert crawl_of(store, done.id).state is CrawlState.FINISHED
    live = new_crawl(store, spec(args=["parent"]), spec(args=["other"]), name="live")
    parent = claim_one(store, now=T0 + 2)
    kids = [
        in_crawl(done, queue="kids", args=["dropped"]),
        in_crawl(live, queue="kids", args=["kept"]),
        spec(queue="kids", args=["outside"]),
    ]
    assert complete(store, parent.lease, now=T0 + 3, children=kids)
    listed = store.job_list(JobFilter(queue="kids"))
    assert [(k.args, k.crawl_id) for k in listed] == [(["kept"], live.id), (["outside"], None)]
    assert crawl_counts(store, done.id) == (0, 0, 1, 0, 0)
    assert crawl_counts(store, live.id) == (2, 0, 1, 0, 0)


# -- pause / resume ------------------------------------------------------------------------


def test_pause_holds_pending_jobs(store: Store) -> None:
    c = new_crawl(store, spec(args=[1]), spec(args=[2], delay=10), spec(args=[3], priority=5))
    outside = add(store, args=["outside"])
    assert store.crawl_pause(c.id, now=T0 + 1)
    info = crawl_of(store, c.id)
    assert info.state is CrawlState.PAUSED
    assert (info.pending, info.running, info.finished_at) == (3, 0, None)
    crawl_jobs = [j for j in all_jobs(store) if j.crawl_id == c.id]
    assert [j.state for j in crawl_jobs] == [JobState.PENDING] * 3
    assert len(store.job_list(JobFilter(state=JobState.PENDING))) == 4
    s = stats_by_queue(store, T0 + 1)["q"]
    assert (s.due, s.scheduled, s.waiting, s.held, s.pending) == (1, 0, 0, 3, 4)
    assert ids(claim(store, limit=10, now=T0 + 100)) == [outside]
    assert claim(store, limit=10, now=T0 + 1000) == []


def test_a_job_scheduled_into_a_paused_crawl_is_held(store: Store) -> None:
    c = new_crawl(store, spec(delay=1000))
    assert store.crawl_pause(c.id, now=T0)
    job_id = add_to(store, c, now=T0 + 1, args=["new"])
    assert get(store, job_id).state is JobState.PENDING
    assert crawl_counts(store, c.id) == (2, 0, 0, 0, 0)
    assert claim(store, limit=10, now=T0 + 2) == []
    assert stats_by_queue(store, T0 + 2)["q"].held == 2


def test_a_running_job_of_a_paused_crawl_completes_and_its_children_are_held(
    store: Store,
) -> None:
    c = new_crawl(store, spec(args=["parent"]), on_finish=REPORT)
    parent = claim_one(store)
    assert store.crawl_pause(c.id, now=T0 + 1)
    assert complete(store, parent.lease, now=T0 + 2, children=[in_crawl(c, args=["kid"])])
    assert get(store, parent.id).state is JobState.DONE
    assert crawl_counts(store, c.id) == (1, 0, 1, 0, 0)
    assert crawl_of(store, c.id).state is CrawlState.PAUSED
    assert claim(store, limit=10, now=T0 + 3) == []
    assert stats_by_queue(store, T0 + 3)["q"].held == 1
    assert store.crawl_resume(c.id, now=T0 + 4)
    kid = claim_one(store, now=T0 + 4)
    assert kid.args == ["kid"]
    assert complete(store, kid.lease, now=T0 + 5)
    assert_finished_once(store, c.id, T0 + 5)


def test_a_paused_crawl_finishes_when_its_last_running_job_ends(store: Store) -> None:
    c = new_crawl(store, spec(), on_finish=REPORT)
    job = claim_one(store)
    assert store.crawl_pause(c.id, now=T0 + 1)
    assert complete(store, job.lease, now=T0 + 2)
    assert_finished_once(store, c.id, T0 + 2)
    assert not store.crawl_resume(c.id, now=T0 + 3)


def test_resume_makes_held_jobs_claimable_with_their_own_run_at(store: Store) -> None:
    c = new_crawl(
        store,
        spec(args=["low"], run_at=T0 - 5),
        spec(args=["later"], run_at=T0 + 50),
        spec(args=["high"], priority=5, run_at=T0),
    )
    assert store.crawl_pause(c.id, now=T0)
    assert claim(store, limit=10, now=T0 + 10) == []
    assert store.crawl_resume(c.id, now=T0 + 10)
    assert crawl_of(store, c.id).state is CrawlState.RUNNING
    s = stats_by_queue(store, T0 + 10)["q"]
    assert (s.due, s.scheduled, s.held) == (2, 1, 0)
    assert [j.args for j in claim(store, limit=10, now=T0 + 10)] == [["high"], ["low"]]
    assert claim(store, limit=10, now=T0 + 49) == []
    later = claim_one(store, now=T0 + 50)
    assert (later.args, later.run_at) == (["later"], T0 + 50)


def test_pause_and_resume_keep_limit_keys(store: Store) -> None:
    """A key whose front is held gets a new front from outside the crawl."""
    store.limit_set("host", Limits(max_running=1), now=T0)
    c = new_crawl(store, spec(args=["in"], limit_key="host"))
    outside = add(store, args=["out"], limit_key="host")
    assert store.crawl_pause(c.id, now=T0)
    assert key_limit(store, "host").pending == 2
    job = claim_one(store, now=T0 + 1)
    assert job.id == outside
    assert claim(store, limit=10, now=T0 + 2) == []
    assert store.crawl_resume(c.id, now=T0 + 2)
    assert claim(store, limit=10, now=T0 + 3) == [], "the key is at max_running"
    assert complete(store, job.lease, now=T0 + 4)
    inside = claim_one(store, now=T0 + 5)
    assert (inside.args, inside.limit_key, inside.crawl_id) == (["in"], "host", c.id)


def test_pause_resume_and_cancel_answer_false_in_the_wrong_state(store: Store) -> None:
    c = new_crawl(store, spec(), spec())
    assert not store.crawl_resume(c.id, now=T0), "running, not paused"
    assert crawl_of(store, c.id).state is CrawlState.RUNNING
    assert store.crawl_pause(c.id, now=T0)
    paused = crawl_of(store, c.id)
    assert not store.crawl_pause(c.id, now=T0 + 1), "already paused"
    assert crawl_of(store, c.id) == paused
    assert store.crawl_resume(c.id, now=T0 + 2)
    assert store.crawl_cancel(c.id, now=T0 + 3)
    cancelled = crawl_of(store, c.id)
    assert not store.crawl_pause(c.id, now=T0 + 4)
    assert not store.crawl_resume(c.id, now=T0 + 4)
    assert not store.crawl_cancel(c.id, now=T0 + 4)
    assert crawl_of(store, c.id) == cancelled
    finished = new_crawl(store, name="empty")
    assert finished.state is CrawlState.FINISHED
    assert not store.crawl_pause(finished.id, now=T0 + 5)
    assert not store.crawl_resume(finished.id, now=T0 + 5)
    assert not store.crawl_cancel(finished.id, now=T0 + 5)
    assert crawl_of(store, finished.id) == finished


# -- cancel --------------------------------------------------------------------------------


def test_cancel_cancels_pending_jobs_and_lets_running_ones_finish(store: Store) -> None:
    c = new_crawl(
        store,
        spec(args=["run"]),
        spec(args=["due"]),
        spec(args=["later"], delay=100),
        on_finish=REPORT,
    )
    outside = add(store, args=["outside"])
    running = claim_one(store)
    assert running.args == ["run"]
    assert store.crawl_cancel(c.id, now=T0 + 5)
    info = crawl_of(store, c.id)
    assert (info.state, info.finished_at, info.on_finish_job) == (
        CrawlState.CANCELLED,
        T0 + 5,
        None,
    )
    assert crawl_counts(store, c.id) == (0, 1, 0, 0, 2)
    by_args = {tuple(j.args): j for j in all_jobs(store)}
    for name in ("due", "later"):
        assert by_args[(name,)].state is JobState.CANCELLED
        assert by_args[(name,)].finished_at == T0 + 5
    assert get(store, running.id).state is JobState.RUNNING
    assert ids(claim(store, limit=10, now=T0 + 200)) == [outside]
    assert complete(store, running.lease, now=T0 + 6)
    assert get(store, running.id).state is JobState.DONE
    info = crawl_of(store, c.id)
    assert (info.state, info.finished_at, info.on_finish_job) == (
        CrawlState.CANCELLED,
        T0 + 5,
        None,
    )
    assert crawl_counts(store, c.id) == (0, 0, 1, 0, 2)
    assert reports(store) == []


def test_cancel_a_paused_crawl_cancels_its_held_jobs(store: Store) -> None:
    c = new_crawl(store, spec(), spec(delay=10), on_finish=REPORT)
    assert store.crawl_pause(c.id, now=T0)
    assert store.crawl_cancel(c.id, now=T0 + 1)
    assert [j.state for j in all_jobs(store)] == [JobState.CANCELLED] * 2
    assert crawl_counts(store, c.id) == (0, 0, 0, 0, 2)
    s = stats_by_queue(store, T0 + 1)["q"]
    assert (s.due, s.scheduled, s.waiting, s.held, s.cancelled) == (0, 0, 0, 0, 2)
    assert reports(store) == []


def test_cancel_hands_a_limit_key_to_jobs_outside_the_crawl(store: Store) -> None:
    store.limit_set("host", Limits(max_running=1), now=T0)
    c = new_crawl(store, spec(args=["in"], limit_key="host"))
    outside = add(store, args=["out"], limit_key="host")
    assert store.crawl_cancel(c.id, now=T0)
    assert key_limit(store, "host").pending == 1
    assert claim_one(store, now=T0 + 1).id == outside


def test_a_failed_running_job_of_a_cancelled_crawl_counts_dead(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=3))
    job = claim_one(store)
    assert store.crawl_cancel(c.id, now=T0 + 1)
    assert fail(store, job.lease, now=T0 + 2, retry_delay=None)
    assert crawl_counts(store, c.id) == (0, 0, 0, 1, 0)
    assert crawl_of(store, c.id).state is CrawlState.CANCELLED


# -- listing --------------------------------------------------------------------------------


def test_crawl_list_filters_by_state_and_pages_by_id(store: Store) -> None:
    running = new_crawl(store, spec(), name="running").id
    finished = new_crawl(store, name="finished").id
    paused = new_crawl(store, spec(), name="paused").id
    assert store.crawl_pause(paused, now=T0)
    cancelled = new_crawl(store, spec(), name="cancelled").id
    assert store.crawl_cancel(cancelled, now=T0)
    running2 = new_crawl(store, spec(), name="running2").id
    everything = [running, finished, paused, cancelled, running2]

    def listed(**kw: Any) -> list[int]:
        return [c.id for c in store.crawl_list(**kw)]

    assert listed() == everything
    assert listed(state=CrawlState.RUNNING) == [running, running2]
    assert listed(state=CrawlState.FINISHED) == [finished]
    assert listed(state=CrawlState.PAUSED) == [paused]
    assert listed(state=CrawlState.CANCELLED) == [cancelled]
    assert listed(limit=2) == everything[:2]
    assert listed(after_id=finished) == everything[2:]
    assert listed(after_id=finished, limit=2) == everything[2:4]
    assert listed(after_id=running2) == []
    assert listed(state=CrawlState.RUNNING, after_id=running) == [running2]
    assert store.crawl_list() == [crawl_of(store, i) for i in everything]


def test_crawl_list_of_an_empty_store_is_empty(store: Store) -> None:
    assert store.crawl_list() == []


# -- requeue and pruning -------------------------------------------------------------------


def test_requeue_of_a_dead_job_of_an_open_crawl_counts_it_pending_again(store: Store) -> None:
    c = new_crawl(store, spec(args=["dies"], max_attempts=1), spec(args=["later"], delay=100))
    job = claim_one(store)
    assert fail(store, job.lease, now=T0 + 1, retry_delay=None)
    assert crawl_counts(store, c.id) == (1, 0, 0, 1, 0)
    assert store.job_requeue(JobFilter(ids=[job.id]), now=T0 + 2) == [job.id]
    assert get(store, job.id).state is JobState.PENDING
    assert crawl_counts(store, c.id) == (2, 0, 0, 0, 0)
    again = claim_one(store, now=T0 + 2)
    assert (again.id, again.crawl_id) == (job.id, c.id)
    assert complete(store, again.lease, now=T0 + 3)
    assert crawl_counts(store, c.id) == (1, 0, 1, 0, 0)


def test_requeue_leaves_a_dead_job_of_a_closed_crawl_dead(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=1), on_finish=REPORT)
    job = claim_one(store)
    assert fail(store, job.lease, now=T0 + 1, retry_delay=None)
    assert_finished_once(store, c.id, T0 + 1)
    info = crawl_of(store, c.id)
    plain = add(store, args=["plain"])
    plain_job = claim_one(store, now=T0 + 2)
    assert plain_job.id == plain
    assert fail(store, plain_job.lease, now=T0 + 2, retry_delay=None)
    assert store.job_requeue(JobFilter(state=JobState.DEAD), now=T0 + 3) == [plain]
    assert get(store, job.id).state is JobState.DEAD
    assert crawl_of(store, c.id) == info


def test_requeue_leaves_a_dead_job_of_a_cancelled_crawl_dead(store: Store) -> None:
    c = new_crawl(store, spec(max_attempts=1), spec(delay=100))
    job = claim_one(store)
    assert fail(store, job.lease, now=T0 + 1, retry_delay=None)
    assert store.crawl_cancel(c.id, now=T0 + 2)
    info = crawl_of(store, c.id)
    assert store.job_requeue(JobFilter(ids=[job.id]), now=T0 + 3) == []
    assert get(store, job.id).state is JobState.DEAD
    assert crawl_of(store, c.id) == info


def test_pruning_and_purging_do_not_change_counters(store: Store) -> None:
    c = new_crawl(
        store,
        spec(args=["done"]),
        spec(args=["dead"], max_attempts=1),
        spec(args=["cancelled"], delay=50),
        spec(args=["open"], delay=100),
    )
    done, dead = claim(store, limit=2)
    assert complete(store, done.lease, now=T0 + 1)
    assert fail(store, dead.lease, now=T0 + 1, retry_delay=None)
    [cancelled] = [j.id for j in all_jobs(store) if j.args == ["cancelled"]]
    assert store.job_cancel([cancelled], now=T0 + 1) == [cancelled]
    before = crawl_of(store, c.id)
    assert crawl_counts(store, c.id) == (1, 0, 1, 1, 1)
    assert store.job_prune(retention=10, now=T0 + 20) == 2
    assert store.job_purge(JobFilter(state=JobState.DEAD)) == 1
    assert [j.args for j in all_jobs(store)] == [["open"]]
    assert crawl_of(store, c.id) == before


# -- concurrency -------------------------------------------------------------------------------


def test_concurrent_completions_finish_each_crawl_exactly_once(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    """Real time here: four store objects complete the jobs of 20 crawls at once."""
    made = [
        store.crawl_create(
            CrawlSpec(name=f"c{i}", on_finish=REPORT), [spec(args=[i, n]) for n in range(3)]
        ).id
        for i in range(20)
    ]
    stores = [store, *(open_same_store() for _ in range(3))]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def work(index: int) -> None:
        s = stores[index]
        try:
            barrier.wait()
            while jobs := s.job_claim(ClaimParams(queues=["q"], worker_id=f"w{index}")):
                assert s.job_complete([Completion(lease=j.lease) for j in jobs]) == [True]
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    finished = [crawl_of(store, i) for i in made]
    assert all(c.state is CrawlState.FINISHED for c in finished)
    assert all((c.pending, c.running, c.done) == (0, 0, 3) for c in finished)
    on_finish = store.job_list(JobFilter(queue="reports"))
    assert sorted(j.kwargs["crawl_id"] for j in on_finish) == made  # type: ignore[type-var]
    assert sorted(j.id for j in on_finish) == sorted(
        c.on_finish_job for c in finished if c.on_finish_job is not None
    )


# -- crawls and limit keys -------------------------------------------------------------------


def test_cancel_cancels_the_waiting_jobs_of_a_key_too(store: Store) -> None:
    store.limit_set("host", Limits(max_running=1), now=T0)
    store.limit_block("blocked", T0 + 100, now=T0)
    c = new_crawl(
        store,
        *(spec(args=["host", i], limit_key="host") for i in range(3)),
        *(spec(args=["blocked", i], limit_key="blocked") for i in range(3)),
    )
    running = claim_one(store)
    assert running.args == ["host", 0]
    assert store.crawl_cancel(c.id, now=T0 + 1)
    assert crawl_counts(store, c.id) == (0, 1, 0, 0, 5)
    pending = store.job_list(JobFilter(state=JobState.PENDING))
    assert pending == []
    s = stats_by_queue(store, T0 + 1)["q"]
    assert (s.due, s.scheduled, s.waiting, s.held, s.cancelled) == (0, 0, 0, 0, 5)
    for key in ("host", "blocked"):
        record = key_limit(store, key, now=T0 + 1)
        assert (record.pending, record.next_start) == (0, None)
    assert claim(store, limit=10, now=T0 + 1000) == []


def test_pause_holds_the_waiting_jobs_of_a_key_too(store: Store) -> None:
    store.limit_set("host", Limits(max_running=1), now=T0)
    outside = add(store, args=["outside"], limit_key="host")
    assert claim_one(store).id == outside
    c = new_crawl(store, *(spec(args=[i], limit_key="host") for i in range(2)))
    assert store.crawl_pause(c.id, now=T0 + 1)
    s = stats_by_queue(store, T0 + 1)["q"]
    assert (s.running, s.waiting, s.held) == (1, 0, 2)
    assert complete(store, get(store, outside).lease, now=T0 + 2)
    assert claim(store, limit=10, now=T0 + 3) == []
    record = key_limit(store, "host", now=T0 + 3)
    assert (record.running, record.pending, record.next_start) == (0, 2, None)
    assert store.crawl_resume(c.id, now=T0 + 4)
    [first] = claim(store, limit=10, now=T0 + 4)
    assert first.args == [0]
    assert claim(store, limit=10, now=T0 + 4) == []


def test_requeue_into_a_paused_crawl_holds_the_job(store: Store) -> None:
    c = new_crawl(store, spec(args=["dies"], max_attempts=1), spec(args=["later"], delay=100))
    job = claim_one(store)
    assert fail(store, job.lease, now=T0 + 1, retry_delay=None)
    assert store.crawl_pause(c.id, now=T0 + 2)
    assert store.job_requeue(JobFilter(ids=[job.id]), now=T0 + 3) == [job.id]
    assert get(store, job.id).state is JobState.PENDING
    assert crawl_counts(store, c.id) == (2, 0, 0, 0, 0)
    assert claim(store, limit=10, now=T0 + 200) == []
    assert stats_by_queue(store, T0 + 3)["q"].held == 2
    assert store.crawl_resume(c.id, now=T0 + 4)
    assert claim_one(store, now=T0 + 4).id == job.id


def test_a_requeued_keyed_job_waits_behind_its_key(store: Store) -> None:
    store.limit_set("host", Limits(max_running=1), now=T0)
    dies = add(store, args=["dies"], limit_key="host", max_attempts=1)
    other = add(store, args=["other"], limit_key="host")
    job = claim_one(store)
    assert job.id == dies
    assert fail(store, job.lease, now=T0 + 1, retry_delay=None)
    running = claim_one(store, now=T0 + 1)
    assert running.id == other
    assert store.job_requeue(JobFilter(ids=[dies]), now=T0 + 2) == [dies]
    assert key_limit(store, "host", now=T0 + 2).pending == 1
    assert claim(store, limit=10, now=T0 + 2) == [], "the key is at max_running"
    assert complete(store, running.lease, now=T0 + 3)
    assert claim_one(store, now=T0 + 3).id == dies


def test_a_deferred_follow_up_into_a_cancelled_crawl_is_dropped(store: Store) -> None:
    c = new_crawl(store, spec(key="page", args=["v1"]))
    first = claim_one(store)
    [result] = schedule(store, in_crawl(c, key="page", args=["v2"]), now=T0 + 1)
    assert result.outcome is Outcome.DEFERRED
    assert store.crawl_cancel(c.id, now=T0 + 2)
    assert complete(store, first.lease, now=T0 + 3)
    assert [(j.id, j.state) for j in all_jobs(store)] == [(first.id, JobState.DONE)]
    assert (crawl_counts(store, c.id), crawl_of(store, c.id).state) == (
        (0, 0, 1, 0, 0),
        CrawlState.CANCELLED,
    )


def test_a_deferred_follow_up_into_a_crawl_finished_meanwhile_is_dropped(store: Store) -> None:
    outside = add(store, key="page", args=["outside"])
    c = new_crawl(store, spec(queue="other", args=["only"]), on_finish=REPORT)
    running = claim_one(store)
    assert running.id == outside
    [result] = schedule(store, in_crawl(c, key="page", args=["v2"]), now=T0 + 1)
    assert result.outcome is Outcome.DEFERRED
    assert complete(store, claim_one(store, ["other"], now=T0 + 2).lease, now=T0 + 2)
    assert_finished_once(store, c.id, T0 + 2)
    info = crawl_of(store, c.id)
    assert complete(store, running.lease, now=T0 + 3)
    assert store.job_list(JobFilter(queue="q", state=JobState.PENDING)) == []
    assert crawl_of(store, c.id) == info


def test_a_conflict_never_moves_a_job_into_a_crawl(store: Store) -> None:
    c = new_crawl(store, spec(queue="keep", delay=1000))
    outside = add(store, key="page", args=["old"])
    [result] = schedule(store, in_crawl(c, key="page", args=["new"]), now=T0 + 1)
    assert result == (outside, Outcome.UPDATED)
    job = get(store, outside)
    assert (job.args, job.crawl_id) == (["new"], None)
    assert crawl_counts(store, c.id) == (1, 0, 0, 0, 0)
    inside = add_to(store, c, key="kid", args=["in"])
    [result] = schedule(store, spec(key="kid", args=["out"]), now=T0 + 2)
    assert result == (inside, Outcome.UPDATED)
    assert (get(store, inside).args, get(store, inside).crawl_id) == (["out"], c.id)
    assert crawl_counts(store, c.id) == (2, 0, 0, 0, 0)
