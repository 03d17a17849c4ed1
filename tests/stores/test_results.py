"""Crawl results: one record per crawled page, kept under a 16-byte key in its crawl and
numbered in order (``result_add``, ``result_list``, ``result_count``)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from itertools import pairwise

import pytest
from store_helpers import T0, new_crawl, spec

from crawlq.exceptions import ConfigurationError, CrawlNotFound
from crawlq.stores.base import Store


def key(name: str | int) -> bytes:
    """A 16-byte result key of a test name."""
    return hashlib.sha256(str(name).encode()).digest()[:16]


def record(name: str | int, **fields: object) -> str:
    return json.dumps({"url": f"https://example.com/{name}", "status": 200, **fields})


def open_crawl(store: Store, name: str = "c") -> int:
    """A crawl kept open by a job due far in the future."""
    return new_crawl(store, spec(queue="keep-open", delay=10**6), name=name).id


def everything(store: Store, crawl_id: int, page: int = 1000) -> list[tuple[int, str]]:
    """Every result of the crawl, paged."""
    found: list[tuple[int, str]] = []
    while batch := store.result_list(crawl_id, after=found[-1][0] if found else 0, limit=page):
        found.extend(batch)
    return found


# -- result_add ----------------------------------------------------------------------------


def test_new_keys_are_kept_and_repeats_keep_the_first_record(store: Store) -> None:
    c = open_crawl(store)
    A, B, C = key("a"), key("b"), key("c")
    assert store.result_add(c, [(A, "a1"), (B, "b1"), (A, "a2")], now=T0) == [True, True, False]
    assert store.result_add(c, [(B, "b2"), (C, "c1"), (C, "c2")], now=T0 + 1) == [
        False,
        True,
        False,
    ]
    assert store.result_add(c, [], now=T0 + 2) == []
    assert store.result_list(c) == [(1, "a1"), (2, "b1"), (3, "c1")]
    assert store.result_count(c) == 3


def test_sequence_numbers_are_positive_and_increase_across_batches(store: Store) -> None:
    c = open_crawl(store)
    for batch in range(10):
        items = [(key(f"{batch}-{i}"), record(f"{batch}/{i}")) for i in range(7)]
        items.append((key("0-0"), "a repeat is not numbered"))
        assert store.result_add(c, items, now=T0) == [True] * 7 + [False]
    found = store.result_list(c, limit=100)
    seqs = [seq for seq, _ in found]
    assert len(found) == 70 == store.result_count(c)
    assert seqs[0] > 0
    assert all(a < b for a, b in pairwise(seqs))
    assert [json.loads(r)["url"] for _, r in found] == [
        f"https://example.com/{b}/{i}" for b in range(10) for i in range(7)
    ]


def test_paging_with_after_and_limit_returns_every_record_once(store: Store) -> None:
    c = open_crawl(store)
    records = [record(i) for i in range(2_500)]
    for at in range(0, 2_500, 500):
        store.result_add(c, [(key(i), records[i]) for i in range(at, at + 500)], now=T0)
    for page in (1, 7, 1000, 3000):
        found = everything(store, c, page)
        assert [r for _, r in found] == records, page
    whole = store.result_list(c, limit=10_000)
    assert len(whole) == 2_500
    seqs = [seq for seq, _ in whole]
    middle = seqs[1_233]
    assert store.result_list(c, after=middle, limit=3) == whole[1_234:1_237]
    assert store.result_list(c, after=seqs[-1]) == []
    assert store.result_list(c, after=seqs[-1] + 1000) == []
    assert store.result_list(c, limit=0) == []
    assert len(store.result_list(c)) == 1000, "the default limit"


def test_a_crawl_without_results_lists_nothing(store: Store) -> None:
    c = open_crawl(store)
    assert store.result_list(c) == []
    assert store.result_count(c) == 0


def test_records_are_kept_exactly(store: Store) -> None:
    c = open_crawl(store)
    texts = [
        "",
        "ünïcode ✓ 日本語 🕷️",
        "a\x00b\r\n\t",
        json.dumps({"title": "x" * 600_000}),  # a big page's record
        "same text",
        "same text",  # two keys may hold equal records
    ]
    assert store.result_add(c, [(key(i), t) for i, t in enumerate(texts)]) == [True] * 6
    assert [r for _, r in store.result_list(c)] == texts


def test_each_crawl_has_its_own_results(store: Store) -> None:
    one, two = open_crawl(store, "one"), open_crawl(store, "two")
    A, B = key("a"), key("b")
    assert store.result_add(one, [(A, "one-a"), (B, "one-b")]) == [True, True]
    assert store.result_add(two, [(B, "two-b")]) == [True]
    assert store.result_add(one, [(B, "again")]) == [False]
    assert [r for _, r in store.result_list(one)] == ["one-a", "one-b"]
    assert [r for _, r in store.result_list(two)] == ["two-b"]
    assert (store.result_count(one), store.result_count(two)) == (2, 1)
    # sequence numbers belong to the crawl: the other crawl's records do not consume them
    assert store.result_list(two)[0][0] <= store.result_list(one)[1][0]


def test_a_closed_crawl_still_takes_results(store: Store) -> None:
    finished = new_crawl(store, name="empty")
    assert store.result_add(finished.id, [(key("a"), "late")]) == [True]
    cancelled = open_crawl(store, "cancelled")
    assert store.crawl_cancel(cancelled, now=T0)
    assert store.result_add(cancelled, [(key("a"), "late")]) == [True]
    paused = open_crawl(store, "paused")
    assert store.crawl_pause(paused, now=T0)
    assert store.result_add(paused, [(key("a"), "meanwhile")]) == [True]
    assert [store.result_count(c) for c in (finished.id, cancelled, paused)] == [1, 1, 1]


def test_results_stay_after_jobs_are_pruned(store: Store) -> None:
    c = new_crawl(store, spec(args=["page"])).id
    assert store.result_add(c, [(key("page"), "r")], now=T0) == [True]
    store.job_prune(retention=0, now=T0 + 10**7)
    assert [r for _, r in store.result_list(c)] == ["r"]
    assert store.result_count(c) == 1


def test_an_unknown_crawl_raises(store: Store) -> None:
    with pytest.raises(CrawlNotFound):
        store.result_add(1, [(key("a"), "r")])
    c = open_crawl(store)
    for call in (
        lambda: store.result_add(c + 1000, [(key("a"), "r")]),
        lambda: store.result_add(c + 1000, []),
        lambda: store.result_list(c + 1000),
        lambda: store.result_count(c + 1000),
    ):
        with pytest.raises(CrawlNotFound):
            call()
    assert store.result_count(c) == 0


@pytest.mark.parametrize(
    "bad",
    [b"", b"short", bytes(15), bytes(17), b"x" * 100, "a" * 16, None, bytearray(16)],
)
def test_a_key_that_is_not_16_bytes_is_refused(store: Store, bad: object) -> None:
    c = open_crawl(store)
    with pytest.raises(ConfigurationError, match=r"a result key is 16 bytes"):
        store.result_add(c, [(key("fine"), "ok"), (bad, "r")])  # type: ignore[list-item]
    assert store.result_count(c) == 0, "the whole batch is refused"


def test_bad_items_and_records_are_refused(store: Store) -> None:
    c = open_crawl(store)
    with pytest.raises(ConfigurationError, match="a result must be a str"):
        store.result_add(c, [(key("a"), b"bytes")])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="a result is not valid Unicode"):
        store.result_add(c, [(key("a"), "\udc80")])
    with pytest.raises(ConfigurationError, match="tuple"):
        store.result_add(c, [key("a")])  # type: ignore[list-item]
    assert store.result_count(c) == 0


def test_a_second_store_object_sees_the_results(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    c = open_crawl(store)
    store.result_add(c, [(key(i), record(i)) for i in range(5)])
    other = open_same_store()
    assert other.result_list(c) == store.result_list(c)
    assert other.result_add(c, [(key(4), "dup"), (key(5), record(5))]) == [False, True]
    assert store.result_count(c) == 6


def test_concurrent_writers_number_every_record_once_and_a_pager_skips_none(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    """4 threads with store objects of their own add 250 records each (in batches of 10,
    every key also offered by another thread), while a fifth pages through the results
    with ``after``: a record must never become visible after a higher seq was read."""
    c = open_crawl(store)
    writers = [open_same_store() for _ in range(4)]
    pager = open_same_store()
    errors: list[BaseException] = []
    new_by: list[list[bytes]] = [[] for _ in writers]
    collected: list[tuple[int, str]] = []
    done = threading.Event()
    barrier = threading.Barrier(len(writers) + 1)

    def write(index: int) -> None:
        try:
            # thread i owns records 250*i ... 250*i + 249 and also offers the first half
            # of the next thread's (those were new only for whoever came first)
            mine = [(key(n), record(n)) for n in range(250 * index, 250 * index + 250)]
            nxt = 250 * (index + 1)
            theirs = [(key(n % 1000), record(n % 1000)) for n in range(nxt, nxt + 125)]
            barrier.wait()
            for at in range(0, 250, 10):
                batch = mine[at : at + 10] + theirs[at // 2 : at // 2 + 5]
                answers = writers[index].result_add(c, batch)
                new_by[index].extend(k for (k, _), new in zip(batch, answers, strict=True) if new)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    def page() -> None:
        try:
            barrier.wait()
            while True:
                finished = done.is_set()  # read before the page: the last pass sees all
                after = collected[-1][0] if collected else 0
                batch = pager.result_list(c, after=after, limit=37)
                collected.extend(batch)
                if finished and not batch:
                    return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(len(writers))]
    reader = threading.Thread(target=page)
    reader.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    done.set()
    reader.join()
    assert errors == []
    final = everything(store, c)
    assert len(final) == 1_000 == store.result_count(c)
    assert len({r for _, r in final}) == 1_000
    assert {r for _, r in final} == {record(n) for n in range(1_000)}
    seqs = [seq for seq, _ in final]
    assert all(a < b for a, b in pairwise(seqs))
    reported = [k for part in new_by for k in part]
    assert len(reported) == 1_000 and set(reported) == {key(n) for n in range(1_000)}
    assert collected == final, "the concurrent pager skipped or repeated a record"


# -- result_get ----------------------------------------------------------------------------


def test_result_get_reads_the_records_of_keys(store: Store) -> None:
    c = open_crawl(store)
    A, B, C = key("a"), key("b"), key("c")
    store.result_add(c, [(A, "a1"), (B, "b1 ünïcode ✓"), (A, "a2")])
    assert store.result_get(c, [B, C, A, B]) == ["b1 ünïcode ✓", None, "a1", "b1 ünïcode ✓"]
    assert store.result_get(c, []) == []
    other = open_crawl(store, "other")
    assert store.result_get(other, [A]) == [None], "each crawl has its own results"
    with pytest.raises(CrawlNotFound):
        store.result_get(c + 1000, [A])
    with pytest.raises(ConfigurationError, match="a result key is 16 bytes"):
        store.result_get(c, [b"short"])
