"""crawlq: a durable job queue made for web scraping and crawling.

Start with ``App``: ``app = crawlq.App("sqlite:///jobs.db")``, ``@app.task``, then
``task.schedule(...)`` and ``crawlq worker --app module:app``.
"""

from __future__ import annotations

from crawlq.app import App
from crawlq.config import WorkerSettings
from crawlq.context import JobContext
from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState
from crawlq.exceptions import (
    ConfigurationError,
    CrawlClosed,
    CrawlNotFound,
    CrawlqError,
    Discard,
    PayloadError,
    Retry,
    Snooze,
    StoreError,
    StoreUnavailable,
    TaskControl,
    TaskNotFound,
)
from crawlq.jobs import (
    ConflictPolicy,
    Job,
    JobSpec,
    JobState,
    Outcome,
    QueueStats,
    ScheduleResult,
    WorkerInfo,
    WorkerState,
)
from crawlq.limits import KeyLimit, Limits
from crawlq.periodic import CatchUp, Periodic
from crawlq.retry import Backoff
from crawlq.stores import Store, open_store
from crawlq.stores.base import JobFilter
from crawlq.tasks import Task, TaskOptions
from crawlq.worker import Worker

__version__ = "0.1.0"

__all__ = [
    "App",
    "Backoff",
    "CatchUp",
    "ConfigurationError",
    "ConflictPolicy",
    "CrawlClosed",
    "CrawlInfo",
    "CrawlNotFound",
    "CrawlSpec",
    "CrawlState",
    "CrawlqError",
    "Discard",
    "Job",
    "JobContext",
    "JobFilter",
    "JobSpec",
    "JobState",
    "KeyLimit",
    "Limits",
    "Outcome",
    "PayloadError",
    "Periodic",
    "QueueStats",
    "Retry",
    "ScheduleResult",
    "Snooze",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Task",
    "TaskControl",
    "TaskNotFound",
    "TaskOptions",
    "Worker",
    "WorkerInfo",
    "WorkerSettings",
    "WorkerState",
    "open_store",
]
