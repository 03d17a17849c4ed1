"""store_summary: crawls by state with the jobs they ended, limit keys and blocked keys,
equal to what listing every crawl and key finds (the figures of /metrics)."""

from __future__ import annotations

from store_helpers import T0, claim_one, complete, fail, new_crawl, spec

from crawlq.crawls import CrawlState
from crawlq.limits import Limits
from crawlq.stores.base import Store


def listed(store: Store, now: float) -> tuple[dict[CrawlState, int], dict[str, int], int, int]:
    crawls = dict.fromkeys(CrawlState, 0)
    ended = {"done": 0, "dead": 0, "cancelled": 0}
    for c in store.crawl_list():
        crawls[c.state] += 1
        for name in ended:
            ended[name] += getattr(c, name)
    keys = store.limit_list(limit=10_000)
    blocked = sum(k.blocked_until is not None and k.blocked_until > now for k in keys)
    return crawls, ended, len(keys), blocked


def test_an_empty_store(store: Store) -> None:
    s = store.store_summary(now=T0)
    assert s.crawls == dict.fromkeys(CrawlState, 0)
    assert (s.crawl_jobs, s.limit_keys, s.blocked_keys) == (
        {"done": 0, "dead": 0, "cancelled": 0}, 0, 0)  # fmt: skip


def test_summary_equals_the_listings(store: Store) -> None:
    done = new_crawl(store, spec(queue="a", limit_key="x.example"), name="done")
    assert complete(store, claim_one(store, ["a"]).lease)
    died = new_crawl(store, spec(queue="b", max_attempts=1, limit_key="y.example"), name="died")
    assert fail(store, claim_one(store, ["b"]).lease)
    paused = new_crawl(store, spec(queue="c"), spec(queue="c"), name="paused")
    assert store.crawl_pause(paused.id, now=T0)
    cancelled = new_crawl(store, spec(queue="d"), spec(queue="d"), name="cancelled")
    assert store.crawl_cancel(cancelled.id, now=T0)
    new_crawl(store, spec(queue="e", delay=100), name="running")
    store.limit_set("z.example", Limits(max_running=1), now=T0)
    store.limit_block("y.example", T0 + 60, now=T0)
    store.limit_block("w.example", T0 + 5, now=T0)

    for now in (T0, T0 + 10, T0 + 100):
        s = store.store_summary(now=now)
        assert (s.crawls, s.crawl_jobs, s.limit_keys, s.blocked_keys) == listed(store, now)
    s = store.store_summary(now=T0)
    assert s.crawls == {CrawlState.RUNNING: 1, CrawlState.PAUSED: 1,
                        CrawlState.FINISHED: 2, CrawlState.CANCELLED: 1}  # fmt: skip
    assert s.crawl_jobs == {"done": 1, "dead": 1, "cancelled": 2}
    assert s.blocked_keys == 2 and store.store_summary(now=T0 + 10).blocked_keys == 1
    assert done.id and died.id
