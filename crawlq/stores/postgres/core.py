"""The PostgreSQL store's settings, its pooled calls (``_run``), error translation, the
statement text rewrites its plans need (``limited``, ``filtered``) and its rows decoded
(``crawlq.stores.codec``): what every part of the store (``jobs.py``, ``queues.py``,
``workers.py``, ``crawls.py``, ``storage.py``) runs its statements through.
"""

from __future__ import annotations

import functools
import logging
import math
import operator
import re
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg import errors
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow

from crawlq.crawls import CrawlInfo
from crawlq.exceptions import ConfigurationError, StoreError, StoreUnavailable
from crawlq.jobs import Job
from crawlq.limits import KeyLimit
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.checks import driver_errors
from crawlq.stores.codec import as_read, crawl_info, job_from_row, key_limit, request_from_row
from crawlq.stores.conflict import Request
from crawlq.stores.postgres.connections import Connections

T = TypeVar("T")
Conn = psycopg.Connection[DictRow]

Q = load_queries("crawlq.stores.postgres")


@functools.lru_cache(maxsize=512)
def limited(name: str, limit: int | None) -> str:
    """``Q[name]`` with its LIMIT written into the text. The session runs prepared
    statements on their generic plan, and a generic ``LIMIT $n`` is planned as a tenth of
    the rows: with a million due jobs the claim then sorts them all (35 ms a claim, not
    1). With the number in the text each limit gets its own plan, which reads the claim
    index in order."""
    return Q[name].replace("%(limit)s", "NULL" if limit is None else str(operator.index(limit)))


OPTIONAL_FILTER = re.compile(r"^\s*AND \(%\((\w+)\)s::[\w\[\]0-9]+ IS NULL OR .*\)\s*$")


def filtered(sql: str, params: Mapping[str, Any]) -> str:
    """``sql`` without its optional filter lines (``AND (%(x)s IS NULL OR ...)``) whose
    parameter is None. On a generic plan those lines hide the filter's selectivity: with
    all of them the planner expects one row and sorts a million instead of reading the
    primary key in order (1 s a page, not 1 ms); each set of filters gets its own plan."""
    kept = []
    for line in sql.splitlines(keepends=True):
        match = OPTIONAL_FILTER.match(line)
        if match is None or params.get(match.group(1)) is not None:
            kept.append(line)
    return "".join(kept)


logger = logging.getLogger("crawlq.stores.postgres")

COMPACT_AFTER = 1000
"""Count deltas that ``queue_stats`` lets pile up before it folds them itself."""
ANALYZE_ROWS = 1000
"""Live rows from which a job table that was never analyzed is analyzed by the store."""
ANALYZE_LOOK_EVERY = 5.0
"""Seconds between two looks at whether the job table was ever analyzed."""
VACUUM_DEAD_ROWS = 10_000
"""Dead row versions in the job table from which the store vacuums it (``_vacuum_claimed``),
when they are also ``VACUUM_DEAD_SHARE`` of its live rows or more."""
VACUUM_DEAD_SHARE = 0.05
"""The share of the job table's live rows its dead row versions must reach to be vacuumed
(a vacuum reads every index whole: about 0.1 s on 1,000,000 rows)."""
VACUUM_LOOK_EVERY = 2.0
"""Seconds between two looks at the job table's dead row versions."""

MAX_ATTEMPTS = 8
"""Tries of one call that lost a race (deadlock, a key taken meanwhile) before it fails."""

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_LIBPQ_DEFAULTS = {
    "application_name": "crawlq",
    "connect_timeout": "10",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class PostgresSettings:
    """How the PostgreSQL store connects.

    - ``url``: a libpq URL, ``postgresql://user:password@host:port/dbname``.
    - ``schema``: the schema that holds crawlq's tables (default ``crawlq``): lower-case
      letters, digits and ``_``, not starting with a digit or ``pg_``.
    - ``pool_size``: most pooled connections this Store object opens (default 10); each
      concurrent ``job_wait`` uses one more, of its own.
    - ``pool_timeout``: seconds a call waits for a working connection before raising
      ``StoreUnavailable`` (default 10).
    - ``libpq``: other libpq parameters (``sslmode``, ``connect_timeout``, ...).
    """

    url: str
    schema: str = "crawlq"
    pool_size: int = 10
    pool_timeout: float = 10.0
    libpq: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _SCHEMA_NAME.fullmatch(self.schema) or self.schema.startswith("pg_"):
            raise ConfigurationError(
                f"schema={self.schema!r} is not a usable schema name: use lower-case letters, "
                "digits and '_' (at most 63, not starting with a digit or 'pg_'), e.g. "
                "?schema=crawlq"
            )
        if self.pool_size < 1 or self.pool_timeout <= 0:
            raise ConfigurationError("pool_size must be at least 1 and pool_timeout positive")

    def conninfo(self) -> str:
        """The libpq connection string; a bad parameter is a ConfigurationError."""
        try:
            return make_conninfo(self.url, **{**_LIBPQ_DEFAULTS, **self.libpq})
        except psycopg.ProgrammingError as exc:
            raise ConfigurationError(
                f"bad PostgreSQL store URL or option: {exc}; crawlq's own options are "
                "schema, pool_size and pool_timeout, the others go to libpq"
            ) from exc


_TRANSIENT_CLASSES = ("08", "40", "53", "57", "58")
"""SQLSTATE classes that a later call may not meet: connection exception, transaction
rollback (deadlock, serialization), insufficient resources (too many connections, disk
full), operator intervention (shutdown, restart, cancel) and system error (I/O)."""


def transient(exc: psycopg.Error) -> bool:
    """Whether the store may take the same call later (StoreUnavailable). Errors about the
    data or the statement (a value out of range, an index row too large, a violated
    constraint, a missing privilege) are permanent: the same call fails the same way."""
    state = exc.sqlstate
    if state is None:  # raised by the client: the connection was lost, or never made
        return isinstance(exc, psycopg.OperationalError)
    return state[:2] in _TRANSIENT_CLASSES or state == "55P03"  # lock_not_available


def translate(operation: str) -> AbstractContextManager[None]:
    """Turn driver errors into crawlq errors, keeping the cause: ``StoreUnavailable`` for
    transient ones, ``StoreError`` for permanent ones."""

    def why(exc: Exception) -> str | None:
        assert isinstance(exc, psycopg.Error)
        return "PostgreSQL is unavailable" if transient(exc) else None

    return driver_errors("PostgreSQL", operation, psycopg.Error, why)


class Restart(Exception):
    """The call lost a race with another transaction and must run again from the start."""


_RETRY = (errors.DeadlockDetected, errors.SerializationFailure, errors.UniqueViolation, Restart)


def row_job(row: DictRow) -> Job:
    return job_from_row(row, as_read)


def row_request(row: DictRow) -> Request:
    """The request a pending job's row holds (its own run_at, not its front's)."""
    return request_from_row(row, as_read, row["own_run_at"])


def row_crawl(row: DictRow) -> CrawlInfo:
    return crawl_info(row, row["meta"])


def row_key_limit(row: DictRow) -> KeyLimit:
    return key_limit(row, row["next_start"])


def opt_float(value: float | None) -> float | None:
    """Array parameters need one element type: 30 and 0.5 must both be floats."""
    return None if value is None else float(value)


def pg_text(value: str) -> str:
    """PostgreSQL text cannot hold NUL: an error message shows it as ``\\x00`` instead of
    failing the call (and the worker's retries of it) for ever."""
    return value.replace("\x00", "\\x00")


def first_of_each(items: Sequence[Hashable]) -> list[int]:
    """Indexes of the first occurrence of each item (a lease, a result key), in order."""
    seen: set[Hashable] = set()
    first: list[int] = []
    for i, item in enumerate(items):
        if item not in seen:
            seen.add(item)
            first.append(i)
    return first


class PostgresCore:
    """What every part of the PostgreSQL store runs its statements through: pooled
    connections, one transaction per call (run again when it lost a race), the
    folding of count deltas, the job table's first analyze and its vacuums in a drain."""

    settings: PostgresSettings
    _connections: Connections
    _listeners: list[Conn]
    _listeners_lock: threading.Lock
    _closed: bool
    _analyze_next: float
    """When (monotonic) ``_analyze_once`` looks next; infinity once it has no more to do."""
    _vacuum_next: float
    """When (monotonic) ``_vacuum_claimed`` looks next; infinity if this role may not vacuum."""
    _vacuuming: threading.Lock
    """Held while a vacuum of the job table runs (one at a time per store)."""

    def _run(self, operation: str, work: Callable[[Conn], T], *, transaction: bool = True) -> T:
        """Run ``work`` on a pooled connection, in one transaction unless told otherwise;
        a transaction that lost a race (deadlock, key taken meanwhile) runs again."""
        with translate(operation):
            for attempt in range(1, MAX_ATTEMPTS + 1):
                try:
                    with self._connections.borrow() as conn:
                        if not transaction:
                            return work(conn)
                        with conn.transaction():
                            return work(conn)
                except _RETRY as exc:
                    if attempt == MAX_ATTEMPTS:
                        raise StoreUnavailable(
                            f"PostgreSQL is busy: {operation} kept losing races with other "
                            f"transactions ({exc})"
                        ) from exc
                    time.sleep(0.001 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _execute(self, operation: str, query: str, params: dict[str, Any]) -> list[DictRow]:
        """One statement (its own transaction); the rows it returns, if any."""

        def work(conn: Conn) -> list[DictRow]:
            cursor = conn.execute(Q[query], params)
            return cursor.fetchall() if cursor.description is not None else []

        return self._run(operation, work, transaction=False)

    def _analyze_once(self) -> None:
        """Analyze the job table if it holds ``ANALYZE_ROWS`` rows or more and was never
        analyzed; looked at every ``ANALYZE_LOOK_EVERY`` s until it was analyzed once.

        Without statistics the planner guesses one ready job. The claim then reads the
        run_at index and sorts every ready job on each call: 33 ms a claim with 60,000
        queued, a drain at a fifth of its speed until autovacuum's first analyze (up to
        ``autovacuum_naptime``, a minute by default, after the jobs came). Workers call
        ``job_expire_leases`` every half second, which does this."""
        now = time.monotonic()
        if now < self._analyze_next:
            return
        self._analyze_next = now + ANALYZE_LOOK_EVERY

        def work(conn: Conn) -> bool:
            row = conn.execute(Q["jobs_statistics"], {"rows": ANALYZE_ROWS}).fetchone()
            if row is None or row["analyzed"]:
                return True
            if not row["big"]:
                return False
            try:
                with conn.transaction():
                    conn.execute(Q["jobs_analyze_lock_timeout"])
                    conn.execute(Q["jobs_analyze"])
            except errors.LockNotAvailable:  # autovacuum is at it: look again later
                return False
            return True  # (a role that may not analyze gets a server warning, once)

        if self._run("analyzing the job table", work, transaction=False):
            self._analyze_next = math.inf

    def _vacuum_claimed(self) -> None:
        """Vacuum the job table, in a thread of its own, when claims and ends left
        ``VACUUM_DEAD_ROWS`` dead row versions or more, and ``VACUUM_DEAD_SHARE`` of its
        live rows, since its last vacuum; looked at every ``VACUUM_LOOK_EVERY`` s.

        A claimed job's 'ready' version stays in the claim index, marked dead, until a
        vacuum removes it: no insert ever splits the head of that index to clean it, and
        every claim steps over all of them (in a drain of 300,000 jobs the claim statement
        read 1,520 buffers a call, for 32 jobs). Autovacuum looks once a minute at most
        (``autovacuum_naptime``); a queue drained at thousands of jobs a second needs it
        every few seconds. One vacuum at a time per store, skipped if autovacuum holds the
        table; a role that may not vacuum it (VACUUM would warn and skip) never asks.
        Workers call ``job_expire_leases`` every half second, which does this."""
        now = time.monotonic()
        if now < self._vacuum_next:
            return
        self._vacuum_next = now + VACUUM_LOOK_EVERY
        row = self._run(
            "reading the job table's dead rows",
            lambda c: c.execute(Q["jobs_dead_rows"]).fetchone(),
            transaction=False,
        )
        if row is None or not row["may_vacuum"]:
            self._vacuum_next = math.inf
            return
        if row["dead"] < max(VACUUM_DEAD_ROWS, VACUUM_DEAD_SHARE * row["live"]):
            return
        if self._vacuuming.acquire(blocking=False):  # released by _vacuum
            threading.Thread(target=self._vacuum, name="crawlq-vacuum", daemon=True).start()

    def _vacuum(self) -> None:
        try:
            self._run(
                "vacuuming the job table",
                lambda c: c.execute(Q["jobs_vacuum"]),
                transaction=False,
            )
        except StoreError as exc:  # the store closed, the server went away: next time
            logger.debug("%s", exc)
        finally:
            self._vacuuming.release()

    def _compact_counts(self) -> None:
        """Fold the count deltas into the counters (skipped if another call is at it).
        Workers call ``job_expire_leases`` every half second, which does this."""
        self._run(
            "compacting counters",
            lambda c: c.execute(Q["counts_compact"], {"schema": self.settings.schema}),
            transaction=False,
        )
