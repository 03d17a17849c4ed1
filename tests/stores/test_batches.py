"""A batch of completions or failures is applied as if its leases ended one at a time, in
order: a lease given twice ends once, a stale lease beside the current one of the same job
is refused alone, and a completion's children meet the jobs of the leases after it still
running."""

from __future__ import annotations

import pytest
from store_helpers import T0, add, all_jobs, claim, get, release, spec

from crawlq.jobs import ConflictPolicy, JobState
from crawlq.stores.base import Completion, Failure, Store


def test_a_lease_given_twice_in_one_batch_completes_once(store: Store) -> None:
    add(store)
    [job] = claim(store)
    twice = [Completion(lease=job.lease, result="first"), Completion(lease=job.lease, result=2)]
    assert store.job_complete(twice, now=T0 + 1) == [True, False]
    assert (get(store, job.id).state, get(store, job.id).result) == (JobState.DONE, "first")


def test_a_lease_given_twice_in_one_batch_fails_once(store: Store) -> None:
    add(store, max_attempts=3)
    [job] = claim(store)
    failure = Failure(lease=job.lease, error="boom", retry_delay=0.0)
    assert store.job_fail([failure, failure], now=T0 + 1) == [True, False]
    again = get(store, job.id)
    assert (again.state, again.attempts, again.last_error) == (JobState.PENDING, 1, "boom")


def test_a_stale_lease_beside_the_current_one_is_refused_alone(store: Store) -> None:
    add(store)
    [first] = claim(store)
    assert release(store, first.lease)
    [current] = claim(store, now=T0 + 1)
    assert current.id == first.id and current.lease != first.lease
    batch = [Completion(lease=first.lease, result="stale"), Completion(lease=current.lease)]
    assert store.job_complete(batch, now=T0 + 2) == [False, True]
    assert (get(store, first.id).state, get(store, first.id).result) == (JobState.DONE, None)


def _children_meet_a_later_lease(
    store: Store, queue: str, policy: ConflictPolicy, *, remembered: bool, one_call: bool
) -> list[tuple[object, ...]]:
    """Lease A's completion has a child with the key of lease B's job, which is running
    (and has a request for its key remembered, if ``remembered``); A then B end in one
    call or in two. What the queue holds after."""
    add(store, queue=queue, args=["a"])
    add(store, queue=queue, args=["b"], key="k")
    a, b = claim(store, [queue], limit=2)
    if remembered:
        store.job_schedule([spec(queue=queue, args=["again"], key="k", priority=3)], now=T0)
    child = spec(queue=queue, args=["child"], key="k", on_conflict=policy)
    ends = [Completion(lease=a.lease, children=(child,)), Completion(lease=b.lease)]
    if one_call:
        assert store.job_complete(ends, now=T0 + 1) == [True, True]
    else:
        assert [store.job_complete([end], now=T0 + 1) for end in ends] == [[True], [True]]
    return sorted(
        (j.args, j.key, j.state.value, j.priority) for j in all_jobs(store) if j.queue == queue
    )


@pytest.mark.parametrize("remembered", [False, True])
@pytest.mark.parametrize("policy", list(ConflictPolicy))
def test_a_completion_s_children_meet_later_leases_as_if_each_ended_in_turn(
    store: Store, policy: ConflictPolicy, remembered: bool
) -> None:
    """(B's remembered request takes the child's by ``policy`` while B runs; were B
    ended first, the child would meet the request made a job instead.)"""
    together = _children_meet_a_later_lease(
        store, "together", policy, remembered=remembered, one_call=True
    )
    in_turn = _children_meet_a_later_lease(
        store, "in-turn", policy, remembered=remembered, one_call=False
    )
    assert together == in_turn
    assert (["b"], "k", "done", 0) in together
