"""Listing, the dead-letter queue (requeue), purging and pruning."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from store_helpers import (
    T0,
    add,
    all_jobs,
    claim_one,
    complete,
    fail,
    get,
    ids,
    make_dead,
)

from crawlq.jobs import JobState
from crawlq.stores.base import JobFilter, Store
from crawlq.types import JobId

Names = dict[str, JobId]


def _mix(store: Store) -> Names:
    """One job in every state, in this id order:

    due (q, t), later (q, t2, due T0+100), running (q2, t), done (q, t, finished T0+1),
    dead (q, t, T0+2), cancelled (q2, t2, T0+3), dead2 (q2, t2, T0+4).
    """
    j: Names = {}
    j["due"] = add(store, queue="q", task="t")
    j["later"] = add(store, queue="q", task="t2", delay=100)
    j["running"] = add(store, queue="q2", task="t")
    assert claim_one(store, ["q2"]).id == j["running"]
    j["done"] = add(store, queue="q", task="t", priority=10)
    assert complete(store, claim_one(store, ["q"]).lease, now=T0 + 1)
    j["dead"] = add(store, queue="q", task="t", priority=10)
    assert fail(store, claim_one(store, ["q"]).lease, now=T0 + 2, error="e1")
    j["cancelled"] = add(store, queue="q2", task="t2")
    assert store.job_cancel([j["cancelled"]], now=T0 + 3) == [j["cancelled"]]
    j["dead2"] = add(store, queue="q2", task="t2", priority=10)
    assert fail(store, claim_one(store, ["q2"]).lease, now=T0 + 4, error="e2")
    assert ids(all_jobs(store)) == sorted(j.values()) == list(j.values())
    return j


EVERY = ["due", "later", "running", "done", "dead", "cancelled", "dead2"]

LISTINGS: dict[str, tuple[Callable[[Names], JobFilter], list[str]]] = {
    "everything": (lambda j: JobFilter(), EVERY),
    "pending": (lambda j: JobFilter(state=JobState.PENDING), ["due", "later"]),
    "running": (lambda j: JobFilter(state=JobState.RUNNING), ["running"]),
    "done": (lambda j: JobFilter(state=JobState.DONE), ["done"]),
    "dead": (lambda j: JobFilter(state=JobState.DEAD), ["dead", "dead2"]),
    "cancelled": (lambda j: JobFilter(state=JobState.CANCELLED), ["cancelled"]),
    "queue": (lambda j: JobFilter(queue="q2"), ["running", "cancelled", "dead2"]),
    "task": (lambda j: JobFilter(task="t2"), ["later", "cancelled", "dead2"]),
    "ids": (lambda j: JobFilter(ids=[j["dead2"], j["due"], 9999]), ["due", "dead2"]),
    "after_id": (
        lambda j: JobFilter(after_id=j["running"]),
        ["done", "dead", "cancelled", "dead2"],
    ),
    "limit": (lambda j: JobFilter(limit=2), ["due", "later"]),
    "page": (lambda j: JobFilter(after_id=j["later"], limit=2), ["running", "done"]),
    "finished_before": (lambda j: JobFilter(finished_before=T0 + 3), ["done", "dead"]),
    "queue_and_state": (lambda j: JobFilter(queue="q2", state=JobState.DEAD), ["dead2"]),
    "queue_task_state": (
        lambda j: JobFilter(queue="q", task="t", state=JobState.PENDING),
        ["due"],
    ),
    "unknown_queue": (lambda j: JobFilter(queue="nope"), []),
}


@pytest.mark.parametrize("listing", sorted(LISTINGS))
def test_job_list_filters(store: Store, listing: str) -> None:
    j = _mix(store)
    where, expected = LISTINGS[listing]
    assert ids(store.job_list(where(j))) == [j[name] for name in expected]


def test_job_list_pages_through_everything(store: Store) -> None:
    j = _mix(store)
    seen: list[JobId] = []
    while page := store.job_list(JobFilter(after_id=seen[-1] if seen else 0, limit=3)):
        assert len(page) <= 3
        seen.extend(ids(page))
    assert seen == [j[name] for name in EVERY]


def test_job_list_returns_full_jobs(store: Store) -> None:
    j = _mix(store)
    assert store.job_list(JobFilter(ids=[j["dead"]])) == [get(store, j["dead"])]
    dead = get(store, j["dead"])
    assert (dead.last_error, dead.dead_reason, dead.finished_at) == ("e1", "error", T0 + 2)


def test_empty_store_lists_nothing(store: Store) -> None:
    assert store.job_list(JobFilter()) == []


# -- requeue -----------------------------------------------------------------------------


def test_requeue_makes_dead_jobs_pending_with_fresh_attempts_due_now(store: Store) -> None:
    j = _mix(store)
    before = {job.id: job for job in all_jobs(store)}
    assert store.job_requeue(JobFilter(), now=T0 + 10) == [j["dead"], j["dead2"]]
    for name in ("dead", "dead2"):
        job = get(store, j[name])
        assert (job.state, job.attempts, job.run_at) == (JobState.PENDING, 0, T0 + 10)
        assert (job.dead_reason, job.finished_at, job.lease_token) == (None, None, None)
    for name in ("due", "later", "running", "done", "cancelled"):
        assert get(store, j[name]) == before[j[name]]
    assert claim_one(store, ["q2"], now=T0 + 10).id == j["dead2"]


def test_requeue_follows_the_filter(store: Store) -> None:
    j = _mix(store)
    assert store.job_requeue(JobFilter(queue="q2"), now=T0 + 10) == [j["dead2"]]
    assert get(store, j["dead"]).state is JobState.DEAD


@pytest.mark.parametrize(
    "where",
    [
        JobFilter(state=JobState.DONE),
        JobFilter(state=JobState.PENDING),
        JobFilter(queue="nope"),
        JobFilter(ids=[]),
    ],
    ids=["done", "pending", "unknown_queue", "no_ids"],
)
def test_requeue_touches_only_dead_jobs(store: Store, where: JobFilter) -> None:
    _mix(store)
    before = all_jobs(store)
    assert store.job_requeue(where, now=T0 + 10) == []
    assert all_jobs(store) == before


def test_requeue_of_live_and_done_ids_does_nothing(store: Store) -> None:
    j = _mix(store)
    before = all_jobs(store)
    chosen = [j["due"], j["running"], j["done"], j["cancelled"]]
    assert store.job_requeue(JobFilter(ids=chosen), now=T0 + 10) == []
    assert all_jobs(store) == before


def test_a_requeued_job_gets_all_its_attempts_again(store: Store) -> None:
    job_id = add(store, max_attempts=2, lease_seconds=10)
    for attempt in (1, 2):
        job = claim_one(store, now=T0 + 100 * attempt)
        assert job.attempts == attempt
        assert store.job_expire_leases(now=T0 + 100 * attempt + 11) == [job_id]
    assert get(store, job_id).dead_reason == "lease_expired"
    assert store.job_requeue(JobFilter(ids=[job_id]), now=T0 + 1000) == [job_id]
    for attempt in (1, 2):
        job = claim_one(store, now=T0 + 1000 * attempt)
        assert job.attempts == attempt
        assert store.job_expire_leases(now=T0 + 1000 * attempt + 11) == [job_id]
    assert get(store, job_id).state is JobState.DEAD


def test_requeue_leaves_a_dead_job_dead_while_its_key_is_live(store: Store) -> None:
    dead = make_dead(store, key="k")
    live = add(store, key="k", now=T0 + 1)
    assert store.job_requeue(JobFilter(), now=T0 + 2) == []
    assert get(store, dead).state is JobState.DEAD
    assert complete(store, claim_one(store, now=T0 + 2).lease, now=T0 + 2)
    assert get(store, live).state is JobState.DONE
    assert store.job_requeue(JobFilter(), now=T0 + 3) == [dead]
    assert get(store, dead).state is JobState.PENDING


def test_requeue_revives_one_dead_job_per_key(store: Store) -> None:
    first = make_dead(store, key="k")
    second = make_dead(store, key="k")
    other = make_dead(store, key="other")
    assert store.job_requeue(JobFilter(), now=T0 + 1) == [first, other]
    assert get(store, second).state is JobState.DEAD
    pending = store.job_list(JobFilter(state=JobState.PENDING))
    assert ids(pending) == [first, other]


# -- purge -------------------------------------------------------------------------------

PURGES: dict[str, tuple[Callable[[Names], JobFilter], list[str]]] = {
    "everything": (lambda j: JobFilter(), ["done", "dead", "cancelled", "dead2"]),
    "dead_in_q": (lambda j: JobFilter(state=JobState.DEAD, queue="q"), ["dead"]),
    "pending": (lambda j: JobFilter(state=JobState.PENDING), []),
    "running": (lambda j: JobFilter(state=JobState.RUNNING), []),
    "ids": (lambda j: JobFilter(ids=[j["due"], j["done"], j["running"]]), ["done"]),
    "finished_before": (lambda j: JobFilter(finished_before=T0 + 3), ["done", "dead"]),
    "task": (lambda j: JobFilter(task="t2"), ["cancelled", "dead2"]),
    "limit": (lambda j: JobFilter(limit=2), ["done", "dead"]),
    "after_id": (lambda j: JobFilter(after_id=j["dead"]), ["cancelled", "dead2"]),
}


@pytest.mark.parametrize("purge", sorted(PURGES))
def test_purge_deletes_only_matching_finished_jobs(store: Store, purge: str) -> None:
    j = _mix(store)
    where, expected = PURGES[purge]
    assert store.job_purge(where(j)) == len(expected)
    gone = {j[name] for name in expected}
    for name in EVERY:
        assert (store.job_get(j[name]) is None) == (j[name] in gone), name
    assert ids(all_jobs(store)) == [j[name] for name in EVERY if j[name] not in gone]


# -- prune -------------------------------------------------------------------------------


def test_prune_deletes_done_and_cancelled_jobs_older_than_retention(store: Store) -> None:
    j = _mix(store)
    assert store.job_prune(retention=100, now=T0 + 101) == 0, "exactly retention old: kept"
    assert store.job_prune(retention=100, now=T0 + 102) == 1
    assert store.job_get(j["done"]) is None
    assert store.job_get(j["cancelled"]) is not None
    assert store.job_prune(retention=100, now=T0 + 10_000) == 1
    assert store.job_get(j["cancelled"]) is None
    assert ids(all_jobs(store)) == [j[n] for n in ("due", "later", "running", "dead", "dead2")]
    assert store.job_prune(retention=0, now=T0 + 10**6) == 0


def test_prune_keeps_recent_jobs(store: Store) -> None:
    j = _mix(store)
    assert store.job_prune(retention=3600, now=T0 + 3600) == 0
    assert ids(all_jobs(store)) == [j[name] for name in EVERY]


def test_job_recent_lists_the_last_finished_jobs_of_the_queues_newest_first(store: Store) -> None:
    """``job_recent``: finished jobs (done, dead, cancelled) of the asked queues only, by
    finish time then id, newest first, at most ``limit``; pending and running ones never."""
    j = _mix(store)
    other = add(store, queue="elsewhere")
    assert complete(store, claim_one(store, ["elsewhere"]).lease, now=T0 + 9)
    assert ids(store.job_recent(["q", "q2"], 10)) == [
        j["dead2"],
        j["cancelled"],
        j["dead"],
        j["done"],
    ]
    assert ids(store.job_recent(["q", "q2"], 2)) == [j["dead2"], j["cancelled"]]
    assert ids(store.job_recent(["q"], 10)) == [j["dead"], j["done"]]
    assert ids(store.job_recent(["elsewhere", "nothing"], 10)) == [other]
    assert store.job_recent(["q"], 0) == []
    assert store.job_recent([], 5) == []
    # equal finish times: the higher id first
    a, b = add(store, queue="tie"), add(store, queue="tie")
    assert complete(store, claim_one(store, ["tie"]).lease, now=T0 + 20)
    assert complete(store, claim_one(store, ["tie"]).lease, now=T0 + 20)
    recent = store.job_recent(["tie"], 5)
    assert ids(recent) == [b, a]
    assert all(job.state is JobState.DONE and job.finished_at == T0 + 20 for job in recent)
