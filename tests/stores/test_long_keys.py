"""Unique keys and limit keys of any length (issue 14, item 15). PostgreSQL refused keys over about
2.7 kB ("index row size 2848 exceeds btree version 4 maximum 2704"), as a
StoreUnavailable, while SQLite and Redis took them; as a child's key it kept the parent
from ever completing. A 10 kB key works on every path a key takes, on every store."""

from __future__ import annotations

import hashlib

from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    crawl_of,
    get,
    key_limit,
    make_dead,
    new_crawl,
    schedule,
    spec,
)

from crawlq.jobs import JobState, Outcome
from crawlq.limits import Limits
from crawlq.stores.base import JobFilter, Store

LONG = "https://example.com/" + "".join(
    hashlib.sha256(str(i).encode()).hexdigest() for i in range(160)
)
"""A 10 kB key that does not compress (PostgreSQL compresses long index entries)."""
TWIN = LONG[:-1] + "b"
"""Equal to LONG but for its last character: a prefix of the key cannot tell them apart."""


def _live(store: Store, key: str) -> list[tuple[list[object], JobState]]:
    return [
        (j.args, j.state)
        for j in all_jobs(store)
        if j.key == key and j.state in (JobState.PENDING, JobState.RUNNING)
    ]


def test_a_10_kb_key_is_unique_and_merges(store: Store) -> None:
    [first] = schedule(store, spec(key=LONG, args=[1]))
    assert first.outcome is Outcome.CREATED
    [again] = schedule(store, spec(key=LONG, args=[2]))
    assert (again.job_id, again.outcome) == (first.job_id, Outcome.UPDATED)
    [twin] = schedule(store, spec(key=TWIN, args=[3]))
    assert twin.outcome is Outcome.CREATED and twin.job_id != first.job_id
    assert get(store, first.job_id).key == LONG, "the key itself is kept"
    assert _live(store, LONG) == [([2], JobState.PENDING)]
    batch = schedule(store, spec(key=LONG + "!", args=[4]), spec(key=LONG + "!", args=[5]))
    assert [r.outcome for r in batch] == [Outcome.CREATED, Outcome.UPDATED]
    assert _live(store, LONG + "!") == [([5], JobState.PENDING)]


def test_a_10_kb_key_of_a_running_job_is_remembered_and_then_runs(store: Store) -> None:
    add(store, key=LONG, args=["first"])
    running = claim_one(store)
    [deferred] = schedule(store, spec(key=LONG, args=["next"]))
    assert deferred.outcome is Outcome.DEFERRED
    assert complete(store, running.lease)
    follow = claim_one(store)
    assert (follow.key, follow.args) == (LONG, ["next"])


def test_a_10_kb_key_as_a_child_key_lets_the_parent_complete(store: Store) -> None:
    add(store)
    parent = claim_one(store)
    children = [spec(key=LONG, args=["child"]), spec(key=LONG, args=["twin"])]
    assert complete(store, parent.lease, children=children)
    assert get(store, parent.id).state is JobState.DONE
    assert _live(store, LONG) == [(["twin"], JobState.PENDING)]


def test_a_dead_job_with_a_10_kb_key_is_requeued_once(store: Store) -> None:
    dead = make_dead(store, key=LONG)
    assert store.job_requeue(JobFilter(ids=[dead]), now=T0) == [dead]
    assert _live(store, LONG) == [([], JobState.PENDING)]
    again = make_dead(store, queue="q2", key=TWIN)
    add(store, queue="q2", key=TWIN)
    assert store.job_requeue(JobFilter(ids=[again]), now=T0) == [], "its key is live"


def test_on_finish_with_a_10_kb_key(store: Store) -> None:
    [live] = schedule(store, spec(queue="reports", key=LONG))
    crawl = new_crawl(store, spec(), on_finish=spec(queue="reports", key=LONG, args=["x"]))
    job = claim_one(store)
    assert complete(store, job.lease)
    assert crawl_of(store, crawl.id).on_finish_job == live.job_id, "the live job stands for it"


def test_a_10_kb_limit_key_keeps_its_limits(store: Store) -> None:
    """Limit keys are indexed too (crawlq_keys and the waiting jobs of a key)."""
    store.limit_set(LONG, Limits(max_running=1), now=T0)
    schedule(store, *(spec(limit_key=LONG, args=[n]) for n in range(3)))
    schedule(store, spec(limit_key=TWIN, args=["twin"]))
    first = claim(store, limit=10)
    assert sorted((j.limit_key == LONG, j.args) for j in first) == [
        (False, ["twin"]),
        (True, [0]),
    ], "one job of the capped key, and the other key's job"
    record = key_limit(store, LONG)
    assert (record.key, record.running, record.pending) == (LONG, 1, 2)
    assert [r is None for r in store.limit_get([LONG + "?"], now=T0)] == [True]
    done = next(j for j in first if j.limit_key == LONG)
    assert complete(store, done.lease)
    [second] = claim(store, limit=10)
    assert (second.limit_key, second.args) == (LONG, [1])
    store.limit_block(LONG, T0 + 100, now=T0)
    assert complete(store, second.lease)
    assert claim(store, limit=10) == [], "blocked"
    [third] = claim(store, limit=10, now=T0 + 100)
    assert third.args == [2]
    assert [k.key for k in store.limit_list()] == sorted([LONG, TWIN])
