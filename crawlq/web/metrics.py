"""``/metrics``: the store's state in the Prometheus exposition format, read at scrape time.

Every replica of the web process reads the same store, so every replica reports the same
numbers. Labels are queue and state only: no per-URL or per-host label (hosts can number
millions; the dashboard shows the busiest instead).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from crawlq.app import App
from crawlq.crawls import CrawlState
from crawlq.jobs import WorkerState

JOB_STATES = ("due", "scheduled", "waiting", "held", "running", "done", "dead", "cancelled")
"""The ``state`` label of ``crawlq_jobs``: the fields of ``crawlq stats --json``."""
PAGE = 1000


class StoreCollector(Collector):
    """Reads queue counts, crawls, workers and limit keys from the store on each scrape."""

    def __init__(self, app: App) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        store = self.app.store
        now = store.now()
        queues = store.queue_stats(now=now)
        jobs = GaugeMetricFamily(
            "crawlq_jobs", "Jobs by queue and state (as crawlq stats)", labels=["queue", "state"]
        )
        age = GaugeMetricFamily(
            "crawlq_queue_oldest_due_age_seconds",
            "Seconds the oldest due (past-due) job of the queue has waited; 0 if none",
            labels=["queue"],
        )
        done_minute = GaugeMetricFamily(
            "crawlq_jobs_done_last_minute", "Jobs done in the last minute", labels=["queue"]
        )
        for q in queues:
            for state in JOB_STATES:
                jobs.add_metric([q.queue, state], getattr(q, state))
            age.add_metric([q.queue], q.oldest_due_age or 0.0)
            done_minute.add_metric([q.queue], q.done_last_minute)
        yield jobs
        yield age
        yield done_minute

        crawls = {s: 0 for s in CrawlState}
        crawl_jobs = {"done": 0, "dead": 0, "cancelled": 0}
        after = 0
        while page := store.crawl_list(limit=PAGE, after_id=after):
            for c in page:
                crawls[c.state] += 1
                for name in crawl_jobs:
                    crawl_jobs[name] += getattr(c, name)
            after = page[-1].id
            if len(page) < PAGE:
                break
        by_state = GaugeMetricFamily("crawlq_crawls", "Crawls by state", labels=["state"])
        for state, n in crawls.items():
            by_state.add_metric([state.value], n)
        yield by_state
        ended = CounterMetricFamily(
            "crawlq_crawl_jobs_ended",
            "Jobs of crawls that ended, by how (crawl counters are never lowered by pruning)",
            labels=["state"],
        )
        for name, n in crawl_jobs.items():
            ended.add_metric([name], n)
        yield ended

        workers = store.worker_list(now=now)
        alive = [w for w in workers if w.state is WorkerState.ALIVE]
        yield GaugeMetricFamily("crawlq_workers_alive", "Workers heartbeating", len(alive))
        yield GaugeMetricFamily(
            "crawlq_worker_slots", "Slots of the alive workers", sum(w.concurrency for w in alive)
        )
        yield GaugeMetricFamily(
            "crawlq_workers_lost",
            "Workers whose heartbeat is overdue",
            sum(w.state is WorkerState.LOST for w in workers),
        )

        blocked = keys = 0
        cursor = ""
        while page_keys := store.limit_list(limit=PAGE, after=cursor):
            keys += len(page_keys)
            blocked += sum(k.blocked_until is not None and k.blocked_until > now for k in page_keys)
            cursor = page_keys[-1].key
            if len(page_keys) < PAGE:
                break
        yield GaugeMetricFamily("crawlq_limit_keys", "Limit keys the store has a record of", keys)
        yield GaugeMetricFamily("crawlq_limit_keys_blocked", "Limit keys blocked now", blocked)


def render(app: App) -> bytes:
    """The exposition text of one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(app))
    return generate_latest(registry)
