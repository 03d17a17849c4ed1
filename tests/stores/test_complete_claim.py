"""``job_complete_claim``: a worker's turn, the completions then the claim, in one call."""

from __future__ import annotations

from store_helpers import (
    T0,
    add,
    claim,
    claim_one,
    crawl_counts,
    crawl_of,
    get,
    ids,
    new_crawl,
    release,
    spec,
)

from crawlq.crawls import CrawlState
from crawlq.jobs import JobState
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Completion, Store


def params(limit: int, now: float = T0 + 1, queues: tuple[str, ...] = ("q",)) -> ClaimParams:
    return ClaimParams(queues=queues, worker_id="w1", limit=limit, now=now)


def test_it_completes_in_order_then_claims_in_claim_order(store: Store) -> None:
    first = [add(store) for _ in range(3)]
    a, b, c = claim(store, limit=3)
    assert release(store, b.lease)  # b's lease is stale now, and b pending again
    urgent = add(store, priority=5)
    later = add(store)
    answers, jobs = store.job_complete_claim(
        [Completion(lease=j.lease, result=i) for i, j in enumerate((a, b, c))], params(2)
    )
    assert answers == [True, False, True]
    assert [get(store, j).state for j in first] == [JobState.DONE, JobState.RUNNING, JobState.DONE]
    assert [get(store, j).result for j in (a.id, c.id)] == [0, 2]
    assert ids(jobs) == [urgent, b.id]
    assert [j.lease_token is not None for j in jobs] == [True, True]
    assert get(store, later).state is JobState.PENDING
    assert get(store, a.id).finished_at == T0 + 1


def test_the_claim_sees_the_children_of_the_completions(store: Store) -> None:
    add(store)
    parent = claim_one(store)
    child = spec(args=["child"])
    stale = claim(store)  # none left
    assert stale == []
    answers, jobs = store.job_complete_claim(
        [Completion(lease=parent.lease, children=(child,))], params(4)
    )
    assert answers == [True]
    assert [j.args for j in jobs] == [["child"]]


def test_the_claim_sees_the_running_slot_a_completion_frees(store: Store) -> None:
    store.limit_set("k", Limits(max_running=1), now=T0)
    add(store, limit_key="k")
    second = add(store, limit_key="k")
    running = claim_one(store)
    assert claim(store) == []  # the key's one running slot is taken
    answers, jobs = store.job_complete_claim([Completion(lease=running.lease)], params(4))
    assert (answers, ids(jobs)) == ([True], [second])


def test_a_stale_completion_schedules_no_child_and_the_claim_still_runs(store: Store) -> None:
    add(store)
    job = claim_one(store)
    assert release(store, job.lease)
    answers, jobs = store.job_complete_claim(
        [Completion(lease=job.lease, children=(spec(queue="other"),))], params(1)
    )
    assert answers == [False]
    assert ids(jobs) == [job.id]
    assert claim(store, ("other",), now=T0 + 1) == []


def test_no_completion_is_a_claim_and_no_room_is_a_completion(store: Store) -> None:
    first, second = add(store), add(store)
    assert store.job_complete_claim([], params(1)) == ([], [get(store, first)])
    job = get(store, first)
    answers, jobs = store.job_complete_claim([Completion(lease=job.lease)], params(0))
    assert (answers, jobs) == ([True], [])
    assert get(store, first).state is JobState.DONE
    assert get(store, second).state is JobState.PENDING


def test_a_crawl_counts_the_completions_and_the_claim_and_finishes(store: Store) -> None:
    report = spec(queue="reports", task="report")
    crawl = new_crawl(store, spec(limit_key="h"), on_finish=report).id
    parent = claim_one(store)
    child = spec(crawl=crawl, limit_key="h", args=["child"])
    both = ("q", "reports")
    answers, jobs = store.job_complete_claim(
        [Completion(lease=parent.lease, children=(child,))], params(4, queues=both)
    )
    assert (answers, [j.args for j in jobs]) == ([True], [["child"]])
    assert crawl_counts(store, crawl) == (0, 1, 1, 0, 0)
    answers, jobs = store.job_complete_claim(
        [Completion(lease=jobs[0].lease)], params(4, now=T0 + 2, queues=both)
    )
    info = crawl_of(store, crawl)
    assert (answers, info.state, info.finished_at) == ([True], CrawlState.FINISHED, T0 + 2)
    assert crawl_counts(store, crawl) == (0, 0, 2, 0, 0)
    assert info.on_finish_job is not None
    claimed = info.on_finish_job in ids(jobs)  # the claim may or may not see it
    state = get(store, info.on_finish_job).state
    assert state is (JobState.RUNNING if claimed else JobState.PENDING)
