"""The cache: a small key/value store with a time to live, shared by every worker
(``cache_get``, ``cache_set``, ``cache_add``, ``cache_delete``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from store_helpers import T0

from crawlq.exceptions import ConfigurationError
from crawlq.stores.base import Store


def test_an_absent_key_reads_none(store: Store) -> None:
    assert store.cache_get("robots:example.com", now=T0) is None


def test_a_value_is_read_back_until_it_expires(store: Store) -> None:
    store.cache_set("robots:example.com", "User-agent: *\nDisallow: /private", 60, now=T0)
    for at in (T0, T0 + 1, T0 + 59.999):
        assert store.cache_get("robots:example.com", now=at) == (
            "User-agent: *\nDisallow: /private"
        )
    assert store.cache_get("robots:example.com", now=T0 + 60) is None
    assert store.cache_get("robots:example.com", now=T0 + 3600) is None


def test_a_fractional_ttl_is_kept(store: Store) -> None:
    store.cache_set("k", "v", 0.25, now=T0)
    assert store.cache_get("k", now=T0 + 0.2) == "v"
    assert store.cache_get("k", now=T0 + 0.25) is None


def test_set_overwrites_the_value_and_the_expiry(store: Store) -> None:
    store.cache_set("k", "first", 10, now=T0)
    store.cache_set("k", "second", 100, now=T0 + 5)
    assert store.cache_get("k", now=T0 + 50) == "second"
    store.cache_set("k", "third", 1, now=T0 + 50)  # a shorter ttl shortens it
    assert store.cache_get("k", now=T0 + 50.5) == "third"
    assert store.cache_get("k", now=T0 + 51) is None


def test_an_expired_entry_can_be_set_again(store: Store) -> None:
    store.cache_set("k", "old", 10, now=T0)
    assert store.cache_get("k", now=T0 + 20) is None
    store.cache_set("k", "new", 10, now=T0 + 20)
    assert store.cache_get("k", now=T0 + 25) == "new"


def test_keys_are_independent(store: Store) -> None:
    store.cache_set("a", "1", 10, now=T0)
    store.cache_set("b", "2", 20, now=T0)
    store.cache_set("a:b", "3", 30, now=T0)
    assert [store.cache_get(k, now=T0 + 15) for k in ("a", "b", "a:b", "A")] == [
        None,
        "2",
        "3",
        None,
    ]


def test_add_sets_only_an_absent_or_expired_entry(store: Store) -> None:
    assert store.cache_add("lock:example.com", "worker-1", 30, now=T0)
    assert not store.cache_add("lock:example.com", "worker-2", 30, now=T0 + 1)
    assert store.cache_get("lock:example.com", now=T0 + 1) == "worker-1"
    assert not store.cache_add("lock:example.com", "worker-2", 30, now=T0 + 29.9)
    # expired: the next caller takes it, for its own ttl
    assert store.cache_add("lock:example.com", "worker-2", 5, now=T0 + 30)
    assert store.cache_get("lock:example.com", now=T0 + 34) == "worker-2"
    assert store.cache_get("lock:example.com", now=T0 + 35) is None
    # a value written by set counts as present too
    store.cache_set("other", "x", 10, now=T0)
    assert not store.cache_add("other", "y", 10, now=T0)
    assert store.cache_get("other", now=T0) == "x"


def test_delete_removes_an_entry_and_frees_it_for_add(store: Store) -> None:
    store.cache_set("k", "v", 100, now=T0)
    store.cache_set("kept", "v", 100, now=T0)
    store.cache_delete("k")
    assert store.cache_get("k", now=T0) is None
    assert store.cache_get("kept", now=T0) == "v"
    assert store.cache_add("k", "mine", 100, now=T0)
    store.cache_delete("never-set")  # nothing to do, no error


def test_big_values_are_kept_whole(store: Store) -> None:
    robots = "".join(f"Disallow: /path/{i}/\n" for i in range(30_000))  # about 600 KiB
    big = "é" * (512 * 1024)  # 1 MiB of UTF-8
    store.cache_set("robots", robots, 60, now=T0)
    assert store.cache_add("big", big, 60, now=T0)
    assert store.cache_get("robots", now=T0) == robots
    assert store.cache_get("big", now=T0) == big


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("héllo wörld", "ünïcode ✓ 日本語 🕷️"),
        ("", "an empty key"),
        ("empty value", ""),
        ("with\x00nul", "a\x00b\r\n\t"),
        ("a key with spaces and {braces} and * and ?", "x"),
        ("a long key " + "🕷️" * 10_000, "keys of any length"),
    ],
)
def test_any_text_is_a_key_or_a_value(store: Store, key: str, value: str) -> None:
    store.cache_set(key, value, 60, now=T0)
    assert store.cache_get(key, now=T0) == value
    store.cache_delete(key)
    assert store.cache_get(key, now=T0) is None
    assert store.cache_add(key, value, 60, now=T0)
    assert store.cache_get(key, now=T0) == value


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf"), "10", None])
def test_a_ttl_must_be_a_positive_number_of_seconds(store: Store, ttl: object) -> None:
    with pytest.raises(ConfigurationError, match="ttl"):
        store.cache_set("k", "v", ttl, now=T0)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="ttl"):
        store.cache_add("k", "v", ttl, now=T0)  # type: ignore[arg-type]
    assert store.cache_get("k", now=T0) is None


def test_text_that_is_not_unicode_is_refused_with_a_clear_error(store: Store) -> None:
    with pytest.raises(ConfigurationError, match="cache value is not valid Unicode"):
        store.cache_set("k", "half a pair \udc80", 60, now=T0)
    with pytest.raises(ConfigurationError, match="cache key is not valid Unicode"):
        store.cache_get("\ud800", now=T0)
    with pytest.raises(ConfigurationError, match="cache value must be a str"):
        store.cache_set("k", b"bytes", 60, now=T0)  # type: ignore[arg-type]
    assert store.cache_get("k", now=T0) is None


def test_the_store_clock_is_used_without_now(store: Store) -> None:
    store.cache_set("k", "v", 300)
    assert store.cache_get("k") == "v"
    assert store.cache_get("k", now=store.now() + 301) is None
    assert not store.cache_add("k", "w", 300)
    store.cache_set("short", "v", 2.5)
    assert store.cache_get("short") == "v"
    assert store.cache_get("short", now=store.now() + 2.6) is None


def test_job_prune_removes_expired_entries_only(store: Store, store_name: str) -> None:
    """The SQL stores delete expired entries in ``job_prune`` (Redis lets them expire
    natively: tests/unit/test_redis_store.py)."""
    store.cache_set("old", "v", 10, now=T0)
    store.cache_set("new", "v", 1000, now=T0)
    store.job_prune(retention=3600, now=T0 + 100)
    assert store.cache_get("new", now=T0 + 100) == "v"
    assert store.cache_get("old", now=T0 + 100) is None
    if store_name != "redis":
        assert store.cache_get("old", now=T0 + 5) is None, "deleted: gone for any now"
    assert store.cache_add("old", "again", 10, now=T0 + 100)


def test_a_second_store_object_shares_the_cache(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    other = open_same_store()
    store.cache_set("robots:a", "rules", 60, now=T0)
    assert other.cache_get("robots:a", now=T0) == "rules"
    assert not other.cache_add("robots:a", "mine", 60, now=T0)
    other.cache_delete("robots:a")
    assert store.cache_get("robots:a", now=T0) is None


def test_of_concurrent_adders_exactly_one_wins(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    """8 threads, each with a store object of its own (as 8 processes would have), race
    ``cache_add`` on one key, round after round: exactly one wins each round."""
    stores = [store, *(open_same_store() for _ in range(7))]
    rounds = 20
    wins: list[list[int]] = [[] for _ in range(rounds)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def race(index: int) -> None:
        try:
            for r in range(rounds):
                barrier.wait()
                if stores[index].cache_add(f"lock:{r}", f"worker-{index}", 60):
                    wins[r].append(index)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [len(w) for w in wins] == [1] * rounds
    for r, [winner] in enumerate(wins):
        assert store.cache_get(f"lock:{r}") == f"worker-{winner}"


def test_concurrent_adders_of_an_expired_entry_replace_it_once(
    store: Store, open_same_store: Callable[[], Store]
) -> None:
    stores = [store, *(open_same_store() for _ in range(7))]
    store.cache_set("lock", "stale", 10, now=T0)
    winners: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(stores))

    def race(index: int) -> None:
        try:
            barrier.wait()
            if stores[index].cache_add("lock", f"worker-{index}", 60, now=T0 + 10):
                winners.append(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    [winner] = winners
    assert store.cache_get("lock", now=T0 + 10) == f"worker-{winner}"
