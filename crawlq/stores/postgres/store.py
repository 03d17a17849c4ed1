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

import dataclasses
import functools
import hashlib
import json
import operator
import re
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, TypeVar

import psycopg
from psycopg import errors, sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow, dict_row

from crawlq.crawls import (
    OPEN_CRAWL_STATES,
    CrawlInfo,
    CrawlSpec,
    CrawlState,
    check_seen_has_crawl,
    no_such_crawl,
)
from crawlq.exceptions import (
    ConfigurationError,
    CrawlClosed,
    StoreError,
    StoreUnavailable,
)
from crawlq.fingerprint import check_fingerprint
from crawlq.jobs import (
    Job,
    JobSpec,
    JobState,
    Lease,
    Outcome,
    QueueStats,
    QueueTotals,
    ScheduleResult,
    WorkerInfo,
)
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import check_count, check_text
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.base import (
    Capabilities,
    ClaimParams,
    Completion,
    Failure,
    JobFilter,
    Release,
    StoreSummary,
    WaitParams,
)
from crawlq.stores.checks import check_page, check_results, check_ttl
from crawlq.stores.conflict import Request, merge
from crawlq.stores.crawlrows import (
    crawl_info,
    key_limit,
    limits_json,
    on_finish_json,
    summary_of,
)
from crawlq.stores.postgres.connections import Connections, unwell
from crawlq.stores.postgres.crawl_delete import CrawlDeleteMixin
from crawlq.stores.states import FINISHED, INTERNAL_STATES, PUBLIC_STATE, totals_of
from crawlq.stores.workers import (
    heartbeat_params,
    listed,
    register_params,
    stop_params,
    worker_info,
)
from crawlq.types import JobId, Timestamp

T = TypeVar("T")
Conn = psycopg.Connection[DictRow]

Q = load_queries("crawlq.stores.postgres")


@functools.lru_cache(maxsize=512)
def _limited(name: str, limit: int | None) -> str:
    """``Q[name]`` with its LIMIT written into the text. The session runs prepared
    statements on their generic plan, and a generic ``LIMIT $n`` is planned as a tenth of
    the rows: with a million due jobs the claim then sorts them all (35 ms a claim, not
    1). With the number in the text each limit gets its own plan, which reads the claim
    index in order."""
    return Q[name].replace("%(limit)s", "NULL" if limit is None else str(operator.index(limit)))


_OPTIONAL_FILTER = re.compile(r"^\s*AND \(%\((\w+)\)s::[\w\[\]0-9]+ IS NULL OR .*\)\s*$")


def _filtered(sql: str, params: Mapping[str, Any]) -> str:
    """``sql`` without its optional filter lines (``AND (%(x)s IS NULL OR ...)``) whose
    parameter is None. On a generic plan those lines hide the filter's selectivity: with
    all of them the planner expects one row and sorts a million instead of reading the
    primary key in order (1 s a page, not 1 ms); each set of filters gets its own plan."""
    kept = []
    for line in sql.splitlines(keepends=True):
        match = _OPTIONAL_FILTER.match(line)
        if match is None or params.get(match.group(1)) is not None:
            kept.append(line)
    return "".join(kept)


COMPACT_AFTER = 1000
"""Count deltas that ``queue_stats`` lets pile up before it folds them itself."""
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


def _transient(exc: psycopg.Error) -> bool:
    """Whether the store may take the same call later (StoreUnavailable). Errors about the
    data or the statement (a value out of range, an index row too large, a violated
    constraint, a missing privilege) are permanent: the same call fails the same way."""
    state = exc.sqlstate
    if state is None:  # raised by the client: the connection was lost, or never made
        return isinstance(exc, psycopg.OperationalError)
    return state[:2] in _TRANSIENT_CLASSES or state == "55P03"  # lock_not_available


@contextmanager
def _translate(operation: str) -> Iterator[None]:
    """Turn driver errors into crawlq errors, keeping the cause: ``StoreUnavailable`` for
    transient ones, ``StoreError`` for permanent ones."""
    try:
        yield
    except psycopg.Error as exc:
        if _transient(exc):
            raise StoreUnavailable(f"PostgreSQL is unavailable during {operation}: {exc}") from exc
        raise StoreError(f"PostgreSQL failed during {operation}: {exc}") from exc


class _Restart(Exception):
    """The call lost a race with another transaction and must run again from the start."""


_RETRY = (errors.DeadlockDetected, errors.SerializationFailure, errors.UniqueViolation, _Restart)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _job_from_row(row: DictRow) -> Job:
    return Job(
        id=row["id"],
        queue=row["queue"],
        task=row["task"],
        args=row["args"],
        kwargs=row["kwargs"],
        key=row["key"],
        priority=row["priority"],
        run_at=row["run_at"],
        state=PUBLIC_STATE[row["state"]],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        timeout=row["timeout"],
        worker_id=row["worker_id"],
        lease_token=row["lease_token"],
        lease_expires_at=row["lease_expires_at"],
        last_error=row["last_error"],
        dead_reason=row["dead_reason"],
        result=row["result"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        crawl_id=row["crawl_id"],
        limit_key=row["limit_key"],
    )


def _request_from_row(row: DictRow) -> Request:
    return Request(
        task=row["task"],
        args=row["args"],
        kwargs=row["kwargs"],
        priority=row["priority"],
        run_at=row["run_at"] if row["own_run_at"] is None else row["own_run_at"],
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        timeout=row["timeout"],
        crawl=row["crawl_id"],
        limit_key=row["limit_key"],
    )


def _float(value: float | None) -> float | None:
    """Array parameters need one element type: 30 and 0.5 must both be floats."""
    return None if value is None else float(value)


def _text(value: str) -> str:
    """PostgreSQL text cannot hold NUL: an error message shows it as ``\\x00`` instead of
    failing the call (and the worker's retries of it) for ever."""
    return value.replace("\x00", "\\x00")


def _insert_params(
    specs: Sequence[JobSpec], now: Timestamp | None, paused: frozenset[int] = frozenset()
) -> dict[str, Any]:
    """Parameters of ``job_insert_one`` for one spec (one per column), else of
    ``job_insert_many`` (the specs as one JSON list of rows); jobs of the ``paused`` crawls
    are held. Arguments that are not JSON raise here, before any I/O."""
    rows = [
        {
            "queue": s.queue,
            "task": s.task,
            "args": s.args,
            "kwargs": s.kwargs,
            "key": s.key,
            "priority": s.priority,
            "given_run_at": _float(s.run_at),
            "delay": float(s.delay),
            "max_attempts": s.max_attempts,
            "lease_seconds": float(s.lease_seconds),
            "timeout": _float(s.timeout),
            "crawl_id": s.crawl,
            "limit_key": s.limit_key,
            "hold": s.crawl in paused,
        }
        for s in specs
    ]
    if len(rows) != 1:
        return {"rows": _dumps(rows), "now": now}
    [row] = rows
    return {**row, "args": _dumps(row["args"]), "kwargs": _dumps(row["kwargs"]), "now": now}


def _check_fingerprints(specs: Sequence[JobSpec]) -> None:
    """A fingerprint is 16 bytes and needs a crawl (ConfigurationError, before any I/O)."""
    check_seen_has_crawl(specs)
    for s in specs:
        if s.fingerprint is not None:
            check_fingerprint(s.fingerprint)


def _cache_key(key: str) -> dict[str, bytes]:
    """A cache key's parameters: its UTF-8 bytes, and their SHA-256 that finds it."""
    encoded = check_text(key, "a cache key").encode("utf-8")
    return {"key": encoded, "key_hash": hashlib.sha256(encoded).digest()}


def _crawl_from_row(row: DictRow) -> CrawlInfo:
    return crawl_info(row, row["meta"])


def _key_limit_from_row(row: DictRow) -> KeyLimit:
    return key_limit(row, row["next_start"])


@dataclass(slots=True)
class _Live:
    """A live job of a key, as the conflicting requests of one call change it."""

    id: JobId
    running: bool
    request: Request
    followup: Request | None
    changed: bool = False


def _known_migrations() -> dict[int, Traversable]:
    """Migration files by version (the number their name starts with)."""
    folder = resources.files("crawlq.stores.postgres.migrations")
    return {int(f.name.split("_", 1)[0]): f for f in folder.iterdir() if f.name.endswith(".sql")}


def _first_of_each(items: Sequence[Hashable]) -> list[int]:
    """Indexes of the first occurrence of each item (a lease, a result key), in order."""
    seen: set[Hashable] = set()
    first: list[int] = []
    for i, item in enumerate(items):
        if item not in seen:
            seen.add(item)
            first.append(i)
    return first


class PostgresStore(CrawlDeleteMixin):
    """The shared store. Thread-safe: each call borrows a pooled connection."""

    capabilities = Capabilities(notify=True, multi_host=True)

    def __init__(self, settings: PostgresSettings) -> None:
        self.settings = settings
        self._conninfo = settings.conninfo()
        self._listeners: list[Conn] = []
        self._listeners_lock = threading.Lock()
        self._closed = False
        self._connections = Connections(
            self._new_connection,
            conninfo=self._conninfo,
            size=settings.pool_size,
            timeout=settings.pool_timeout,
        )
        try:
            with _translate("connecting"):
                self._connections.open()
            self.migrate()
        except BaseException:
            self._connections.close()
            raise

    # -- connections and transactions ------------------------------------------------

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

    def _run(self, operation: str, work: Callable[[Conn], T], *, transaction: bool = True) -> T:
        """Run ``work`` on a pooled connection, in one transaction unless told otherwise;
        a transaction that lost a race (deadlock, key taken meanwhile) runs again."""
        with _translate(operation):
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

    def close(self) -> None:
        self._closed = True
        self._connections.close()
        with self._listeners_lock:
            listeners, self._listeners = self._listeners, []
        for conn in listeners:
            conn.close()

    def now(self) -> Timestamp:
        row = self._run(
            "reading the clock",
            lambda c: c.execute(Q["store_now"]).fetchone(),
            transaction=False,
        )
        assert row is not None
        return float(row["now"])

    # -- migrations ------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply the migrations the schema has not seen, in order, under an advisory lock
        (several processes may open at once); returns their names. A schema migrated by
        a newer crawlq is refused with ConfigurationError."""
        known = _known_migrations()
        if self._applied_versions() >= known.keys():
            return []  # the common case takes no lock and needs no CREATE privilege

        def work(conn: Conn) -> list[str]:
            schema = self.settings.schema
            conn.execute(Q["migrations_lock"], {"schema": schema})
            conn.execute(sql.SQL(Q["schema_create"]).format(schema=sql.Identifier(schema)))
            conn.execute(Q["migrations_create"])
            applied = {r["version"] for r in conn.execute(Q["migrations_applied"])}
            self._refuse_newer(applied)
            done: list[str] = []
            for version, file in sorted(known.items()):
                if version not in applied:
                    conn.execute(file.read_bytes())
                    conn.execute(Q["migrations_record"], {"version": version, "name": file.name})
                    done.append(file.name)
            return done

        return self._run("migrating the schema", work)

    def _applied_versions(self) -> set[int]:
        def work(conn: Conn) -> set[int]:
            present = conn.execute(Q["migrations_present"]).fetchone()
            if present is None or not present["present"]:
                return set()
            return {r["version"] for r in conn.execute(Q["migrations_applied"])}

        applied = self._run("reading the schema version", work, transaction=False)
        self._refuse_newer(applied)
        return applied

    def _refuse_newer(self, applied: set[int]) -> None:
        unknown = applied - _known_migrations().keys()
        if unknown:
            raise ConfigurationError(
                f"schema {self.settings.schema!r} has version {max(unknown)}, newer than this "
                "crawlq knows: upgrade crawlq, or use another schema (?schema=...)"
            )

    # -- scheduling ------------------------------------------------------------------

    def job_schedule(
        self, specs: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> list[ScheduleResult]:
        _check_fingerprints(specs)
        params = _insert_params(specs, now)  # arguments that are not JSON fail before any I/O

        def work(conn: Conn) -> list[ScheduleResult]:
            return self._insert(conn, specs, now, params)

        if not specs:
            return []
        # else one statement, nothing to merge or check
        several = any(s.key is not None or s.crawl is not None for s in specs)
        return self._run("scheduling jobs", work, transaction=several)

    def _insert(
        self,
        conn: Conn,
        specs: Sequence[JobSpec],
        now: Timestamp | None,
        params: dict[str, Any] | None = None,
        *,
        children: bool = False,
    ) -> list[ScheduleResult]:
        """Insert jobs in order; a spec whose key is live is merged into the live job by
        its policy (or remembered, if the job is running), in order too. Specs of a crawl
        lock it first: an unknown crawl raises CrawlNotFound, a closed one CrawlClosed
        (with ``children`` such a spec is dropped, and has no result); a fingerprint
        already seen gives SEEN and writes nothing."""
        if not specs:
            return []
        crawls = {s.crawl for s in specs if s.crawl is not None}
        if not crawls:
            return self._insert_many(conn, specs, now, params)
        states = {
            r["id"]: r["state"]
            for r in conn.execute(Q["crawl_lock"], {"ids": sorted(crawls)}).fetchall()
        }
        for crawl in sorted(crawls):
            if crawl not in states:
                raise no_such_crawl(crawl)
            if states[crawl] not in OPEN_CRAWL_STATES and not children:
                raise CrawlClosed(f"crawl {crawl} is {states[crawl]}: it takes no more jobs")
        results: list[ScheduleResult | None] = [None] * len(specs)
        kept = [
            i
            for i, s in enumerate(specs)
            if s.crawl is None or states[s.crawl] in OPEN_CRAWL_STATES
        ]
        pairs: list[tuple[int, bytes]] = []
        for i in kept:
            owner, fp = specs[i].crawl, specs[i].fingerprint
            if owner is not None and fp is not None:
                pairs.append((owner, fp))
        fresh = self._seen_add(conn, pairs, now)
        new_fps = iter(fresh)
        chosen: list[int] = []
        for i in kept:
            if specs[i].fingerprint is not None and not next(new_fps):
                results[i] = ScheduleResult(0, Outcome.SEEN)
            else:
                chosen.append(i)
        paused = frozenset(c for c, state in states.items() if state == CrawlState.PAUSED)
        chosen_specs = [specs[i] for i in chosen]
        inserted = self._insert_many(
            conn, chosen_specs, now, _insert_params(chosen_specs, now, paused)
        )
        for i, result in zip(chosen, inserted, strict=True):
            results[i] = result
        return [r for r in results if r is not None]  # only dropped children have none

    def _seen_add(
        self, conn: Conn, pairs: Sequence[tuple[int, bytes]], now: Timestamp | None
    ) -> list[bool]:
        """Add (crawl, fingerprint) pairs to seen sets in order; True where new (the
        crawls are locked by the caller)."""
        if not pairs:
            return []
        params = {"crawl_id": [c for c, _ in pairs], "fp": [f for _, f in pairs]}
        added = {
            (r["crawl_id"], bytes(r["fp"]))
            for r in conn.execute(Q["seen_insert"], params).fetchall()
        }
        answers: list[bool] = []
        for pair in pairs:
            answers.append(pair in added)
            added.discard(pair)
        return answers

    def _insert_many(
        self,
        conn: Conn,
        specs: Sequence[JobSpec],
        now: Timestamp | None,
        params: dict[str, Any] | None,
    ) -> list[ScheduleResult]:
        if not specs:
            return []
        query_params = _insert_params(specs, now) if params is None else params
        created: list[ScheduleResult | None]
        if "rows" not in query_params:  # _insert_params made one spec's columns
            row = conn.execute(Q["job_insert_one"], query_params).fetchone()
            created = [None if row is None else ScheduleResult(row["id"], Outcome.CREATED)]
        else:
            rows = conn.execute(Q["job_insert_many"], query_params).fetchall()
            created = [
                ScheduleResult(r["id"], Outcome.CREATED) if r["created"] else None for r in rows
            ]
        conflicts = [i for i, r in enumerate(created) if r is None]
        merged = (
            self._merge_conflicts(conn, [specs[i] for i in conflicts], now) if conflicts else []
        )
        answers = dict(zip(conflicts, merged, strict=True))
        return [r if r is not None else answers[i] for i, r in enumerate(created)]

    def _merge_conflicts(
        self, conn: Conn, specs: Sequence[JobSpec], now: Timestamp | None
    ) -> list[ScheduleResult]:
        """Lock the live jobs of the specs' keys, merge each spec into its job in order,
        and write what changed."""
        params = {"queue": [s.queue for s in specs], "key": [s.key for s in specs], "now": now}
        found = conn.execute(Q["job_lock_live"], params).fetchall()
        live = {(r["queue"], r["key"]): _live_from_row(r) for r in found}
        results: list[ScheduleResult] = []
        for spec in specs:
            job = live.get((spec.queue, spec.key))
            if job is None:  # it ended between the insert and the lock
                raise _Restart(f"the live job of key {spec.key!r} ended meanwhile")
            incoming = Request.from_spec(spec, found[0]["now"])
            results.append(ScheduleResult(job.id, _apply(job, incoming, spec)))
        changed = [j for j in live.values() if j.changed]
        pending = [j for j in changed if not j.running]
        running = [j for j in changed if j.running and j.followup is not None]
        if pending:
            conn.execute(Q["job_update_pending"], _pending_params(pending, now))
        if running:
            followups = [j.followup.to_json() for j in running if j.followup is not None]
            conn.execute(
                Q["job_set_followup"], {"id": [j.id for j in running], "followup": followups}
            )
        return results

    # -- claiming and leases ---------------------------------------------------------

    def job_claim(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0 or not params.queues:
            return []
        args = {
            "queues": list(dict.fromkeys(params.queues)),
            "limit": params.limit,
            "worker_id": params.worker_id,
            "now": params.now,
        }

        def work(conn: Conn) -> list[Job]:
            return [_job_from_row(r) for r in conn.execute(_limited("job_claim", wanted), args)]

        # A claimed front gives its key a new front, maybe due now: while keyed jobs were
        # claimed and room remains, claim again (each round its own statement).
        jobs: list[Job] = []
        while True:
            wanted = params.limit - len(jobs)
            args["limit"] = wanted
            got = self._run("claiming jobs", work, transaction=False)
            jobs.extend(got)
            if len(jobs) >= params.limit or not any(j.limit_key is not None for j in got):
                break
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    def _acknowledge(
        self,
        conn: Conn,
        query: str,
        leases: Sequence[Lease],
        columns: dict[str, list[Any]],
        now: Timestamp | None,
        then: Callable[[list[DictRow]], None] | None = None,
    ) -> list[bool]:
        """One statement for a batch of leases; True where the lease was current. A lease
        repeated in the batch is stale by its second time, as if applied one by one."""
        first = _first_of_each(leases)
        params: dict[str, Any] = {
            "ids": [leases[i].job_id for i in first],
            "tokens": [leases[i].token for i in first],
            "now": now,
            **{name: [values[i] for i in first] for name, values in columns.items()},
        }
        rows = conn.execute(Q[query], params).fetchall()
        if then is not None:
            then(rows)
        applied = {Lease(r["id"], r["token"]) for r in rows}
        chosen = set(first)
        return [i in chosen and lease in applied for i, lease in enumerate(leases)]

    def job_heartbeat(self, leases: Sequence[Lease], *, now: Timestamp | None = None) -> list[bool]:
        params = {"ids": [x.job_id for x in leases], "tokens": [x.token for x in leases]}

        def work(conn: Conn) -> set[Lease]:
            rows = conn.execute(Q["job_heartbeat"], {**params, "now": now}).fetchall()
            return {Lease(r["id"], r["token"]) for r in rows}

        if not leases:
            return []
        applied = self._run("heartbeating leases", work, transaction=False)
        return [lease in applied for lease in leases]

    def job_release(
        self, releases: Sequence[Release], *, now: Timestamp | None = None
    ) -> list[bool]:
        leases = [r.lease for r in releases]
        columns = {"delays": [float(r.delay) for r in releases]}

        def work(conn: Conn) -> list[bool]:
            return self._acknowledge(conn, "job_release", leases, columns, now)

        return self._run("releasing jobs", work, transaction=False) if leases else []

    def job_fail(self, failures: Sequence[Failure], *, now: Timestamp | None = None) -> list[bool]:
        leases = [f.lease for f in failures]
        columns: dict[str, list[Any]] = {
            "errors": [_text(f.error) for f in failures],
            "delays": [_float(f.retry_delay) for f in failures],
            "reasons": [_text(f.reason) for f in failures],
        }

        def work(conn: Conn) -> list[bool]:
            return self._acknowledge(conn, "job_fail", leases, columns, now)

        return self._run("recording failed attempts", work, transaction=False) if leases else []

    def job_complete(
        self, completions: Sequence[Completion], *, now: Timestamp | None = None
    ) -> list[bool]:
        children = [list(c.children) for c in completions]
        for kids in children:
            _check_fingerprints(kids)
            _insert_params(kids, now)  # arguments that are not JSON fail before any I/O
        if not completions:
            return []

        def batch(conn: Conn) -> list[bool]:
            return self._complete(conn, completions, children, now)

        def one_by_one(conn: Conn) -> list[bool]:
            return [
                answer
                for c, kids in zip(completions, children, strict=True)
                for answer in self._complete(conn, [c], [kids], now)
            ]

        with_children = any(c.children for c in completions)  # else one statement
        try:
            return self._run("completing jobs", batch, transaction=with_children)
        except _OneByOne:
            return self._run("completing jobs", one_by_one)

    def _complete(
        self,
        conn: Conn,
        completions: Sequence[Completion],
        children: Sequence[list[JobSpec]],
        now: Timestamp | None,
    ) -> list[bool]:
        """All completions in one statement (whose trigger turns the remembered requests of
        the completed jobs into jobs), then their children, in order. That equals
        completing them one by one unless a child names the key of a job completed later
        in the batch: then ``_OneByOne`` rolls the transaction back, and the caller
        completes them one at a time."""
        leases = [c.lease for c in completions]
        columns = {"results": [_dumps(c.result) for c in completions]}

        def spawn(rows: list[DictRow]) -> None:
            by_lease = {Lease(r["id"], r["token"]): r for r in rows}
            done = [
                (by_lease[leases[i]], children[i])
                for i in _first_of_each(leases)
                if leases[i] in by_lease
            ]
            _refuse_later_keys(done)
            self._insert(conn, [kid for _, kids in done for kid in kids], now, children=True)

        return self._acknowledge(conn, "job_complete", leases, columns, now, spawn)

    def job_expire_leases(self, *, now: Timestamp | None = None) -> list[JobId]:
        def work(conn: Conn) -> list[JobId]:
            rows = conn.execute(Q["job_expire_leases"], {"now": now}).fetchall()
            return sorted(int(r["id"]) for r in rows)

        expired = self._run("returning expired leases", work, transaction=False)
        self._compact_counts()
        return expired

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        if not ids:
            return []
        params = {"ids": list(ids), "now": now}
        rows = self._run(
            "cancelling jobs",
            lambda c: c.execute(Q["job_cancel"], params).fetchall(),
            transaction=False,
        )
        return sorted(int(r["id"]) for r in rows)

    def job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None = None, *, now: Timestamp | None = None
    ) -> list[JobId]:
        if not ids:
            return []
        params = {"ids": sorted({operator.index(i) for i in ids}), "now": now}

        def work(conn: Conn) -> list[JobId]:
            rows = conn.execute(Q["job_lock_pending"], params).fetchall()
            jobs = [_live_from_row(r) for r in rows]
            for job, row in zip(jobs, rows, strict=True):
                when = row["now"] if run_at is None else run_at
                job.request = dataclasses.replace(job.request, run_at=when)
            if jobs:
                conn.execute(Q["job_update_pending"], _pending_params(jobs, now))
            return [j.id for j in jobs]

        return self._run("rescheduling jobs", work)

    # -- reading ---------------------------------------------------------------------

    def job_get(self, job_id: JobId) -> Job | None:
        row = self._run(
            "reading a job",
            lambda c: c.execute(Q["job_get"], {"id": job_id}).fetchone(),
            transaction=False,
        )
        return None if row is None else _job_from_row(row)

    @staticmethod
    def _filter_params(where: JobFilter) -> dict[str, Any]:
        return {
            "after_id": where.after_id,
            "ids": None if where.ids is None else list(where.ids),
            "queue": where.queue,
            "task": where.task,
            "key": where.key,
            "crawl": where.crawl,
            "limit_key": where.limit_key,
            "states": None if where.state is None else INTERNAL_STATES[where.state],
            "finished_before": where.finished_before,
            "limit": where.limit,
        }

    def job_list(self, where: JobFilter) -> list[Job]:
        params = self._filter_params(where)
        rows = self._run(
            "listing jobs",
            lambda c: c.execute(
                _filtered(_limited("job_list", where.limit), params), params
            ).fetchall(),
            transaction=False,
        )
        return [_job_from_row(r) for r in rows]

    def job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        params = {"queues": list(queues), "limit": check_count("limit", limit, 0)}
        rows = self._run(
            "listing finished jobs",
            lambda c: c.execute(Q["job_recent"], params).fetchall(),
            transaction=False,
        )
        return [_job_from_row(r) for r in rows]

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        if where.state not in (None, JobState.DEAD):
            return []
        params = {**self._filter_params(where), "now": now}
        rows = self._run(
            "requeueing dead jobs",
            lambda c: c.execute(
                _filtered(_limited("job_requeue", where.limit), params), params
            ).fetchall(),
            transaction=False,
        )
        return sorted(int(r["id"]) for r in rows)

    def job_purge(self, where: JobFilter) -> int:
        params = self._filter_params(where)
        if where.state is None:  # select finished jobs before ``limit`` applies
            params["states"] = FINISHED
        return self._run(
            "purging jobs",
            lambda c: (
                c.execute(_filtered(_limited("job_purge", where.limit), params), params).rowcount
            ),
            transaction=False,
        )

    def job_prune(self, *, retention: float, now: Timestamp | None = None) -> int:
        params = {"retention": retention, "now": now}

        def work(conn: Conn) -> int:
            pruned = conn.execute(Q["job_prune"], params).rowcount
            conn.execute(Q["job_prune_keys"], {"now": now})
            conn.execute(Q["cache_prune"], {"now": now})  # expired cache entries
            return pruned

        return self._run("pruning finished jobs", work, transaction=False)

    def job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        row = self._run(
            "finding the next due job",
            lambda c: c.execute(Q["job_next_due"], {"queues": list(queues)}).fetchone(),
            transaction=False,
        )
        return None if row is None or row["next_due"] is None else float(row["next_due"])

    def job_next_gated(
        self, queues: Sequence[str], *, within: float, now: Timestamp | None = None
    ) -> Timestamp | None:
        args = {"queues": list(queues), "within": within, "now": now}
        row = self._run(
            "finding the next job a limit key keeps back",
            lambda c: c.execute(Q["job_next_gated"], args).fetchone(),
            transaction=False,
        )
        return None if row is None or row["next_start"] is None else float(row["next_start"])

    def queue_stats(self, *, now: Timestamp | None = None) -> list[QueueStats]:
        rows = self._run(
            "reading queue stats",
            lambda c: c.execute(Q["queue_stats"], {"now": now}).fetchall(),
            transaction=False,
        )
        if rows and rows[0]["deltas"] > COMPACT_AFTER:
            self._compact_counts()
        stats = [_queue_stats(r) for r in rows]
        stats.sort(key=lambda s: s.queue)
        return stats

    def queue_totals(self) -> list[QueueTotals]:
        rows = self._run(
            "reading queue totals",
            lambda c: c.execute(Q["queue_totals"]).fetchall(),
            transaction=False,
        )
        totals: dict[str, dict[str, int]] = {}
        for row in rows:
            totals.setdefault(row["queue"], {})[row["state"]] = row["n"]
        return [totals_of(q, counts) for q, counts in sorted(totals.items())]

    def _compact_counts(self) -> None:
        """Fold the count deltas into the counters (skipped if another call is at it).
        Workers call ``job_expire_leases`` every second, which does this."""
        self._run(
            "compacting counters",
            lambda c: c.execute(Q["counts_compact"], {"schema": self.settings.schema}),
            transaction=False,
        )

    # -- waiting ---------------------------------------------------------------------

    def job_wait(self, params: WaitParams) -> None:
        deadline = time.monotonic() + params.timeout
        wanted = {f"{self.settings.schema}:{q}" for q in params.queues}
        with _translate("waiting for jobs"), self._listening() as conn:
            row = conn.execute(Q["job_next_due"], {"queues": list(params.queues)}).fetchone()
            if row is not None and row["next_due"] is not None:
                if row["next_due"] <= row["now"]:
                    return
                deadline = min(deadline, time.monotonic() + row["next_due"] - row["now"])
            while (remaining := deadline - time.monotonic()) > 0:
                for notify in conn.notifies(timeout=remaining):
                    if notify.payload in wanted:
                        return

    @contextmanager
    def _listening(self) -> Iterator[Conn]:
        """A dedicated connection that LISTENs for the call's duration; notifications
        that arrived before are dropped (the caller looks for due jobs after this)."""
        conn = self._take_listener()
        clean = False
        try:
            conn.execute(Q["listen"])
            for _ in conn.notifies(timeout=0):
                pass
            yield conn
            conn.execute(Q["unlisten"])
            clean = True
        finally:
            if clean and not self._closed:
                with self._listeners_lock:
                    self._listeners.append(conn)
            else:
                conn.close()

    def _take_listener(self) -> Conn:
        while True:
            with self._listeners_lock:
                conn = self._listeners.pop() if self._listeners else None
            if conn is None:
                break
            if not unwell(conn):
                return conn
            conn.close()
        return self._connections.connect(deadline=time.monotonic())  # one attempt

    # -- workers and maintenance -----------------------------------------------------

    def _execute(self, operation: str, query: str, params: dict[str, Any]) -> list[DictRow]:
        """One statement (its own transaction); the rows it returns, if any."""

        def work(conn: Conn) -> list[DictRow]:
            cursor = conn.execute(Q[query], params)
            return cursor.fetchall() if cursor.description is not None else []

        return self._run(operation, work, transaction=False)

    def worker_register(self, info: WorkerInfo, *, now: Timestamp | None = None) -> None:
        params = register_params(info, list(info.queues), now)
        self._execute("registering a worker", "worker_register", params)

    def worker_heartbeat(
        self,
        worker_id: str,
        *,
        running: int,
        done: int,
        failed: int,
        rss_bytes: int | None,
        now: Timestamp | None = None,
    ) -> bool:
        params = heartbeat_params(
            worker_id, running=running, done=done, failed=failed, rss_bytes=rss_bytes, now=now
        )
        return self._run(
            "heartbeating a worker",
            lambda c: c.execute(Q["worker_heartbeat"], params).rowcount == 1,
            transaction=False,
        )

    def worker_stop(
        self, worker_id: str, *, done: int, failed: int, now: Timestamp | None = None
    ) -> None:
        params = stop_params(worker_id, done=done, failed=failed, now=now)
        self._execute("stopping a worker", "worker_stop", params)

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        rows = self._execute("listing workers", "worker_list", {"now": now})
        if not rows:
            return []
        return listed((worker_info(r, r["queues"]) for r in rows), float(rows[0]["listed_at"]))

    def worker_reap(
        self, *, dead_after: float, gone: Sequence[str] = (), now: Timestamp | None = None
    ) -> list[str]:
        params = {"dead_after": float(dead_after), "gone": list(gone), "now": now}
        rows = self._execute("reaping dead workers", "worker_reap", params)
        if rows:
            self._compact_counts()
        return [str(r["id"]) for r in rows]

    def worker_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        params = {"older_than": float(older_than), "now": now}
        return self._run(
            "pruning workers",
            lambda c: c.execute(Q["worker_prune"], params).rowcount,
            transaction=False,
        )

    def maintenance_acquire(
        self, duty: str, owner: str, ttl: float, *, now: Timestamp | None = None
    ) -> bool:
        params = {"duty": duty, "owner": owner, "ttl": float(ttl), "now": now}
        return bool(self._execute("acquiring a maintenance lease", "maintenance_acquire", params))

    # -- crawls and seen sets --------------------------------------------------------

    def crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> CrawlInfo:
        _check_fingerprints([dataclasses.replace(s, crawl=0) for s in start])
        meta = _dumps(spec.meta)
        limits = limits_json(spec.limits)
        _insert_params(start, now)  # arguments that are not JSON fail before any I/O

        def work(conn: Conn) -> CrawlInfo:
            row = conn.execute(Q["crawl_next_id"], {"now": now}).fetchone()
            assert row is not None
            crawl_id = int(row["id"])
            on_finish = None if spec.on_finish is None else on_finish_json(spec.on_finish, crawl_id)
            conn.execute(
                Q["crawl_insert"],
                {
                    "id": crawl_id,
                    "name": spec.name,
                    "meta": meta,
                    "on_finish": on_finish,
                    "limits": limits,
                    "now": now,
                },
            )
            self._insert(conn, [dataclasses.replace(s, crawl=crawl_id) for s in start], now)
            conn.execute(Q["constraints_immediate"])
            info = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
            assert info is not None
            return _crawl_from_row(info)

        return self._run("creating a crawl", work)

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        rows = self._execute("reading a crawl", "crawl_get", {"id": crawl_id})
        return _crawl_from_row(rows[0]) if rows else None

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        params = {"after_id": after_id, "state": None if state is None else str(state)}
        rows = self._run(
            "listing crawls",
            lambda c: c.execute(_limited("crawl_list", limit), params).fetchall(),
            transaction=False,
        )
        return [_crawl_from_row(r) for r in rows]

    def _crawl_move(
        self,
        operation: str,
        crawl_id: int,
        states: tuple[str, str],
        to: str,
        jobs: str,
        now: Timestamp | None,
    ) -> bool:
        """A crawl in one of ``states`` takes state ``to`` and ``jobs`` moves its jobs,
        in one transaction; False, changing nothing, if it was in another state.

        Pause and cancel move the jobs before they lock the crawl row (a claim holds its
        job rows while it waits for the crawl row, its counters), then once more for the
        jobs that joined meanwhile. Resume sets the state first: the triggers hold a
        job that turns pending in a crawl still paused."""
        params = {"id": crawl_id, "from": list(states), "to": to, "now": now}
        resume = to == CrawlState.RUNNING

        def work(conn: Conn) -> bool:
            row = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
            if row is None or row["state"] not in states:
                return False
            if not resume:
                conn.execute(Q[jobs], {"id": crawl_id, "now": now})
            if conn.execute(Q["crawl_set_state"], params).fetchone() is None:
                raise _Restart(f"crawl {crawl_id} changed state meanwhile")
            conn.execute(Q[jobs], {"id": crawl_id, "now": now})
            return True

        return self._run(operation, work)

    def crawl_pause(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_move(
            "pausing a crawl", crawl_id, ("running", "running"), "paused", "crawl_hold", now
        )

    def crawl_resume(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_move(
            "resuming a crawl", crawl_id, ("paused", "paused"), "running", "crawl_unhold", now
        )

    def crawl_cancel(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_move(
            "cancelling a crawl",
            crawl_id,
            ("running", "paused"),
            "cancelled",
            "crawl_cancel_jobs",
            now,
        )

    def seen_add(
        self, crawl_id: int, fingerprints: Sequence[bytes], *, now: Timestamp | None = None
    ) -> list[bool]:
        for fp in fingerprints:
            check_fingerprint(fp)

        def work(conn: Conn) -> list[bool]:
            if not conn.execute(Q["crawl_lock"], {"ids": [crawl_id]}).fetchall():
                raise no_such_crawl(crawl_id)
            return self._seen_add(conn, [(crawl_id, fp) for fp in fingerprints], now)

        return self._run("adding to a seen set", work)

    def seen_has(self, crawl_id: int, fingerprints: Sequence[bytes]) -> list[bool]:
        fps = [check_fingerprint(fp) for fp in fingerprints]
        params = {"crawl_id": crawl_id, "fps": fps}
        rows = self._execute("reading a seen set", "seen_has", params)
        if not rows:
            raise no_such_crawl(crawl_id)
        known = {bytes(fp) for fp in rows[0]["known"]}
        return [fp in known for fp in fps]

    def result_add(
        self,
        crawl_id: int,
        items: Sequence[tuple[bytes, str]],
        *,
        now: Timestamp | None = None,
    ) -> list[bool]:
        """Numbered from the crawl's row in ``crawlq_result_seqs``, locked until commit, so
        one crawl's records commit in seq order (see migration 0004)."""
        checked = check_results(items)
        firsts = _first_of_each([key for key, _ in checked])
        records = [record.encode("utf-8") for _, record in checked]

        def work(conn: Conn) -> list[bool]:
            row = conn.execute(Q["result_lock"], {"crawl_id": crawl_id}).fetchone()
            if row is None:
                raise no_such_crawl(crawl_id)
            if not checked:
                return []
            keys = [checked[i][0] for i in firsts]
            params = {"crawl_id": crawl_id, "keys": keys}
            known = {bytes(r["key"]) for r in conn.execute(Q["result_known"], params)}
            last_seq = int(row["last_seq"])
            answers: list[bool] = []
            new: dict[str, list[Any]] = {"keys": [], "seqs": [], "records": []}
            first = set(firsts)
            for i, ((key, _), record) in enumerate(zip(checked, records, strict=True)):
                is_new = i in first and key not in known
                answers.append(is_new)
                if is_new:
                    last_seq += 1
                    new["keys"].append(key)
                    new["seqs"].append(last_seq)
                    new["records"].append(record)
            if new["keys"]:
                conn.execute(Q["result_insert"], {"crawl_id": crawl_id, **new})
                conn.execute(Q["result_seq_set"], {"crawl_id": crawl_id, "last_seq": last_seq})
            return answers

        return self._run("adding crawl results", work)

    def result_list(
        self, crawl_id: int, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        after, limit = check_page(after, limit)

        def work(conn: Conn) -> list[DictRow]:
            if conn.execute(Q["result_count"], {"crawl_id": crawl_id}).fetchone() is None:
                raise no_such_crawl(crawl_id)
            params = {"crawl_id": crawl_id, "after": after}
            return conn.execute(_limited("result_list", limit), params).fetchall()

        rows = self._run("listing crawl results", work, transaction=False)
        return [(int(r["seq"]), bytes(r["record"]).decode("utf-8")) for r in rows]

    def result_count(self, crawl_id: int) -> int:
        rows = self._execute("counting crawl results", "result_count", {"crawl_id": crawl_id})
        if not rows:
            raise no_such_crawl(crawl_id)
        return int(rows[0]["n"])

    # -- cache -------------------------------------------------------------------------

    def cache_get(self, key: str, *, now: Timestamp | None = None) -> str | None:
        rows = self._execute("reading the cache", "cache_get", {**_cache_key(key), "now": now})
        return bytes(rows[0]["value"]).decode("utf-8") if rows else None

    @staticmethod
    def _cache_params(key: str, value: str, ttl: float, now: Timestamp | None) -> dict[str, Any]:
        return {
            **_cache_key(key),
            "value": check_text(value, "a cache value").encode("utf-8"),
            "ttl": check_ttl(ttl),
            "now": now,
        }

    def cache_set(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> None:
        self._execute("writing the cache", "cache_set", self._cache_params(key, value, ttl, now))

    def cache_add(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> bool:
        params = self._cache_params(key, value, ttl, now)
        return bool(self._execute("adding to the cache", "cache_add", params))

    def cache_delete(self, key: str) -> None:
        self._execute("deleting from the cache", "cache_delete", _cache_key(key))

    # -- limits ----------------------------------------------------------------------

    def _limit_write(self, operation: str, query: str, params: dict[str, Any]) -> None:
        """Write a key's record, then re-time its front (or give it one) at once."""

        def work(conn: Conn) -> None:
            # The front first (a job row before the key's, the order every write keeps);
            # the front its key then got is ours, demoted again under the new record.
            conn.execute(Q["limit_demote_front"], {"key": params["key"]})
            row = conn.execute(Q[query], params).fetchone()
            if row is not None and row["front"] is not None:
                conn.execute(Q["limit_demote"], {"id": row["front"]})
            conn.execute(Q["limit_reconcile"], {"key": params["key"], "now": params["now"]})

        self._run(operation, work)

    def limit_set(self, key: str, limits: Limits, *, now: Timestamp | None = None) -> None:
        params = {
            "key": key,
            "max_running": limits.max_running,
            "min_interval": float(limits.min_interval),
            "now": now,
        }
        self._limit_write("setting a key's limits", "limit_set", params)

    def limit_set_default(
        self, queue: str, limits: Limits | None, *, now: Timestamp | None = None
    ) -> None:
        if limits is None:
            self._execute(
                "removing a queue's default limits", "limit_default_delete", {"queue": queue}
            )
            return
        params = {
            "queue": queue,
            "max_running": limits.max_running,
            "min_interval": float(limits.min_interval),
        }
        self._execute("setting a queue's default limits", "limit_default_set", params)

    def limit_block(self, key: str, until: Timestamp, *, now: Timestamp | None = None) -> None:
        params = {"key": key, "until": float(until), "now": now}
        self._limit_write("blocking a key", "limit_block", params)

    def limit_get(
        self, keys: Sequence[str], *, now: Timestamp | None = None
    ) -> list[KeyLimit | None]:
        if not keys:
            return []
        rows = self._execute("reading keys", "limit_get", {"keys": list(keys)})
        found = {r["key"]: _key_limit_from_row(r) for r in rows}
        return [found.get(key) for key in keys]

    def limit_list(self, *, limit: int = 100, after: str = "") -> list[KeyLimit]:
        rows = self._run(
            "listing keys",
            lambda c: c.execute(_limited("limit_list", limit), {"after": after}).fetchall(),
            transaction=False,
        )
        return [_key_limit_from_row(r) for r in rows]

    def store_summary(self, *, now: Timestamp | None = None) -> StoreSummary:
        def work(conn: Conn) -> StoreSummary:
            crawls = conn.execute(Q["summary_crawls"]).fetchall()
            keys = conn.execute(Q["summary_keys"], {"now": now}).fetchone()
            return summary_of(crawls, keys)

        return self._run("summing up crawls and keys", work, transaction=False)


class _OneByOne(Exception):
    """A batch of completions must run one completion at a time (see ``_complete``)."""


def _refuse_later_keys(done: Sequence[tuple[DictRow, list[JobSpec]]]) -> None:
    """Raise ``_OneByOne`` if a child names the key of a job completed after its parent."""
    later: set[tuple[str, str | None]] = set()
    for row, kids in reversed(done):
        if any((kid.queue, kid.key) in later for kid in kids):
            raise _OneByOne()
        if row["key"] is not None:
            later.add((row["queue"], row["key"]))


def _live_from_row(row: DictRow) -> _Live:
    return _Live(
        id=row["id"],
        running=row["state"] == "running",
        request=_request_from_row(row),
        followup=None if row["followup"] is None else Request(**row["followup"]),
    )


def _apply(job: _Live, incoming: Request, spec: JobSpec) -> Outcome:
    """Merge a request into the live job of its key (or into its remembered request)."""
    if job.running:
        merged = (
            incoming if job.followup is None else merge(job.followup, incoming, spec.on_conflict)
        )
        if merged is None:
            return Outcome.UNCHANGED
        job.followup, job.changed = merged, True
        return Outcome.DEFERRED
    merged = merge(job.request, incoming, spec.on_conflict)
    if merged is None:
        return Outcome.UNCHANGED
    job.request, job.changed = merged, True
    return Outcome.UPDATED


def _pending_params(jobs: Sequence[_Live], now: Timestamp | None) -> dict[str, Any]:
    """Parameters of ``job_update_pending``: one array per column."""
    requests = [j.request for j in jobs]
    return {
        "id": [j.id for j in jobs],
        "task": [r.task for r in requests],
        "args": [_dumps(r.args) for r in requests],
        "kwargs": [_dumps(r.kwargs) for r in requests],
        "priority": [r.priority for r in requests],
        "run_at": [float(r.run_at) for r in requests],
        "max_attempts": [r.max_attempts for r in requests],
        "lease_seconds": [float(r.lease_seconds) for r in requests],
        "timeout": [_float(r.timeout) for r in requests],
        "now": now,
    }


def _queue_stats(row: DictRow) -> QueueStats:
    now = row["now"]
    unpromoted = row["unpromoted"]
    oldest = [
        t for t in (row["oldest_ready"], row["oldest_scheduled"]) if t is not None and t <= now
    ]
    return QueueStats(
        queue=row["queue"],
        due=row["ready"] + unpromoted,
        scheduled=row["scheduled"] - unpromoted,
        waiting=row["waiting"],
        held=row["held"],
        running=row["running"],
        done=row["done"],
        dead=row["dead"],
        cancelled=row["cancelled"],
        oldest_due_age=now - min(oldest) if oldest else None,
        done_last_minute=row["done_recent"],
    )
