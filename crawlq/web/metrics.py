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
from crawlq.jobs import WorkerState

JOB_STATES = ("due", "scheduled", "waiting", "held", "running", "done", "dead", "cancelled")
"""The ``state`` label of ``crawlq_jobs``: the fields of ``crawlq stats --json``."""


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

        totals = store.queue_totals()
        for name, help_text, field in (
            ("crawlq_jobs_enqueued", "Jobs created", "enqueued"),
            ("crawlq_jobs_completed", "Jobs that became done", "completed"),
            ("crawlq_job_attempts_failed", "Failed attempts (retried or dead-lettered)", "failed"),
            ("crawlq_jobs_retried", "Failed attempts sent back to pending", "retried"),
            ("crawlq_jobs_dead_lettered", "Jobs that became dead", "dead_lettered"),
        ):
            family = CounterMetricFamily(name, help_text + " (kept by the store)", labels=["queue"])
            for t in totals:
                family.add_metric([t.queue], getattr(t, field))
            yield family

        summary = store.store_summary(now=now)
        by_state = GaugeMetricFamily("crawlq_crawls", "Crawls by state", labels=["state"])
        for state, n in summary.crawls.items():
            by_state.add_metric([state.value], n)
        yield by_state
        ended = CounterMetricFamily(
            "crawlq_crawl_jobs_ended",
            "Jobs of crawls that ended, by how (crawl counters are never lowered by pruning)",
            labels=["state"],
        )
        for name, n in summary.crawl_jobs.items():
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

        yield GaugeMetricFamily(
            "crawlq_limit_keys", "Limit keys the store has a record of", summary.limit_keys
        )
        yield GaugeMetricFamily(
            "crawlq_limit_keys_blocked", "Limit keys blocked now", summary.blocked_keys
        )


def render(app: App) -> bytes:
    """The exposition text of one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(app))
    return generate_latest(registry)
