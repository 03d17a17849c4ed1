"""The SQLite store's settings, connection, transactions and error translation: what
every part of the store (``jobs.py``, ``queues.py``, ``workers.py``, ``crawls.py``,
``storage.py``) runs its queries through, and its rows decoded (``crawlq.stores.codec``).
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Container, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from crawlq.crawls import CrawlInfo
from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Job
from crawlq.limits import KeyLimit
from crawlq.payload import dumps
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.checks import driver_errors
from crawlq.stores.codec import (
    crawl_info,
    job_from_row,
    key_limit,
    loads,
    records_by_crawl,
    request_from_row,
)
from crawlq.stores.conflict import Request
from crawlq.types import Timestamp

if TYPE_CHECKING:
    from crawlq.stores.base import CrawlRecord

T = TypeVar("T")

Q = load_queries("crawlq.stores.sqlite")


@dataclass(frozen=True, kw_only=True, slots=True)
class SQLiteSettings:
    """How the SQLite store opens its file.

    - ``path``: the database file (created with its directory's permissions).
    - ``busy_timeout``: seconds a call waits for another process's write lock before
      raising ``StoreUnavailable`` (default 60).
    - ``synchronous``: ``normal`` (default) or ``full`` (a commit also survives power loss, at
      about a tenth of the commit rate). With ``normal`` a killed process or a clean
      reboot never loses a commit; a power cut may lose the last ones.
    - ``poll_interval``: seconds between two looks at ``data_version`` while waiting (0.002).
    - ``create``: make the file when it is missing (default). False refuses a missing file
      with a ``ConfigurationError`` naming it (``open_store(url, create=False)``).
    """

    path: str
    busy_timeout: float = 60.0
    synchronous: str = "normal"
    poll_interval: float = 0.002
    create: bool = True

    def __post_init__(self) -> None:
        if self.path in ("", ":memory:") or self.path.startswith("file::memory:"):
            raise ConfigurationError(
                "the SQLite store needs a file that several connections can share, not an "
                "in-memory database: use a path such as sqlite:///jobs.db"
            )
        if self.synchronous not in ("full", "normal"):
            raise ConfigurationError(
                f"synchronous={self.synchronous!r} is not supported: use 'full' or 'normal'"
            )
        if self.busy_timeout <= 0 or self.poll_interval <= 0:
            raise ConfigurationError("busy_timeout and poll_interval must be positive seconds")


def is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _transient(exc: Exception) -> str | None:
    """A lock another process held too long, or a full disk: a later call may work."""
    if isinstance(exc, sqlite3.OperationalError):
        if is_busy(exc):
            return "SQLite stayed locked by another process"
        if "disk is full" in str(exc):
            return "SQLite's disk is full"
    return None


def translate(operation: str) -> AbstractContextManager[None]:
    """Turn driver errors into crawlq errors, keeping the cause."""
    return driver_errors("SQLite", operation, sqlite3.Error, _transient)


def row_job(row: sqlite3.Row) -> Job:
    return job_from_row(row, loads)


def row_request(row: sqlite3.Row) -> Request:
    """The request a pending job's row holds (``run_at`` its own, for a front)."""
    return request_from_row(row, loads)


def row_crawl(row: sqlite3.Row) -> CrawlInfo:
    return crawl_info(row, json.loads(row["meta"]))


def row_key_limit(row: sqlite3.Row) -> KeyLimit:
    return key_limit(row, row["next_start"] if row["front"] is not None else None)


ONE_ROW: dict[str, tuple[str, ...]] = {
    "job_claim_ids": ("id",),
    "job_complete": ("id", "token", "result"),
    "limit_take_fronts": ("key",),
    "limit_fronts_due": ("id", "gate"),
}
"""The queries that take a JSON list and have a sibling ``<name>_one`` for one row, with
the names of that row's values as the sibling's parameters (``listed``)."""


def listed(
    conn: sqlite3.Connection, name: str, param: str, rows: Sequence[Any], **params: Any
) -> list[sqlite3.Row]:
    """The rows of query ``name`` with ``rows`` as its JSON list ``:param`` (and
    ``params``). For one row, a query of ``ONE_ROW`` runs its sibling ``<name>_one`` with
    the row's values as parameters (a row of one value is the value itself): SQLite reads
    a JSON list through ``json_each`` and a temporary table or index, which for one row
    costs more than the statement's own work (by callgrind, a claim of one job: 177,000
    instructions through the list, 109,000 without)."""
    sibling = _SIBLINGS.get(name)
    if sibling is not None and len(rows) == 1:
        query, fields = sibling
        params.update(zip(fields, rows[0] if len(fields) > 1 else (rows[0],), strict=True))
        return conn.execute(query, params).fetchall()
    params[param] = dumps(rows)
    return conn.execute(Q[name], params).fetchall()


_SIBLINGS = {name: (Q[f"{name}_one"], fields) for name, fields in ONE_ROW.items()}


ROW_BATCH_SIZES = (1, 4, 16, 64)
"""The row counts of a ``*_rows`` query's texts: few texts serve every count, so SQLite's
statement cache keeps them all."""


def row_batches(name: str, rows: Sequence[Sequence[Any]]) -> Iterator[tuple[str, list[Any]]]:
    """Query ``name`` (a ``*_rows`` query: one row of ``?`` placeholders after ``VALUES``)
    with its parameters, for ``rows`` in batches of up to 64: each batch the smallest of
    ``ROW_BATCH_SIZES`` it fits in, padded with all-NULL rows (the query drops them)."""
    largest = ROW_BATCH_SIZES[-1]
    for start in range(0, len(rows), largest):
        batch = rows[start : start + largest]
        size = next(size for size in ROW_BATCH_SIZES if size >= len(batch))
        params = [value for row in batch for value in row]
        params += [None] * (len(rows[0]) * (size - len(batch)))
        yield _rows_query(name, size), params


@functools.cache
def _rows_query(name: str, size: int) -> str:
    """Query ``name`` with its row of placeholders repeated ``size`` times."""
    query = Q[name]
    row = _PLACEHOLDER_ROW.search(query)
    if row is None:
        raise ValueError(f"query {name} has no row of placeholders after VALUES")
    return query[: row.start(1)] + ", ".join([row.group(1)] * size) + query[row.end(1) :]


_PLACEHOLDER_ROW = re.compile(r"VALUES (\((?:\?, )*\?\))")


class SQLiteCore:
    """What every part of the SQLite store runs its queries through: the connections,
    one write transaction per call, reads, and the store's clock."""

    settings: SQLiteSettings
    _lock: threading.RLock
    _wait_lock: threading.Lock
    _conn: sqlite3.Connection
    _wait_conn: sqlite3.Connection

    def _write(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one write transaction; all of it commits or none of it."""
        with self._lock, translate(operation):
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return result

    def _read(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock, translate(operation):
            return work(self._conn)

    def _now(self, now: Timestamp | None) -> Timestamp:
        return time.time() if now is None else now

    def _take_unless_held(
        self, doing: tuple[str, str], held: str, take: str, params: dict[str, Any]
    ) -> bool:
        """Query ``take`` (a write that returns a row when it took the thing) unless the
        read-only probe ``held`` says another holds it: False then, and no write lock.
        ``doing``: what the probe and the write are doing, for errors."""
        probing, taking = doing
        if self._read(probing, lambda c: bool(c.execute(Q[held], params).fetchone()[0])):
            return False
        return self._write(taking, lambda c: c.execute(Q[take], params).fetchone() is not None)

    def _crawl_exists(self, conn: sqlite3.Connection, crawl_id: int) -> bool:
        return conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone() is not None

    def _results_insert(
        self,
        conn: sqlite3.Connection,
        crawl_id: int,
        items: Sequence[tuple[bytes, str]],
        *,
        exists: bool = False,
    ) -> list[bool] | None:
        """Keep each (key, record) new to the crawl, numbered MAX(seq) + 1 inside the write
        transaction (writers take turns); True for each new one, None for no such crawl
        (not looked for when the transaction read the crawl already: ``exists``)."""
        if not exists and not self._crawl_exists(conn, crawl_id):
            return None
        seq = int(conn.execute(Q["result_last_seq"], {"crawl_id": crawl_id}).fetchone()[0])
        answers: list[bool] = []
        for key, record in items:
            params = {"crawl_id": crawl_id, "key": key, "seq": seq + 1, "record": record}
            new = conn.execute(Q["result_insert"], params).fetchone() is not None
            seq += new
            answers.append(new)
        return answers

    def _keep_records(
        self,
        conn: sqlite3.Connection,
        records: Sequence[Sequence[CrawlRecord]],
        applied: Sequence[bool],
        read: Container[int] = (),
    ) -> None:
        """Keep the records of the job ends applied in this transaction (``Completion`` and
        ``Failure.records``), one insert run per crawl; unknown crawls drop theirs.
        ``read``: crawls this transaction has read (they exist)."""
        for crawl_id, pairs in records_by_crawl(records, applied):
            self._results_insert(conn, crawl_id, pairs, exists=crawl_id in read)
