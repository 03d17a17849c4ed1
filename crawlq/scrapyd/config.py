"""How the Scrapyd plug-ins read ``scrapyd.conf``, share one store per process, and turn
Scrapyd's queue messages into crawlq jobs and back.

A Scrapyd message is the dict ``schedule.json`` builds: the spider ``name``, ``_job``
(the job id), ``_version`` if given, ``settings`` (a dict) and the spider arguments. Its
crawlq job has queue ``scrapyd:<project>``, task = the spider name, and the rest of the
message as keyword arguments (JSON, so ints stay ints and text stays text).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from dataclasses import dataclass
from typing import Any, ClassVar

from crawlq.app import App
from crawlq.config import DEFAULT_LEASE_SECONDS, DEFAULT_MAX_ATTEMPTS
from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Job, JobSpec
from crawlq.payload import check_count, check_name, check_seconds, encode_arguments
from crawlq.types import JSONValue

QUEUE_PREFIX = "scrapyd:"
"""A Scrapyd project's crawlq queue is this prefix and the project's name."""
PRIORITY_SCALE = 1000
"""Scrapyd priorities are floats, crawlq's whole numbers: a job's crawlq priority is its
Scrapyd priority times this, rounded (so three decimals are kept)."""
PLUGINS = {
    "spiderqueue": "crawlq.scrapyd.SpiderQueue",
    "poller": "crawlq.scrapyd.Poller",
    "launcher": "crawlq.scrapyd.Launcher",
    "jobstorage": "crawlq.scrapyd.JobStorage",
}
"""The ``[scrapyd]`` options that must name crawlq's classes, and those classes."""


def queue_name(project: str) -> str:
    return QUEUE_PREFIX + check_name(project, "Scrapyd project name")


def project_of(queue: str) -> str | None:
    """The project of a Scrapyd queue name, None for any other queue."""
    return queue[len(QUEUE_PREFIX) :] if queue.startswith(QUEUE_PREFIX) else None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScrapydSettings:
    """The crawlq options of ``scrapyd.conf``'s ``[scrapyd]`` section.

    - ``crawlq_store``: the store URL (else the ``CRAWLQ_STORE`` environment variable).
    - ``crawlq_lease``: seconds a server may go without renewing a running job's lease
      before another server may run the job again (default 30).
    - ``crawlq_max_attempts``: runs of a job, a crash of its server included, before it
      goes to the dead-letter queue (default 3).
    - ``node_name``: Scrapyd's own option, the server's name in leases (default: host).
    """

    store: str
    lease: float = DEFAULT_LEASE_SECONDS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    node: str = ""

    @classmethod
    def from_config(cls, config: Any) -> ScrapydSettings:
        store = config.get("crawlq_store", "") or os.environ.get("CRAWLQ_STORE", "")
        if not store:
            raise ConfigurationError(
                "crawlq.scrapyd has no store: add crawlq_store = postgresql://... (or "
                "redis://..., sqlite:///...) to the [scrapyd] section of scrapyd.conf, or "
                "set CRAWLQ_STORE"
            )
        try:
            lease = float(config.get("crawlq_lease", str(DEFAULT_LEASE_SECONDS)))
            attempts = int(config.get("crawlq_max_attempts", str(DEFAULT_MAX_ATTEMPTS)))
        except ValueError as exc:
            raise ConfigurationError(
                f"scrapyd.conf: crawlq_lease must be seconds and crawlq_max_attempts a whole "
                f"number ({exc})"
            ) from None
        return cls(
            store=store,
            lease=check_seconds("crawlq_lease", lease),
            max_attempts=check_count("crawlq_max_attempts", attempts, 1),
            node=config.get("node_name", "") or socket.gethostname(),
        )


def check_plugins(config: Any) -> None:
    """Refuse a ``scrapyd.conf`` that mixes crawlq's classes with Scrapyd's own: the
    poller leases jobs that only crawlq's launcher renews and acknowledges."""
    wrong = [
        f"{option} = {config.get(option, '') or '(unset)'}"
        for option in ("spiderqueue", "poller", "launcher")
        if config.get(option, "") != PLUGINS[option]
    ]
    if wrong:
        raise ConfigurationError(
            "crawlq.scrapyd's classes work together: set "
            + ", ".join(f"{option} = {path}" for option, path in PLUGINS.items())
            + f" in the [scrapyd] section of scrapyd.conf (it has {', '.join(wrong)})"
        )


_APPS: dict[str, App] = {}
_APPS_LOCK = threading.Lock()
_WORKER_IDS: dict[str, str] = {}


def app_for(settings: ScrapydSettings) -> App:
    """One App per store URL in this process: the queues, poller, launcher and job storage
    of a Scrapyd server share its connections (Scrapyd rebuilds its queues on every
    deploy). The store opens on first use, so a store that is down at start-up does not
    stop Scrapyd."""
    with _APPS_LOCK:
        app = _APPS.get(settings.store)
        if app is None:
            app = _APPS[settings.store] = App(settings.store)
        return app


def worker_id(settings: ScrapydSettings) -> str:
    """This Scrapyd process's worker id in the store: ``scrapyd:<node>:<pid>:<random>``."""
    with _APPS_LOCK:
        if settings.node not in _WORKER_IDS:
            token = secrets.token_hex(3)
            _WORKER_IDS[settings.node] = f"scrapyd:{settings.node}:{os.getpid()}:{token}"
        return _WORKER_IDS[settings.node]


def to_spec(
    settings: ScrapydSettings,
    app: App,
    project: str,
    name: str,
    priority: float,
    message: dict[str, Any],
) -> JobSpec:
    """The crawlq job of a Scrapyd message (``message`` without ``name``)."""
    check_name(name, "spider name")
    _, kwargs = encode_arguments(f"{project}/{name}", (), message, max_bytes=app.max_payload_bytes)
    try:
        scaled = round(float(priority) * PRIORITY_SCALE)
    except (TypeError, ValueError, OverflowError):
        raise ConfigurationError(f"priority must be a number, not {priority!r:.40}") from None
    return JobSpec(
        queue=queue_name(project),
        task=name,
        kwargs=kwargs,
        priority=scaled,
        max_attempts=settings.max_attempts,
        lease_seconds=settings.lease,
    )


def to_message(job: Job) -> dict[str, JSONValue]:
    """The Scrapyd message of a crawlq job: its keyword arguments and ``name``."""
    return {**job.kwargs, "name": job.task}


def close_apps() -> None:
    """Close every store this process opened for Scrapyd (at shutdown, and in tests)."""
    with _APPS_LOCK:
        apps = list(_APPS.values())
        _APPS.clear()
    for app in apps:
        app.close()


class TwistedLogHandler(logging.Handler):
    """Sends crawlq's log records to Twisted's log, which is Scrapyd's log."""

    LEVELS: ClassVar[dict[int, str]] = {
        logging.DEBUG: "debug",
        logging.INFO: "info",
        logging.WARNING: "warn",
        logging.ERROR: "error",
        logging.CRITICAL: "critical",
    }

    def emit(self, record: logging.LogRecord) -> None:
        from twisted.logger import Logger

        level = self.LEVELS.get(record.levelno, "error")
        text = self.format(record)
        getattr(Logger(namespace=record.name), level)("{text}", text=text)


def log_to_scrapyd() -> None:
    """Route the ``crawlq`` loggers (INFO and up) into Scrapyd's log, once."""
    root = logging.getLogger("crawlq")
    if not any(isinstance(h, TwistedLogHandler) for h in root.handlers):
        root.addHandler(TwistedLogHandler())
        if root.level == logging.NOTSET:
            root.setLevel(logging.INFO)
        root.propagate = False
