"""crawlq: a durable job queue made for web scraping and crawling.

Start with ``App``: ``app = crawlq.App("sqlite:///jobs.db")``, ``@app.task``, then
``task.schedule(...)`` (options: ``task.with_options(delay=...).schedule(...)``) and
``crawlq worker --app module:app``.
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
    JobCancelled,
    JobFailed,
    JobNotFound,
    PayloadError,
    Retry,
    Snooze,
    StoreError,
    StoreUnavailable,
    TaskControl,
    TaskNotFound,
    WaitTimeout,
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
from crawlq.specs import ScheduleOptions
from crawlq.stores import Store, open_store
from crawlq.stores.base import JobFilter
from crawlq.tasks import BoundTask, Task, TaskOptions
from crawlq.version import __version__ as __version__
from crawlq.worker import Worker

__all__ = [
    "App",
    "Backoff",
    "BoundTask",
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
    "JobCancelled",
    "JobContext",
    "JobFailed",
    "JobFilter",
    "JobNotFound",
    "JobSpec",
    "JobState",
    "KeyLimit",
    "Limits",
    "Outcome",
    "PayloadError",
    "Periodic",
    "QueueStats",
    "Retry",
    "ScheduleOptions",
    "ScheduleResult",
    "Snooze",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "Task",
    "TaskControl",
    "TaskNotFound",
    "TaskOptions",
    "WaitTimeout",
    "Worker",
    "WorkerInfo",
    "WorkerSettings",
    "WorkerState",
    "open_store",
]
