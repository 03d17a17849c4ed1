"""Seen sets: a crawl's fingerprints, added once for ever (``seen_add`` and
``JobSpec.fingerprint``), and the fingerprint rule of ``crawlq.fingerprint``."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from store_helpers import (
    T0,
    all_jobs,
    claim_one,
    complete,
    crawl_counts,
    crawl_of,
    new_crawl,
    release,
    schedule,
    spec,
)

from crawlq.exceptions import ConfigurationError, CrawlNotFound
from crawlq.fingerprint import FINGERPRINT_BYTES, fingerprint
from crawlq.jobs import Job, JobState, Outcome, ScheduleResult
from crawlq.stores.base import ClaimParams, Completion, JobFilter, Store


def fp(name: str | int) -> bytes:
    """A 16-byte fingerprint of a test name."""
    return hashlib.sha256(str(name).encode()).digest()[:16]


A, B, C, D = fp("a"), fp("b"), fp("c"), fp("d")


def open_crawl(store: Store, name: str = "c") -> int:
    """A crawl kept open by a job due far in the future."""
    return new_crawl(store, spec(queue="keep-open", delay=10**6), name=name).id


# -- seen_add ------------------------------------------------------------------------------


def test_seen_add_reports_new_fingerprints_and_repeats_within_a_batch(store: Store) -> None:
    c = open_crawl(store)
    assert store.seen_add(c, [A, B, A], now=T0) == [True, True, False]
    assert store.seen_add(c, [B, C, C, D, A], now=T0 + 1) == [False, True, False, True, False]
    assert store.seen_add(c, [], now=T0 + 2) == []
    assert crawl_of(store, c).seen == 4


def test_seen_add_to_an_unknown_crawl_raises(store: Store) -> None:
    with pytest.raises(CrawlNotFound):
        store.seen_add(1, [A], now=T0)
    c = open_crawl(store)
    with pytest.raises(CrawlNotFound):
        store.seen_add(c + 1000, [A], now=T0)
    assert crawl_of(store, c).seen == 0


# -- seen_has ------------------------------------------------------------------------------


def test_seen_has_reads_the_set_in_order_and_changes_nothing(store: Store) -> None:
    c, other = open_crawl(store), open_crawl(store, "other")
    assert store.seen_has(c, [A, B]) == [False, False]
    store.seen_add(c, [A, C], now=T0)
    schedule(store, spec(crawl=c, fingerprint=D))  # a job's fingerprint joins the set too
    assert store.seen_has(c, [A, B, C, D, A]) == [True, False, True, True, True]
    assert store.seen_has(c, []) == []
    assert store.seen_has(other, [A, C, D]) == [False, False, False]
    assert crawl_of(store, c).seen == 3 and crawl_of(store, other).seen == 0
    assert store.seen_add(c, [B], now=T0) == [True]  # B was read, not added


def test_seen_has_refuses_an_unknown_crawl_and_a_bad_fingerprint(store: Store) -> None:
    with pytest.raises(CrawlNotFound):
        store.seen_has(1, [A])
    c = open_crawl(store)
    with pytest.raises(CrawlNotFound):
        store.seen_has(c + 1000, [A])
    with pytest.raises(ConfigurationError, match="16 bytes"):
        store.seen_has(c, [b"short"])


def test_a_closed_crawl_still_takes_additions(store: Store) -> None:
    finished = new_crawl(store, name="empty")
    assert store.seen_add(finished.id, [A, B], now=T0) == [True, True]
    assert store.seen_add(finished.id, [A], now=T0) == [False]
    assert crawl_of(store, finished.id).seen == 2
    cancelled = open_crawl(store, "cancelled")
    assert store.crawl_cancel(cancelled, now=T0)
    assert store.seen_add(cancelled, [A], now=T0) == [True]
    assert crawl_of(store, cancelled).seen == 1


def test_each_crawl_has_its_own_seen_set(store: Store) -> None:
    one, two = open_crawl(store, "one"), open_crawl(store, "two")
    assert store.seen_add(one, [A, B], now=T0) == [True, True]
    assert store.seen_add(two, [B, C], now=T0) == [True, True]
    assert store.seen_add(one, [C], now=T0) == [True]
    assert (crawl_of(store, one).seen, crawl_of(store, two).seen) == (3, 2)
    [r1, r2] = schedule(store, spec(crawl=two, fingerprint=A), spec(crawl=one, fingerprint=A))
    assert r1.outcome is Outcome.CREATED
    assert r2 == ScheduleResult(0, Outcome.SEEN)
    assert (crawl_of(store, one).seen, crawl_of(store, two).seen) == (3, 3)


# -- JobSpec.fingerprint ---------------------------------------------------------------------


def test_a_fingerprinted_spec_is_scheduled_only_if_new(store: Store) -> None:
    c = open_crawl(store)
    first, repeat, other = schedule(
        store,
        spec(crawl=c, fingerprint=A, args=[1]),
        spec(crawl=c, fingerprint=A, args=[2]),
        spec(crawl=c, fingerprint=B, args=[3]),
    )
    assert first.outcome is Outcome.CREATED and other.outcome is Outcome.CREATED
    assert repeat == ScheduleResult(0, Outcome.SEEN)
    assert [j.args for j in all_jobs(store) if j.queue == "q"] == [[1], [3]]
    assert crawl_counts(store, c) == (3, 0, 0, 0, 0)  # 2 + the keep-open job
    assert crawl_of(store, c).seen == 2
    assert store.seen_add(c, [A, B, C], now=T0) == [False, False, True]
    [later] = schedule(store, spec(crawl=c, fingerprint=C))
    assert later == ScheduleResult(0, Outcome.SEEN)
    assert crawl_of(store, c).seen == 3
    assert len(all_jobs(store)) == 3


def test_a_long_mixed_batch_keeps_each_result_with_its_own_spec(store: Store) -> None:
    """150 specs in one call, long enough that a store may write them in several
    statements: most without a key (as a page's links and a bulk schedule are), every
    seventh fingerprinted in a crawl with a limit key (a fingerprint given again later in
    the batch is seen), some with a new unique key, some with the key of an earlier spec
    or of a job live before the call (merged into it). Each result is its own spec's, the
    created ids grow in spec order and each job holds the fields of the spec that made
    it or was merged into it last."""
    c = open_crawl(store)
    [live] = schedule(store, spec(key="live", args=[-1]))
    specs = []
    for i in range(150):
        if i % 50 == 25:
            specs.append(spec(key=f"k{i}", args=[i], timeout=1.5))
        elif i % 50 == 40:
            specs.append(spec(key=f"k{i - 15}", args=[i], priority=9))  # replaces k{i-15}
        elif i == 100:
            specs.append(spec(key="live", args=[i]))
        elif i % 7 == 0:
            specs.append(spec(crawl=c, fingerprint=fp(i % 21), args=[i], limit_key=f"h{i % 2}"))
        else:
            fields: dict[str, Any] = {"priority": i % 3, "delay": i % 5 + 0.25}
            fields["max_attempts"] = 1 + i % 4
            specs.append(spec(args=[i], kwargs={"i": i}, lease_seconds=30.0 + i, **fields))
    merged = {i: i - 15 for i in range(150) if i % 50 == 40}
    seen = set(range(21, 150, 7)) - set(merged)  # fp(i % 21) is new at 0, 7 and 14 only
    results = schedule(store, *specs)
    assert results[100] == ScheduleResult(live.job_id, Outcome.UPDATED)
    assert get_job(store, live.job_id).args == [100]
    for i, earlier in merged.items():
        assert results[i] == ScheduleResult(results[earlier].job_id, Outcome.UPDATED)
    assert all(results[i] == ScheduleResult(0, Outcome.SEEN) for i in seen)
    created = [(i, r.job_id) for i, r in enumerate(results) if i not in seen | {100, *merged}]
    assert all(results[i].outcome is Outcome.CREATED for i, _ in created)
    assert [job_id for _, job_id in created] == sorted({job_id for _, job_id in created})
    assert live.job_id < created[0][1]
    for i, job_id in created:
        job, wanted = get_job(store, job_id), specs[i]
        if i + 15 in merged:
            wanted = replace(specs[i + 15], timeout=None)
        assert (job.args, job.kwargs, job.key) == (wanted.args, wanted.kwargs, specs[i].key)
        assert (job.priority, job.max_attempts, job.lease_seconds, job.timeout) == (
            wanted.priority,
            wanted.max_attempts,
            wanted.lease_seconds,
            wanted.timeout,
        )
        assert (job.crawl_id, job.limit_key) == (wanted.crawl, wanted.limit_key)
        if wanted.crawl is None:
            assert job.run_at == T0 + wanted.delay
    assert crawl_of(store, c).seen == 3
    assert crawl_counts(store, c) == (4, 0, 0, 0, 0)  # 3 + the keep-open job


def get_job(store: Store, job_id: int) -> Job:
    job = store.job_get(job_id)
    assert job is not None
    return job


def test_a_seen_spec_writes_nothing_not_even_a_conflict_update(store: Store) -> None:
    c = open_crawl(store)
    [created] = schedule(store, spec(crawl=c, fingerprint=A, key="page", args=["old"]))
    before = all_jobs(store)
    [again] = schedule(
        store, spec(crawl=c, fingerprint=A, key="page", args=["new"], priority=9), now=T0 + 1
    )
    assert again == ScheduleResult(0, Outcome.SEEN)
    assert all_jobs(store) == before
    assert crawl_counts(store, c) == (2, 0, 0, 0, 0)
    assert created.job_id in [j.id for j in before]


def test_a_fingerprint_is_seen_for_ever_even_after_its_job_is_done(store: Store) -> None:
    c = open_crawl(store)
    [r] = schedule(store, spec(crawl=c, fingerprint=A))
    job = claim_one(store)
    assert job.id == r.job_id
    assert complete(store, job.lease, now=T0 + 1)
    assert store.job_prune(retention=0, now=T0 + 100) == 1
    assert store.job_get(job.id) is None
    [again] = schedule(store, spec(crawl=c, fingerprint=A), now=T0 + 101)
    assert again == ScheduleResult(0, Outcome.SEEN)
    assert crawl_of(store, c).seen == 1


def test_a_cancelled_job_keeps_its_fingerprint_counted_once(store: Store) -> None:
    c = new_crawl(store, spec(args=["parent"]), spec(queue="keep-open", delay=10**6)).id
    parent = claim_one(store)
    assert complete(store, parent.lease, now=T0 + 1, children=[spec(crawl=c, fingerprint=A)])
    [child] = store.job_list(JobFilter(state=JobState.PENDING, queue="q"))
    assert crawl_of(store, c).seen == 1
    assert store.job_cancel([child.id], now=T0 + 2) == [child.id]
    assert crawl_of(store, c).seen == 1
    [again] = schedule(store, spec(crawl=c, fingerprint=A), now=T0 + 3)
    assert again == ScheduleResult(0, Outcome.SEEN)
    assert store.seen_add(c, [A], now=T0 + 3) == [False]
    assert crawl_of(store, c).seen == 1


def test_a_fingerprint_needs_a_crawl(store: Store) -> None:
    with pytest.raises(ConfigurationError):
        schedule(store, spec(args=["fine"]), spec(fingerprint=A))
    assert all_jobs(store) == []


def test_start_jobs_are_fingerprinted_too(store: Store) -> None:
    info = new_crawl(
        store, spec(fingerprint=A, args=[1]), spec(fingerprint=A, args=[2]), spec(fingerprint=B)
    )
    assert (info.pending, info.seen) == (2, 2)
    assert [j.args for j in all_jobs(store)] == [[1], []]
    assert store.seen_add(info.id, [A, B, C], now=T0) == [False, False, True]


def test_fingerprints_of_children_join_the_seen_set_with_the_completion(store: Store) -> None:
    c = new_crawl(store, spec(args=["parent"], max_attempts=5), spec(queue="keep", delay=10**6))
    job = claim_one(store)
    kids = [
        spec(queue="kids", crawl=c.id, fingerprint=A, args=[1]),
        spec(queue="kids", crawl=c.id, fingerprint=A, args=[2]),
        spec(queue="kids", crawl=c.id, fingerprint=B, args=[3]),
    ]
    # a stale lease adds no child and no fingerprint
    assert release(store, job.lease, now=T0 + 1)
    assert not complete(store, job.lease, now=T0 + 2, children=kids)
    assert crawl_of(store, c.id).seen == 0
    again = claim_one(store, now=T0 + 3)
    assert complete(store, again.lease, now=T0 + 4, children=kids)
    assert [k.args for k in store.job_list(JobFilter(queue="kids"))] == [[1], [3]]
    assert crawl_of(store, c.id).seen == 2
    assert store.seen_add(c.id, [A, B], now=T0 + 5) == [False, False]


def test_seen_known_holds_what_this_store_object_scheduled_with_a_fingerprint(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    start = spec(queue="q0", fingerprint=C)
    c = new_crawl(store, spec(args=[1]), spec(args=[2]), spec(queue="keep", delay=10**6), start)
    other = open_crawl(store, "other")
    assert store.seen_known(c.id, C) and not store.seen_known(other, C)  # a start job's
    store.job_schedule([spec(queue="q0", crawl=other, fingerprint=D)], now=T0)
    assert store.seen_known(other, D)
    kids = [spec(queue="kids", crawl=c.id, fingerprint=A), spec(queue="kids", crawl=c.id)]
    job = claim_one(store)
    assert release(store, job.lease, now=T0 + 1)
    assert not complete(store, job.lease, now=T0 + 2, children=kids)  # not applied
    assert not store.seen_known(c.id, A)
    again = claim_one(store, now=T0 + 3)
    assert complete(store, again.lease, now=T0 + 4, children=kids)
    assert store.seen_known(c.id, A)
    assert not store.seen_known(other, A) and not store.seen_known(c.id, B)
    # the worker's call: completions and the next claim in one round trip
    last = claim_one(store, now=T0 + 5)
    done = Completion(lease=last.lease, children=[spec(queue="kids", crawl=c.id, fingerprint=B)])
    applied, _ = store.job_complete_claim([done], ClaimParams(queues=["none"], worker_id="w1"))
    assert applied == [True] and store.seen_known(c.id, B)
    assert not open_same_store().seen_known(c.id, A)  # what this store object learned
    assert store.crawl_delete(c.id, now=T0 + 6)
    assert not any(store.seen_known(c.id, f) for f in (A, B, C))
    assert store.seen_known(other, D)


def test_concurrent_adders_see_each_fingerprint_new_exactly_once(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    c = open_crawl(store)
    everything = [fp(i) for i in range(2_000)]
    stores = [store, *(open_same_store() for _ in range(3))]
    news: list[list[bytes]] = [[] for _ in stores]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def work(index: int) -> None:
        try:
            # thread i starts at a different place and covers 3/4 of the fingerprints,
            # in batches of 100 that overlap the other threads' batches
            start = index * 500
            mine = [everything[(start + k) % 2_000] for k in range(1_500)]
            if index % 2:
                mine.reverse()
            barrier.wait()
            for at in range(0, len(mine), 100):
                batch = mine[at : at + 100]
                answers = stores[index].seen_add(c, batch)
                assert len(answers) == len(batch)
                news[index].extend(f for f, new in zip(batch, answers, strict=True) if new)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    reported = [f for part in news for f in part]
    assert len(reported) == 2_000, "each fingerprint reported new exactly once"
    assert set(reported) == set(everything)
    assert crawl_of(store, c).seen == 2_000
    assert store.seen_add(c, everything[:10]) == [False] * 10


# -- crawlq.fingerprint ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("HTTP://Example.COM:80/a?b=2&a=1#frag", "http://example.com/a?a=1&b=2"),
        ("https://example.com", "https://EXAMPLE.com:443/"),
        ("http://example.com/%7Euser", "http://example.com/~user"),
    ],
)
def test_spellings_of_one_page_share_a_fingerprint(one: str, other: str) -> None:
    assert fingerprint(one) == fingerprint(other)
    assert len(fingerprint(one)) == FINGERPRINT_BYTES == 16
    assert isinstance(fingerprint(one), bytes)


def test_different_pages_have_different_fingerprints() -> None:
    pages = [
        "http://example.com/a",
        "http://example.com/b",
        "https://example.com/a",
        "http://example.com:8080/a",
        "http://example.com/a?x=1",
    ]
    assert len({fingerprint(p) for p in pages}) == len(pages)
