"""Which crawlq crawl a Scrapy process joins, and its seeding sentinels.

Every process running the same spider (or the same ``CRAWLQ_CRAWL``) joins the one open
crawl of that name; the first one creates it, under a short lock in the store's cache, so
processes starting together create it once. The name's current crawl id is kept in the
cache; a name whose crawl has finished or was cancelled gets a new crawl.

A crawl must not finish while a process is still producing start requests, so each
process joining it schedules one *seeding sentinel* job into the crawl (queue
``scrapy:<name>:seeding``) and holds a lease on a sentinel until its ``start()`` is
exhausted and its start requests are stored; then it completes it. A process killed while
seeding leaves a sentinel whose lease lapses; whoever claims it next completes it once its
own ``start()`` is done (every process seeds the same start requests, and the seen set
stores each once).
"""

from __future__ import annotations

import secrets
import time

from crawlq.crawls import OPEN_CRAWL_STATES, CrawlInfo, CrawlSpec
from crawlq.exceptions import CrawlClosed, CrawlNotFound, StoreError
from crawlq.jobs import Job, JobSpec
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Store

SEED_TASK = "crawlq.scrapy.seeding"
REQUEST_TASK = "crawlq.scrapy.request"
NAME_TTL = 30 * 24 * 3600.0
"""How long the cache remembers a name's crawl id (renewed by every process joining)."""
LOCK_TTL = 10.0


def queue_of(name: str) -> str:
    return f"scrapy:{name}"


def seed_queue_of(name: str) -> str:
    return f"scrapy:{name}:seeding"


def sentinel(name: str, crawl_id: int | None, lease_seconds: float) -> JobSpec:
    return JobSpec(
        queue=seed_queue_of(name),
        task=SEED_TASK,
        crawl=crawl_id,
        lease_seconds=lease_seconds,
        max_attempts=1_000_000,
    )


def claim_seed(store: Store, name: str, worker_id: str, limit: int = 1) -> Job | None:
    jobs = store.job_claim(
        ClaimParams(queues=[seed_queue_of(name)], worker_id=worker_id, limit=limit)
    )
    return jobs[0] if jobs else None


def join(
    store: Store,
    name: str,
    *,
    meta: dict[str, str],
    limits: Limits | None,
    lease_seconds: float,
    worker_id: str,
    timeout: float = 60.0,
) -> tuple[CrawlInfo, Job | None]:
    """The open crawl named ``name``, joined with a seeding sentinel (created if the name
    has none), and the sentinel this process then holds."""
    key = f"crawlq.scrapy.crawl:{name}"
    token = secrets.token_hex(8)
    deadline = time.monotonic() + timeout
    while True:
        known = store.cache_get(key)
        info = store.crawl_get(int(known)) if known and known.isdigit() else None
        if info is not None and info.state in OPEN_CRAWL_STATES:
            try:
                store.job_schedule([sentinel(name, info.id, lease_seconds)])
            except (CrawlClosed, CrawlNotFound):
                continue  # it finished just now: look again
            store.cache_set(key, str(info.id), NAME_TTL)
            return info, claim_seed(store, name, worker_id)
        if store.cache_add(f"{key}:lock", token, LOCK_TTL):
            try:
                if store.cache_get(key) == known:
                    spec = CrawlSpec(name=name, meta=dict(meta), limits=limits)
                    info = store.crawl_create(spec, [sentinel(name, None, lease_seconds)])
                    store.cache_set(key, str(info.id), NAME_TTL)
                    return info, claim_seed(store, name, worker_id)
            finally:
                store.cache_delete(f"{key}:lock")
            continue
        if time.monotonic() > deadline:
            raise StoreError(f"could not join crawl {name!r}: its creation lock stayed taken")
        time.sleep(0.05)
