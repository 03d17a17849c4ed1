"""Settings objects, their defaults, and store-URL parsing. The library never reads
environment variables: the CLI maps them into these objects."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Final, Literal
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
DEAD_AFTER = 30.0
"""Seconds without a heartbeat after which a worker is lost (``crawlq workers`` shows it
``lost``) and the next reap declares it dead and returns its jobs (every worker
heartbeats its record every 5 s)."""
MAX_PREFETCH = 10_000
"""The most jobs a worker may claim ahead of its free slots."""
PREFETCH_AUTO: Final = "auto"
"""The default prefetch: by the run time of the worker's recent jobs
(``crawlq.worker.prefetch``)."""
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


SQLITE_SPELLINGS = "sqlite:///relative/path.db or sqlite:////absolute/path.db"
"""How a SQLite store URL is written, for error messages."""

_URL_EXAMPLES = {
    "sqlite": SQLITE_SPELLINGS,
    "postgresql": "postgresql://user@host:5432/dbname",
    "postgres": "postgresql://user@host:5432/dbname",
    "redis": "redis://host:6379/0",
    "rediss": "rediss://host:6379/0",
}


def parse_store_url(url: str) -> StoreURL:
    """Split a store URL, written ``scheme://...``. ``sqlite:///jobs.db`` is a path
    relative to the current directory, ``sqlite:////abs/jobs.db`` an absolute one."""
    if not url.strip():
        raise ConfigurationError(
            f"the store URL is empty: give one, e.g. {SQLITE_SPELLINGS}, "
            "redis://host:6379/0 or postgresql://user@host/dbname"
        )
    parts = urlsplit(url)
    if not parts.scheme:
        raise ConfigurationError(f"store URL {url!r} has no scheme: use {SQLITE_SPELLINGS}")
    scheme = parts.scheme.lower()
    example = _URL_EXAMPLES.get(scheme, "scheme://...")
    if not url[len(parts.scheme) + 1 :].startswith("//"):
        raise ConfigurationError(
            f"store URL {url!r} lacks the // after {parts.scheme}: write {example}"
        )
    options = dict(parse_qsl(parts.query, keep_blank_values=True))
    if scheme == "sqlite":
        if parts.netloc:
            raise ConfigurationError(
                f"store URL {url!r} names a host; SQLite URLs have three slashes: {example}"
            )
        if not parts.path[1:]:
            raise ConfigurationError(f"store URL {url!r} names no file: write {example}")
        return StoreURL(scheme=scheme, location=parts.path[1:], options=options)
    return StoreURL(scheme=scheme, location=url.split("?", 1)[0], options=options)


def _holds_secret(url: str) -> bool:
    """Whether a store URL carries a password (``user:pw@`` or a ``?password=`` option)."""
    parts = urlsplit(url)
    if parts.password:
        return True
    return any("password" in name.lower() for name, _ in parse_qsl(parts.query))


def store_command(command: str, store_url: str | None, *, note: bool = True) -> str:
    """A ``crawlq`` command to print as a hint, with the ``--store`` that reaches this store,
    so that it works as printed: ``store_command("crawl-export 3", url)`` ->
    ``"`crawlq crawl-export 3 --store sqlite:///jobs.db`"`` (the URL shell-quoted).

    A URL that holds a password is never printed: the hint reads ``--store "$CRAWLQ_STORE"``
    and a note says that the variable must hold the store's URL. Without a URL (an App
    given an open ``Store``) it reads ``--store URL`` and the note says what URL stands
    for. ``note=False`` leaves the note out, for all but the last of several hints in one
    message.
    """
    if store_url is None:
        word, why = "URL", "URL: this app's store URL"
    elif _holds_secret(store_url):
        word = '"$CRAWLQ_STORE"'
        why = "with CRAWLQ_STORE set to the store URL, not printed as it holds a password"
    else:
        word, why = shlex.quote(store_url), ""
    hint = f"`crawlq {command} --store {word}`"
    return f"{hint} ({why})" if why and note else hint


def check_prefetch(value: object) -> int | Literal["auto"]:
    """``value`` if it is a worker's prefetch: ``"auto"`` or a whole number from 0 to
    ``MAX_PREFETCH``."""
    if value == PREFETCH_AUTO:
        return PREFETCH_AUTO
    try:
        return check_count("prefetch", value, 0, MAX_PREFETCH)
    except ConfigurationError:
        raise ConfigurationError(
            f'prefetch must be "{PREFETCH_AUTO}" or a whole number from 0 to {MAX_PREFETCH}, '
            f"not {value!r:.40}"
        ) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerSettings:
    """How a worker runs.

    - ``queues``: the queues to take jobs from (default: every queue of the app's tasks).
    - ``concurrency``: slots, i.e. jobs running at once (default 8).
    - ``prefetch``: extra jobs claimed ahead of free slots, held leased: a number, or
      ``"auto"`` (the default): as many as the slots start within 10 ms by the run time
      of recent jobs, at most 3 per slot (``crawlq.worker.prefetch``), so none for
      long jobs.
    - ``shutdown_grace``: seconds running jobs get to finish after SIGTERM (default 30).
    - ``poll_timeout``: longest wait between two claims when idle (default 1 s; stores
      with notifications wake up sooner).
    - ``burst``: exit when nothing is left that can run without outside action (none
      due, none running, none held back by its limit key for at most a minute).
    - ``retention``: seconds done and cancelled jobs are kept before pruning (7 days).
    - ``runtime``: how jobs run: ``thread`` (default), ``asyncio`` or ``process``.
    - ``max_jobs_per_child``, ``max_memory_per_child`` (bytes): the process runtime
      replaces a child after that many jobs, or once its resident memory is above that,
      between two jobs (None: never).
    """

    queues: tuple[str, ...] = ()
    concurrency: int = DEFAULT_CONCURRENCY
    prefetch: int | Literal["auto"] = PREFETCH_AUTO
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
        check_prefetch(self.prefetch)
        check_seconds("shutdown_grace", self.shutdown_grace, zero=True)
        check_seconds("poll_timeout", self.poll_timeout)
        check_seconds("retention", self.retention, zero=True)
        for queue in self.queues:
            check_name(queue, "queue name")
