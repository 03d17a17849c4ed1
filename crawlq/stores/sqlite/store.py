"""The SQLite store: one file, shared safely by every process on one machine.

WAL journal, one write transaction per call (``BEGIN IMMEDIATE``), SQLite's busy handler
for waiting on other processes, and a separate connection that watches
``PRAGMA data_version`` so an idle worker wakes up within milliseconds of a commit by any
process. The store's clock is the host's clock, the only one a local file has.

Crawl and limit-key counters move by trigger in the statement that moves the job, guarded
so that a job outside crawls and limit keys runs no extra statement. A write that touches
a limit key or a crawl ends by settling them (``_settle``): each key gets its front back
(``crawlq.limits``), then each open crawl with nothing outstanding finishes.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time

from crawlq.exceptions import ConfigurationError, StoreError
from crawlq.jobs import Job
from crawlq.stores import states
from crawlq.stores._sqlfile import split_statements
from crawlq.stores.base import Capabilities
from crawlq.stores.sqlite.core import Q, SQLiteSettings, is_busy
from crawlq.stores.sqlite.crawl_delete import CrawlDeleteMixin
from crawlq.stores.sqlite.crawls import SQLiteCrawls
from crawlq.stores.sqlite.finished import wait_finished
from crawlq.stores.sqlite.jobs import SQLiteJobs
from crawlq.stores.sqlite.periodic import SQLitePeriodic
from crawlq.stores.sqlite.queues import SQLiteQueues
from crawlq.stores.sqlite.storage import SQLiteStorage
from crawlq.stores.sqlite.workers import SQLiteWorkers
from crawlq.stores.sqlmigrations import Migrations, migration_files
from crawlq.types import JobId, Timestamp


def add_functions(conn: sqlite3.Connection) -> None:
    """Register the SQL functions the queries call on a connection: every connection that
    runs them needs it. ``crawlq_pending_state`` is crawlq.stores.states.pending_state."""
    conn.create_function("crawlq_pending_state", 3, states.pending_state, deterministic=True)


def _unopenable(path: str, exc: sqlite3.Error) -> ConfigurationError:
    """The error for a SQLite file that cannot be opened, naming it and saying why."""
    where = os.path.abspath(path)
    folder = os.path.dirname(where)
    if os.path.isdir(where):
        why = f"it is a directory; name a file in it, e.g. sqlite:///{path.rstrip('/')}/crawlq.db"
    elif not os.path.isdir(folder):
        why = f"its directory {folder} does not exist; create it, or give another path"
    elif not os.access(folder, os.W_OK | os.X_OK) or (
        os.path.exists(where) and not os.access(where, os.R_OK | os.W_OK)
    ):
        why = (
            "no permission: crawlq must read and write the file and create files next to "
            f"it (-wal, -shm); {exc}"
        )
    else:
        why = str(exc)
    return ConfigurationError(f"cannot open the SQLite store {where}: {why}")


class SQLiteStore(
    CrawlDeleteMixin,
    SQLitePeriodic,
    SQLiteJobs,
    SQLiteQueues,
    SQLiteWorkers,
    SQLiteCrawls,
    SQLiteStorage,
):
    """The embedded store. Thread-safe: calls from many threads are serialised.

    Each part of the store is a module of its own (``jobs.py``, ``queues.py``,
    ``workers.py``, ``crawls.py``, ``storage.py``) behind the gate of its part
    (``crawlq.stores.gate``); this class opens the file and migrates it."""

    capabilities = Capabilities(notify=True, multi_host=False)

    def __init__(self, settings: SQLiteSettings) -> None:
        self.settings = settings
        self._lock = threading.RLock()
        self._wait_lock = threading.Lock()
        path = settings.path
        if not settings.create and not os.path.exists(path):
            raise ConfigurationError(
                f"no store at {os.path.abspath(path)}: the file does not exist. Give the "
                "store's URL (--store or CRAWLQ_STORE), or crawl or schedule something first"
            )
        try:
            self._conn = self._connect()
        except sqlite3.Error as exc:
            raise _unopenable(path, exc) from exc
        try:
            self._wait_conn = self._connect()
            self.migrate()
        except BaseException as exc:
            self._conn.close()  # a refused or failed migration must not keep the file open
            if hasattr(self, "_wait_conn"):
                self._wait_conn.close()
            cause = exc.__cause__ if isinstance(exc, StoreError) else exc
            if isinstance(cause, sqlite3.Error) and not is_busy(cause):
                raise _unopenable(path, cause) from exc
            raise

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.settings.path,
            timeout=self.settings.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            cached_statements=256,  # every query of the store stays prepared
        )
        conn.row_factory = sqlite3.Row
        add_functions(conn)
        self._switch_to_wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.settings.synchronous.upper()}")
        return conn

    def _switch_to_wal(self, conn: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode = WAL``, waiting out other openers. On a new file, the
        switch of processes opening it at the same moment fails at once with "database is
        locked": SQLite does not call the busy handler for it. So it is retried here,
        within the same ``busy_timeout`` as any other call."""
        deadline = time.monotonic() + self.settings.busy_timeout
        pause = 0.001
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() + pause > deadline:
                    conn.close()
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def close(self) -> None:
        with self._lock, self._wait_lock:
            self._conn.close()
            self._wait_conn.close()

    def job_wait_finished(self, job_id: JobId, timeout: float) -> Job | None:
        return wait_finished(self, job_id, timeout)  # crawlq.stores.finished

    def now(self) -> Timestamp:
        return time.time()

    def migrate(self) -> list[str]:
        """Apply the migrations this file has not seen, in order; returns their names."""
        migrations = Migrations(
            migration_files("crawlq.stores.sqlite.migrations"),
            where=self.settings.path,
            other="another database file",
        )

        def work(conn: sqlite3.Connection) -> list[str]:
            conn.execute(Q["migrations_create"])
            applied = {row[0] for row in conn.execute(Q["migrations_applied"])}

            def execute(script: str) -> None:
                for statement in split_statements(script):
                    conn.execute(statement)

            def record(version: int, name: str) -> None:
                params = {"version": version, "name": name, "now": time.time()}
                conn.execute(Q["migrations_record"], params)

            return migrations.run(applied, execute, record)

        return self._write("migrating the schema", work)


__all__ = ["Q", "SQLiteSettings", "SQLiteStore"]
