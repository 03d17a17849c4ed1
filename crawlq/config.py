"""Settings objects, their defaults, and store-URL parsing. The library never reads
environment variables: the CLI maps them into these objects."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from crawlq.exceptions import ConfigurationError
from crawlq.payload import check_count, check_name, check_seconds

DEFAULT_STORE_URL = "sqlite:///crawlq.db"
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_MAX_PAYLOAD_BYTES = 512 * 1024
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600.0
DEFAULT_CONCURRENCY = 8
DEFAULT_SHUTDOWN_GRACE = 30.0
DEFAULT_POLL_TIMEOUT = 1.0
MAX_PREFETCH = 10_000
"""The most jobs a worker may claim ahead of its free slots."""
RUNTIME_NAMES = ("thread", "asyncio", "process")
"""The runtimes a worker can use (``crawlq.worker.runtimes``)."""
MAX_CONCURRENCY = {"thread": 1024, "asyncio": 10_000, "process": 256}
"""The most slots a worker of each runtime may have: one thread, coroutine or child
process per slot. Above that, start more workers."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreURL:
    """A parsed store URL: ``scheme://location?option=value``."""

    scheme: str
    location: str
    options: dict[str, str]


def parse_store_url(url: str) -> StoreURL:
    """Split a store URL. ``sqlite:///jobs.db`` is a relative path, ``sqlite:////abs`` an
    absolute one."""
    parts = urlsplit(url)
    if not parts.scheme:
        raise ConfigurationError(f"store URL {url!r} has no scheme: use sqlite:///path/to/jobs.db")
    scheme = parts.scheme.lower()
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme == "sqlite":
        if parts.netloc:
            raise ConfigurationError(
                f"store URL {url!r} names a host; SQLite URLs have three slashes: "
                "sqlite:///relative/path.db or sqlite:////absolute/path.db"
            )
        location = parts.path[1:] if parts.path.startswith("/") else parts.path
        return StoreURL(scheme=scheme, location=location, options=options)
    return StoreURL(scheme=scheme, location=url.split("?", 1)[0], options=options)


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerSettings:
    """How a worker runs.

    - ``queues``: the queues to take jobs from (default: every queue of the app's tasks).
    - ``concurrency``: slots, i.e. jobs running at once (default 8).
    - ``prefetch``: extra jobs claimed ahead of free slots, held leased (default 0).
    - ``shutdown_grace``: seconds running jobs get to finish after SIGTERM (default 30).
    - ``poll_timeout``: longest wait between two claims when idle (default 1 s; stores
      with notifications wake up sooner).
    - ``burst``: exit when no job is due and none is running.
    - ``retention``: seconds done and cancelled jobs are kept before pruning (7 days).
    - ``runtime``: how jobs run: ``thread`` (default), ``asyncio`` or ``process``.
    - ``max_jobs_per_child``, ``max_memory_per_child`` (bytes): the process runtime
      replaces a child after that many jobs, or once its resident memory is above that,
      between two jobs (None: never).
    """

    queues: tuple[str, ...] = ()
    concurrency: int = DEFAULT_CONCURRENCY
    prefetch: int = 0
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    poll_timeout: float = DEFAULT_POLL_TIMEOUT
    burst: bool = False
    retention: float = DEFAULT_RETENTION_SECONDS
    runtime: str = "thread"
    max_jobs_per_child: int | None = None
    max_memory_per_child: int | None = None

    def __post_init__(self) -> None:
        if self.runtime not in RUNTIME_NAMES:
            raise ConfigurationError(
                f"unknown runtime {self.runtime!r}: use one of {', '.join(RUNTIME_NAMES)}"
            )
        for name in ("max_jobs_per_child", "max_memory_per_child"):
            value = getattr(self, name)
            if value is None:
                continue
            if self.runtime != "process":
                raise ConfigurationError(
                    f"{name} recycles child processes: it needs the process runtime "
                    f"(--runtime process), not {self.runtime!r}"
                )
            check_count(name, value, 1)
        most = MAX_CONCURRENCY[self.runtime]
        if (
            isinstance(self.concurrency, bool)
            or not isinstance(self.concurrency, int)
            or not 1 <= self.concurrency <= most
        ):
            raise ConfigurationError(
                f"concurrency must be a whole number from 1 to {most} for the {self.runtime} "
                f"runtime, not {self.concurrency!r:.40}; for more slots start more workers"
                + (
                    f" or use the asyncio runtime (up to {MAX_CONCURRENCY['asyncio']})"
                    if self.runtime == "thread"
                    else ""
                )
            )
        check_count("prefetch", self.prefetch, 0, MAX_PREFETCH)
        check_seconds("shutdown_grace", self.shutdown_grace, zero=True)
        check_seconds("poll_timeout", self.poll_timeout)
        check_seconds("retention", self.retention, zero=True)
        for queue in self.queues:
            check_name(queue, "queue name")
