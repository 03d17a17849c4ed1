"""The PostgreSQL store: one database shared by workers on any number of machines.

- Everything lives in one schema of its own (``?schema=``, default ``crawlq``), created
  and migrated when a store opens, under an advisory lock. Pooled connections set
  ``search_path`` to it, so every query is static text from ``queries.sql``.
- A call is one transaction, most of them one statement: a claim reads the claim index
  and locks with ``FOR UPDATE SKIP LOCKED`` (concurrent workers never wait for each
  other); a batch of leases is acknowledged with one ``UPDATE ... FROM unnest(...)``.
- Triggers, in the transaction of each change, append count deltas (``queue_stats``
  never scans jobs), ``NOTIFY`` idle workers (``job_wait``), and turn the remembered
  request of a job that ends into a new job.
- Crawls and limit keys (migration 0003) are kept by the same triggers, only for jobs
  that have a crawl or a limit key: crawl counters (one UPDATE per statement), key
  records and each key's front job (``crawlq_reconcile``); a deferred trigger finishes a
  crawl when the transaction that emptied it commits. Locks are taken jobs, then crawls
  (in id order), then keys (in key order), so concurrent claims and acks do not deadlock.
- The clock is the database server's. Connections are opened by the calls that need
  them (``connections.py``): a connection the server closed while idle is replaced
  before use, and a call works as soon as the server accepts connections again. Driver
  errors become ``StoreUnavailable`` (transient: connection trouble, a restart, a lost
  race) or ``StoreError`` (permanent: the same call would fail the same way), with the
  psycopg exception as the cause.
"""

from __future__ import annotations

import math
import threading
from importlib.resources.abc import Traversable

import psycopg
from psycopg import sql
from psycopg.rows import DictRow, dict_row

from crawlq.jobs import Job
from crawlq.stores.base import Capabilities
from crawlq.stores.postgres.connections import Connections
from crawlq.stores.postgres.core import Conn, PostgresSettings, Q, translate
from crawlq.stores.postgres.crawl_delete import CrawlDeleteMixin
from crawlq.stores.postgres.crawls import PostgresCrawls
from crawlq.stores.postgres.finished import wait_finished
from crawlq.stores.postgres.jobs import PostgresJobs
from crawlq.stores.postgres.periodic import PostgresPeriodic
from crawlq.stores.postgres.queues import PostgresQueues
from crawlq.stores.postgres.storage import PostgresStorage
from crawlq.stores.postgres.workers import PostgresWorkers
from crawlq.stores.sqlmigrations import Migrations, migration_files
from crawlq.types import JobId, Timestamp


def _known_migrations() -> dict[int, Traversable]:
    """This store's migration files by version."""
    return migration_files("crawlq.stores.postgres.migrations")


class PostgresStore(
    CrawlDeleteMixin,
    PostgresPeriodic,
    PostgresJobs,
    PostgresQueues,
    PostgresWorkers,
    PostgresCrawls,
    PostgresStorage,
):
    """The shared store. Thread-safe: each call borrows a pooled connection.

    Each part of the store is a module of its own (``jobs.py``, ``queues.py``,
    ``workers.py``, ``crawls.py``, ``storage.py``) behind the gate of its part
    (``crawlq.stores.gate``); this class connects and migrates the schema."""

    capabilities = Capabilities(notify=True, multi_host=True, batched_claims=True)

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self._conninfo = settings.conninfo()
        self._listeners: list[Conn] = []
        self._listeners_lock = threading.Lock()
        self._closed = False
        self._analyze_next = -math.inf
        self._vacuum_next = -math.inf
        self._vacuuming = threading.Lock()
        self._connections = Connections(
            self._new_connection,
            conninfo=self._conninfo,
            size=settings.pool_size,
            timeout=settings.pool_timeout,
        )
        try:
            with translate("connecting"):
                self._connections.open()
            self.migrate()
        except BaseException:
            self._connections.close()
            raise

    def _new_connection(self) -> Conn:
        conn = psycopg.Connection[DictRow].connect(
            self._conninfo, autocommit=True, row_factory=dict_row
        )
        try:
            self._configure(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _configure(self, conn: Conn) -> None:
        conn.execute(Q["session_setup"], {"schema": self.settings.schema})

    def close(self) -> None:
        self._closed = True
        self._connections.close()
        with self._listeners_lock:
            listeners, self._listeners = self._listeners, []
        for conn in listeners:
            conn.close()

    def job_wait_finished(self, job_id: JobId, timeout: float) -> Job | None:
        return wait_finished(self, job_id, timeout)  # crawlq.stores.finished

    def now(self) -> Timestamp:
        row = self._run(
            "reading the clock",
            lambda c: c.execute(Q["store_now"]).fetchone(),
            transaction=False,
        )
        assert row is not None
        return float(row["now"])

    def migrate(self) -> list[str]:
        """Apply the migrations the schema has not seen, in order, under an advisory lock
        (several processes may open at once); returns their names. A schema migrated by
        a newer crawlq is refused with ConfigurationError."""
        migrations = Migrations(
            _known_migrations(),
            where=f"schema {self.settings.schema!r}",
            other="another schema (?schema=...)",
        )
        if not migrations.missing(self._applied_versions()):
            return []  # the common case takes no lock and needs no CREATE privilege

        def work(conn: Conn) -> list[str]:
            schema = self.settings.schema
            conn.execute(Q["migrations_lock"], {"schema": schema})
            conn.execute(sql.SQL(Q["schema_create"]).format(schema=sql.Identifier(schema)))
            conn.execute(Q["migrations_create"])
            applied = {r["version"] for r in conn.execute(Q["migrations_applied"])}

            def record(version: int, name: str) -> None:
                conn.execute(Q["migrations_record"], {"version": version, "name": name})

            return migrations.run(applied, lambda script: conn.execute(script.encode()), record)

        return self._run("migrating the schema", work)

    def _applied_versions(self) -> set[int]:
        def work(conn: Conn) -> set[int]:
            present = conn.execute(Q["migrations_present"]).fetchone()
            if present is None or not present["present"]:
                return set()
            return {r["version"] for r in conn.execute(Q["migrations_applied"])}

        return self._run("reading the schema version", work, transaction=False)


__all__ = ["PostgresSettings", "PostgresStore", "Q"]
