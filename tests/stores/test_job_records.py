"""Records carried by a job's end (``Completion.records``, ``Failure.records``): kept in
the crawl's results in the same transaction as the completion or failure, as
``result_add`` keeps them, and only if the lease is still valid."""

from __future__ import annotations

import hashlib

import pytest
from store_helpers import T0, claim, claim_one, get, new_crawl, release, spec

from crawlq.crawls import CrawlState
from crawlq.exceptions import ConfigurationError
from crawlq.jobs import JobState
from crawlq.stores.base import ClaimParams, Completion, CrawlRecord, Failure, Store


def key(name: str | int) -> bytes:
    return hashlib.sha256(str(name).encode()).digest()[:16]


def rec(crawl: int, name: str | int, text: str | None = None) -> CrawlRecord:
    return (crawl, key(name), text if text is not None else f"record {name}")


def open_crawl(store: Store, jobs: int = 1, name: str = "c") -> int:
    """A crawl with ``jobs`` jobs of queue "q", kept open by one far in the future."""
    start = [spec(args=[i]) for i in range(jobs)]
    return new_crawl(store, *start, spec(queue="keep-open", delay=10**6), name=name).id


def test_a_completion_keeps_its_records_with_its_children(store: Store) -> None:
    c = open_crawl(store)
    job = claim_one(store)
    kid = spec(queue="kids", crawl=c)
    completion = Completion(lease=job.lease, children=[kid], records=[rec(c, "a"), rec(c, "b")])
    assert store.job_complete([completion], now=T0 + 1) == [True]
    assert store.result_list(c) == [(1, "record a"), (2, "record b")]
    assert store.result_get(c, [key("a"), key("b"), key("x")]) == ["record a", "record b", None]
    assert len(claim(store, ("kids",), now=T0 + 2)) == 1


def test_a_stale_completion_keeps_no_record(store: Store) -> None:
    c = open_crawl(store)
    job = claim_one(store)
    assert release(store, job.lease, now=T0 + 1)
    done = Completion(lease=job.lease, records=[rec(c, "a")])
    assert store.job_complete([done], now=T0 + 2) == [False]
    assert store.result_count(c) == 0
    # the new lease's completion keeps its own record
    again = claim_one(store, now=T0 + 3)
    assert store.job_complete(
        [Completion(lease=again.lease, records=[rec(c, "a", "second")])], now=T0 + 4
    )
    assert store.result_list(c) == [(1, "second")]


def test_a_batch_keeps_the_records_of_the_valid_leases_only(store: Store) -> None:
    c = open_crawl(store, jobs=3)
    a, b, d = claim(store, limit=3)
    assert release(store, b.lease, now=T0 + 1)
    batch = [
        Completion(lease=a.lease, records=[rec(c, "a")]),
        Completion(lease=b.lease, records=[rec(c, "b")]),
        Completion(lease=d.lease, records=[rec(c, "d")]),
        Completion(lease=a.lease, records=[rec(c, "a again")]),  # a repeat: stale by now
    ]
    assert store.job_complete(batch, now=T0 + 2) == [True, False, True, False]
    assert store.result_list(c) == [(1, "record a"), (2, "record d")]


def test_the_first_record_of_a_key_wins(store: Store) -> None:
    c = open_crawl(store, jobs=3)
    assert store.result_add(c, [(key("old"), "from result_add")], now=T0) == [True]
    a, b, d = claim(store, limit=3)
    first = Completion(lease=a.lease, records=[rec(c, "k", "k1"), rec(c, "k", "k2")])
    second = Completion(lease=b.lease, records=[rec(c, "k", "k3"), rec(c, "old", "o2")])
    assert store.job_complete([first, second], now=T0 + 1) == [True, True]
    third = Completion(lease=d.lease, records=[rec(c, "k", "k4"), rec(c, "new", "n1")])
    assert store.job_complete([third], now=T0 + 2) == [True]
    assert store.result_list(c) == [(1, "from result_add"), (2, "k1"), (3, "n1")]
    assert store.result_add(c, [(key("k"), "k5")], now=T0 + 3) == [False]


def test_a_completion_and_claim_keeps_the_records_of_valid_leases(store: Store) -> None:
    c = open_crawl(store, jobs=3)
    a, b = claim(store, limit=2)
    assert release(store, b.lease, now=T0 + 1)
    params = ClaimParams(queues=["q"], worker_id="w1", limit=2, now=T0 + 2)
    answers, jobs = store.job_complete_claim(
        [
            Completion(lease=a.lease, records=[rec(c, "a")]),
            Completion(lease=b.lease, records=[rec(c, "b")]),
        ],
        params,
    )
    assert answers == [True, False]
    assert len(jobs) == 2
    assert store.result_list(c) == [(1, "record a")]


@pytest.mark.parametrize("retry_delay", [None, 5.0], ids=["dead", "retried"])
def test_a_failure_keeps_its_records(store: Store, retry_delay: float | None) -> None:
    c = open_crawl(store)
    job = claim_one(store)
    failure = Failure(
        lease=job.lease, error="gave up", retry_delay=retry_delay, records=[rec(c, "a")]
    )
    assert store.job_fail([failure], now=T0 + 1) == [True]
    state = JobState.DEAD if retry_delay is None else JobState.PENDING
    assert get(store, job.id).state is state
    assert store.result_list(c) == [(1, "record a")]


def test_a_stale_failure_keeps_no_record(store: Store) -> None:
    c = open_crawl(store, jobs=2)
    a, b = claim(store, limit=2)
    assert release(store, a.lease, now=T0 + 1)
    failures = [
        Failure(lease=a.lease, error="x", retry_delay=None, records=[rec(c, "a")]),
        Failure(lease=b.lease, error="x", retry_delay=None, records=[rec(c, "b")]),
    ]
    assert store.job_fail(failures, now=T0 + 2) == [False, True]
    assert store.result_list(c) == [(1, "record b")]


def test_the_finished_crawl_has_every_record(store: Store) -> None:
    c = new_crawl(store, *(spec(args=[i]) for i in range(4))).id
    jobs = claim(store, limit=4)
    last = jobs.pop()
    assert (
        store.job_complete(
            [Completion(lease=j.lease, records=[rec(c, j.args[0])]) for j in jobs], now=T0 + 1
        )
        == [True] * 3
    )
    info = store.crawl_get(c)
    assert info is not None and info.state is CrawlState.RUNNING
    dead = Failure(lease=last.lease, error="x", retry_delay=None, records=[rec(c, "last")])
    assert store.job_fail([dead], now=T0 + 2) == [True]
    info = store.crawl_get(c)
    assert info is not None and info.state is CrawlState.FINISHED
    assert store.result_count(c) == 4
    found = sorted(text for _, text in store.result_list(c))
    assert found == ["record 0", "record 1", "record 2", "record last"]


def test_records_of_several_crawls_and_of_an_unknown_crawl(store: Store) -> None:
    c = open_crawl(store, name="one")
    other = open_crawl(store, name="two")
    job = claim_one(store)
    records = [rec(other, "x"), rec(c, "a"), rec(10**9, "nowhere"), rec(other, "y")]
    assert store.job_complete([Completion(lease=job.lease, records=records)], now=T0 + 1)
    assert store.result_list(c) == [(1, "record a")]
    assert store.result_list(other) == [(1, "record x"), (2, "record y")]


def test_record_text_comes_back_as_given(store: Store) -> None:
    c = open_crawl(store)
    job = claim_one(store)
    text = '{"title": "caf\u00e9 \U0001f600 \u2028 \\" \\\\ nul:\x00", "n": 1}'
    assert store.job_complete(
        [Completion(lease=job.lease, records=[rec(c, "a", text)])], now=T0 + 1
    )
    assert store.result_list(c) == [(1, text)]


@pytest.mark.parametrize(
    "bad",
    [(1, b"short", "r"), (1, bytes(16), "\udc80"), (0, bytes(16), "r"), (1, bytes(16))],
    ids=["short key", "lone surrogate", "crawl id 0", "two fields"],
)
def test_an_invalid_record_refuses_the_batch(store: Store, bad: object) -> None:
    c = open_crawl(store)
    job = claim_one(store)
    good = Completion(lease=job.lease, records=[rec(c, "a")])
    with pytest.raises(ConfigurationError):
        store.job_complete([good, Completion(lease=job.lease, records=[bad])], now=T0 + 1)  # type: ignore[list-item]
    dead = Failure(lease=job.lease, error="x", retry_delay=None, records=[bad])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError):
        store.job_fail([dead], now=T0 + 1)
    assert get(store, job.id).state is JobState.RUNNING
    assert store.result_count(c) == 0
