"""Leases: heartbeat, complete, fail, release and expiry, all fenced by the lease token."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import pytest
from store_helpers import (
    T0,
    add,
    all_jobs,
    claim,
    claim_one,
    complete,
    fail,
    get,
    ids,
    release,
    spec,
)

from crawlq.exceptions import CrawlqError
from crawlq.jobs import Job, JobState, Lease
from crawlq.stores.base import Completion, Failure, JobFilter, Release, Store

# -- heartbeat ---------------------------------------------------------------------------


def test_heartbeat_extends_the_lease_from_now(store: Store) -> None:
    add(store, lease_seconds=30)
    job = claim_one(store, now=T0)
    assert job.lease_expires_at == T0 + 30
    assert store.job_heartbeat([job.lease], now=T0 + 20) == [True]
    assert get(store, job.id) == replace(job, lease_expires_at=T0 + 50)
    assert store.job_heartbeat([job.lease], now=T0 + 45.5) == [True]
    assert get(store, job.id).lease_expires_at == T0 + 75.5


def test_heartbeat_answers_each_lease_in_order(store: Store) -> None:
    for _ in range(3):
        add(store, lease_seconds=10)
    a, b, c = claim(store, limit=3)
    assert release(store, b.lease)
    assert store.job_heartbeat([a.lease, b.lease, c.lease], now=T0 + 5) == [True, False, True]
    assert get(store, a.id).lease_expires_at == T0 + 15
    assert get(store, c.id).lease_expires_at == T0 + 15
    assert store.job_heartbeat([], now=T0) == []


def test_a_heartbeat_keeps_the_lease_from_expiring(store: Store) -> None:
    job_id = add(store, lease_seconds=30)
    job = claim_one(store)
    assert store.job_heartbeat([job.lease], now=T0 + 25) == [True]
    assert store.job_expire_leases(now=T0 + 31) == []
    assert get(store, job_id).state is JobState.RUNNING
    assert store.job_expire_leases(now=T0 + 55.5) == [job_id]


# -- stale tokens change nothing ---------------------------------------------------------

AckOp = Callable[[Store, Lease], list[bool]]

OPERATIONS: dict[str, AckOp] = {
    "heartbeat": lambda s, lease: s.job_heartbeat([lease], now=T0 + 5),
    "complete": lambda s, lease: s.job_complete(
        [Completion(lease=lease, result={"r": 1}, children=[spec(queue="kids")])], now=T0 + 5
    ),
    "fail_retry": lambda s, lease: s.job_fail(
        [Failure(lease=lease, error="x", retry_delay=1.0)], now=T0 + 5
    ),
    "fail_dead": lambda s, lease: s.job_fail(
        [Failure(lease=lease, error="x", retry_delay=None)], now=T0 + 5
    ),
    "release": lambda s, lease: s.job_release([Release(lease=lease)], now=T0 + 5),
}


def _wrong_token(store: Store, job: Job) -> Lease:
    return Lease(job.id, "not-the-token")


def _empty_token(store: Store, job: Job) -> Lease:
    return Lease(job.id, "")


def _earlier_claim(store: Store, job: Job) -> Lease:
    assert release(store, job.lease, now=T0 + 1)
    assert claim_one(store, now=T0 + 1).id == job.id
    return job.lease


def _other_job(store: Store, job: Job) -> Lease:
    add(store, queue="other")
    other = claim_one(store, ["other"])
    return Lease(job.id, other.lease_token or "")


def _unknown_job(store: Store, job: Job) -> Lease:
    return Lease(job.id + 1000, job.lease_token or "")


def _after_complete(store: Store, job: Job) -> Lease:
    assert complete(store, job.lease, now=T0 + 1)
    return job.lease


def _after_dead(store: Store, job: Job) -> Lease:
    assert fail(store, job.lease, now=T0 + 1)
    return job.lease


def _after_retry(store: Store, job: Job) -> Lease:
    assert fail(store, job.lease, now=T0 + 1, retry_delay=100)
    return job.lease


def _after_expiry(store: Store, job: Job) -> Lease:
    assert store.job_expire_leases(now=T0 + 100) == [job.id]
    return job.lease


def _after_expiry_and_reclaim(store: Store, job: Job) -> Lease:
    assert store.job_expire_leases(now=T0 + 100) == [job.id]
    assert claim_one(store, now=T0 + 100).id == job.id
    return job.lease


def _after_cancel(store: Store, job: Job) -> Lease:
    assert store.job_cancel([job.id], now=T0 + 1) == [job.id]
    return job.lease


STALE: dict[str, Callable[[Store, Job], Lease]] = {
    "wrong_token": _wrong_token,
    "empty_token": _empty_token,
    "earlier_claim": _earlier_claim,
    "token_of_another_job": _other_job,
    "unknown_job": _unknown_job,
    "after_complete": _after_complete,
    "after_dead": _after_dead,
    "after_retry": _after_retry,
    "after_expiry": _after_expiry,
    "after_expiry_and_reclaim": _after_expiry_and_reclaim,
    "after_cancel": _after_cancel,
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize("staleness", sorted(STALE))
def test_a_stale_token_changes_nothing(store: Store, operation: str, staleness: str) -> None:
    add(store, key="k", lease_seconds=30, max_attempts=5)
    job = claim_one(store)
    lease = STALE[staleness](store, job)
    before = all_jobs(store)
    assert OPERATIONS[operation](store, lease) == [False]
    assert all_jobs(store) == before
    assert store.job_expire_leases(now=T0 + 5) == []


# -- complete ----------------------------------------------------------------------------


def test_complete_marks_the_job_done_and_keeps_its_result(store: Store) -> None:
    add(store)
    job = claim_one(store)
    result = {"status": 200, "links": ["a", "b"], "ok": True, "size": 1.5}
    assert complete(store, job.lease, now=T0 + 3, result=result)
    done = get(store, job.id)
    assert (done.state, done.result, done.finished_at) == (JobState.DONE, result, T0 + 3)
    assert (done.attempts, done.started_at, done.lease_token) == (1, T0, None)
    assert claim(store, now=T0 + 1000) == []


def test_complete_without_result_stores_none(store: Store) -> None:
    job_id = add(store)
    assert complete(store, claim_one(store).lease)
    assert get(store, job_id).result is None


def test_complete_answers_each_completion_in_order(store: Store) -> None:
    for _ in range(3):
        add(store)
    a, b, c = claim(store, limit=3)
    assert release(store, b.lease)
    answers = store.job_complete(
        [Completion(lease=lease, result=i) for i, lease in enumerate([a.lease, b.lease, c.lease])],
        now=T0 + 1,
    )
    assert answers == [True, False, True]
    assert [get(store, j.id).state for j in (a, b, c)] == [
        JobState.DONE,
        JobState.PENDING,
        JobState.DONE,
    ]
    assert [get(store, j.id).result for j in (a, c)] == [0, 2]


def test_children_are_scheduled_with_a_valid_completion(store: Store) -> None:
    parent_id = add(store)
    parent = claim_one(store)
    children = [
        spec(queue="kids", task="fetch", args=["a"], priority=2),
        spec(queue="kids", task="fetch", args=["b"], key="b", delay=30),
    ]
    assert complete(store, parent.lease, now=T0 + 1, children=children)
    kids = store.job_list(JobFilter(queue="kids"))
    assert [(k.task, k.args, k.key, k.priority, k.run_at) for k in kids] == [
        ("fetch", ["a"], None, 2, T0 + 1),
        ("fetch", ["b"], "b", 0, T0 + 31),
    ]
    assert all(k.state is JobState.PENDING and k.created_at == T0 + 1 for k in kids)
    assert all(k.id > parent_id for k in kids)


def test_children_follow_the_uniqueness_rules(store: Store) -> None:
    existing = add(store, queue="kids", key="b", args=["old"], delay=50)
    add(store)
    parent = claim_one(store)
    assert complete(
        store, parent.lease, now=T0 + 1, children=[spec(queue="kids", key="b", args=["new"])]
    )
    [kid] = store.job_list(JobFilter(queue="kids"))
    assert (kid.id, kid.args, kid.run_at) == (existing, ["new"], T0 + 1)


def test_children_are_not_scheduled_with_a_stale_lease(store: Store) -> None:
    add(store)
    add(store)
    first, second = claim(store, limit=2)
    assert release(store, second.lease)
    answers = store.job_complete(
        [
            Completion(lease=first.lease, children=[spec(queue="kids", args=[1])]),
            Completion(lease=second.lease, children=[spec(queue="kids", args=[2])]),
        ],
        now=T0 + 1,
    )
    assert answers == [True, False]
    assert [k.args for k in store.job_list(JobFilter(queue="kids"))] == [[1]]


def test_a_completion_and_its_children_commit_together(store: Store) -> None:
    add(store)
    job = claim_one(store)
    unstorable = spec(queue="kids", args=[cast(Any, object())])
    with pytest.raises((TypeError, ValueError, CrawlqError)):
        complete(store, job.lease, now=T0 + 1, children=[spec(queue="kids"), unstorable])
    assert all_jobs(store) == [job], "neither the completion nor any child was kept"
    assert complete(store, job.lease, now=T0 + 2, children=[spec(queue="kids")])
    assert [j.state for j in all_jobs(store)] == [JobState.DONE, JobState.PENDING]


# -- fail --------------------------------------------------------------------------------


def test_fail_with_a_retry_delay_makes_the_job_pending_later(store: Store) -> None:
    job_id = add(store, max_attempts=3)
    job = claim_one(store, now=T0)
    assert fail(store, job.lease, now=T0 + 1, retry_delay=5, error="HTTP 503")
    retried = get(store, job_id)
    assert (retried.state, retried.run_at, retried.attempts) == (JobState.PENDING, T0 + 6, 1)
    assert (retried.last_error, retried.dead_reason) == ("HTTP 503", None)
    assert (retried.lease_token, retried.finished_at) == (None, None)
    assert claim(store, now=T0 + 5.9) == []
    again = claim_one(store, now=T0 + 6)
    assert (again.id, again.attempts, again.last_error) == (job_id, 2, "HTTP 503")


def test_fail_with_a_zero_retry_delay_is_due_at_once(store: Store) -> None:
    job_id = add(store)
    assert fail(store, claim_one(store).lease, now=T0 + 1, retry_delay=0)
    assert get(store, job_id).run_at == T0 + 1
    assert claim_one(store, now=T0 + 1).id == job_id


def test_fail_without_a_retry_delay_makes_the_job_dead(store: Store) -> None:
    job_id = add(store, max_attempts=3)
    job = claim_one(store)
    assert fail(store, job.lease, now=T0 + 2, error="Traceback: ...", reason="discarded")
    dead = get(store, job_id)
    assert (dead.state, dead.dead_reason, dead.last_error) == (
        JobState.DEAD,
        "discarded",
        "Traceback: ...",
    )
    assert (dead.finished_at, dead.attempts, dead.lease_token) == (T0 + 2, 1, None)
    assert claim(store, now=T0 + 1000) == []


def test_fail_reason_defaults_to_error(store: Store) -> None:
    job_id = add(store)
    assert fail(store, claim_one(store).lease)
    assert get(store, job_id).dead_reason == "error"


def test_fail_answers_each_failure_in_order(store: Store) -> None:
    for _ in range(3):
        add(store)
    a, b, c = claim(store, limit=3)
    answers = store.job_fail(
        [
            Failure(lease=a.lease, error="e1", retry_delay=10),
            Failure(lease=Lease(b.id, "stale"), error="e2", retry_delay=None),
            Failure(lease=c.lease, error="e3", retry_delay=None, reason="max_attempts"),
        ],
        now=T0 + 1,
    )
    assert answers == [True, False, True]
    assert [get(store, j.id).state for j in (a, b, c)] == [
        JobState.PENDING,
        JobState.RUNNING,
        JobState.DEAD,
    ]


# -- release -----------------------------------------------------------------------------


def test_release_returns_the_job_and_its_attempt(store: Store) -> None:
    job_id = add(store, run_at=T0 - 5)
    job = claim_one(store)
    assert release(store, job.lease, now=T0 + 1)
    released = get(store, job_id)
    assert (released.state, released.attempts, released.lease_token) == (JobState.PENDING, 0, None)
    assert released.run_at == T0 - 5, "release without delay keeps the job's place in line"
    assert released.finished_at is None
    assert claim_one(store, now=T0 + 1).attempts == 1


def test_release_gives_back_only_its_own_attempt(store: Store) -> None:
    job_id = add(store, max_attempts=3)
    assert fail(store, claim_one(store).lease, now=T0, retry_delay=0)
    second = claim_one(store, now=T0 + 1)
    assert second.attempts == 2
    assert release(store, second.lease, now=T0 + 2)
    assert get(store, job_id).attempts == 1


def test_release_with_a_delay(store: Store) -> None:
    job_id = add(store)
    assert release(store, claim_one(store).lease, now=T0 + 1, delay=30)
    released = get(store, job_id)
    assert (released.state, released.run_at, released.attempts) == (JobState.PENDING, T0 + 31, 0)
    assert claim(store, now=T0 + 30.9) == []
    assert claim_one(store, now=T0 + 31).id == job_id


def test_release_answers_each_release_in_order(store: Store) -> None:
    add(store)
    add(store)
    a, b = claim(store, limit=2)
    answers = store.job_release([Release(lease=a.lease), Release(lease=Lease(b.id, "x"))], now=T0)
    assert answers == [True, False]
    assert [get(store, j.id).state for j in (a, b)] == [JobState.PENDING, JobState.RUNNING]


# -- expiry ------------------------------------------------------------------------------


def test_an_expired_lease_makes_the_job_pending_if_attempts_are_left(store: Store) -> None:
    job_id = add(store, lease_seconds=30, max_attempts=2)
    job = claim_one(store)
    assert store.job_expire_leases(now=T0 + 29) == []
    assert store.job_expire_leases(now=T0 + 30) == [], "expires only after lease_expires_at"
    assert get(store, job_id).state is JobState.RUNNING
    assert store.job_expire_leases(now=T0 + 30.5) == [job_id]
    expired = get(store, job_id)
    assert (expired.state, expired.attempts, expired.lease_token) == (JobState.PENDING, 1, None)
    assert (expired.dead_reason, expired.finished_at) == (None, None)
    again = claim_one(store, now=T0 + 31)
    assert (again.id, again.attempts) == (job_id, 2)
    assert again.lease_token != job.lease_token
    assert store.job_heartbeat([job.lease], now=T0 + 31) == [False]
    assert complete(store, job.lease, now=T0 + 31) is False
    assert get(store, job_id) == again


def test_an_expired_lease_with_no_attempts_left_makes_the_job_dead(store: Store) -> None:
    job_id = add(store, lease_seconds=10, max_attempts=1)
    job = claim_one(store)
    assert store.job_expire_leases(now=T0 + 11) == [job_id]
    dead = get(store, job_id)
    assert (dead.state, dead.dead_reason, dead.finished_at) == (
        JobState.DEAD,
        "lease_expired",
        T0 + 11,
    )
    assert (dead.attempts, dead.lease_token) == (1, None)
    assert complete(store, job.lease, now=T0 + 12) is False
    assert claim(store, now=T0 + 12) == []


def test_expire_returns_ids_in_id_order_and_only_expired_ones(store: Store) -> None:
    short = [add(store, lease_seconds=5) for _ in range(3)]
    long = add(store, lease_seconds=500)
    waiting = add(store, delay=1)
    claimed = claim(store, limit=4)
    assert sorted(ids(claimed)) == [*short, long]
    assert store.job_expire_leases(now=T0 + 6) == short
    assert get(store, long).state is JobState.RUNNING
    assert get(store, waiting).attempts == 0
    assert store.job_expire_leases(now=T0 + 6) == []


def test_expire_with_nothing_running_is_empty(store: Store) -> None:
    assert store.job_expire_leases(now=T0) == []
    add(store)
    job_id = add(store)
    assert complete(store, claim_one(store).lease)
    assert store.job_expire_leases(now=T0 + 10_000) == []
    assert get(store, job_id).state is JobState.PENDING
