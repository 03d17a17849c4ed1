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

import dataclasses
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, TypeVar

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
from crawlq.stores._sqlfile import load_queries, split_statements
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
    limits_from,
    limits_json,
    on_finish_json,
    on_finish_spec,
    summary_of,
)
from crawlq.stores.sqlite.crawl_delete import CrawlDeleteMixin
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


def _is_busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


@contextmanager
def _translate(operation: str) -> Iterator[None]:
    """Turn driver errors into crawlq errors, keeping the cause."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if _is_busy(exc):
            raise StoreUnavailable(
                f"SQLite stayed locked by another process during {operation}: {exc}"
            ) from exc
        if "disk is full" in str(exc):  # transient too: a later call may work
            raise StoreUnavailable(f"SQLite's disk is full during {operation}: {exc}") from exc
        raise StoreError(f"SQLite failed during {operation}: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite failed during {operation}: {exc}") from exc


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _request_from_row(row: sqlite3.Row) -> Request:
    """The request a pending job's row holds (``run_at`` its own, for a front)."""
    return Request(
        task=row["task"],
        args=json.loads(row["args"]),
        kwargs=json.loads(row["kwargs"]),
        priority=row["priority"],
        run_at=row["run_at"],
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        timeout=row["timeout"],
        crawl=row["crawl_id"],
        limit_key=row["limit_key"],
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _job_from_row(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        queue=row["queue"],
        task=row["task"],
        args=json.loads(row["args"]),
        kwargs=json.loads(row["kwargs"]),
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
        result=_loads(row["result"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        crawl_id=row["crawl_id"],
        limit_key=row["limit_key"],
    )


def _crawl_from_row(row: sqlite3.Row) -> CrawlInfo:
    return crawl_info(row, json.loads(row["meta"]))


def _key_limit_from_row(row: sqlite3.Row) -> KeyLimit:
    return key_limit(row, row["next_start"] if row["front"] is not None else None)


def _check_fingerprint(spec: JobSpec) -> bytes | None:
    fp = spec.fingerprint
    if fp is None:
        return None
    check_seen_has_crawl([spec])
    return check_fingerprint(fp)


@dataclass(slots=True)
class _Touched:
    """What one transaction changed that must be settled before it commits: limit keys
    to reconcile and crawls that may have finished."""

    keys: set[str] = field(default_factory=set)
    crawls: set[int] = field(default_factory=set)
    ensured: set[str] = field(default_factory=set)
    """Keys whose record this transaction already made sure of."""

    def note(self, rows: Iterable[sqlite3.Row], *, crawls: bool = True) -> None:
        for row in rows:
            if row["limit_key"] is not None:
                self.keys.add(row["limit_key"])
            if crawls and row["crawl_id"] is not None:
                self.crawls.add(row["crawl_id"])


class SQLiteStore(CrawlDeleteMixin):
    """The embedded store. Thread-safe: calls from many threads are serialised."""

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
            if isinstance(cause, sqlite3.Error) and not _is_busy(cause):
                raise _unopenable(path, cause) from exc
            raise

    # -- connections and transactions ------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.settings.path,
            timeout=self.settings.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.settings.synchronous.upper()}")
        return conn

    def _write(self, operation: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one write transaction; all of it commits or none of it."""
        with self._lock, _translate(operation):
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
        with self._lock, _translate(operation):
            return work(self._conn)

    def close(self) -> None:
        with self._lock, self._wait_lock:
            self._conn.close()
            self._wait_conn.close()

    def now(self) -> Timestamp:
        return time.time()

    def _now(self, now: Timestamp | None) -> Timestamp:
        return time.time() if now is None else now

    # -- migrations ------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply the migrations this file has not seen, in order; returns their names."""
        folder = resources.files("crawlq.stores.sqlite.migrations")
        known = {
            int(f.name.split("_", 1)[0]): f for f in folder.iterdir() if f.name.endswith(".sql")
        }

        def work(conn: sqlite3.Connection) -> list[str]:
            conn.execute(Q["migrations_create"])
            applied = {row[0] for row in conn.execute(Q["migrations_applied"])}
            unknown = applied - known.keys()
            if unknown:
                raise ConfigurationError(
                    f"{self.settings.path} has schema version {max(unknown)}, newer than this "
                    "crawlq knows: upgrade crawlq, or use another database file"
                )
            done: list[str] = []
            for version, file in sorted(known.items()):
                if version in applied:
                    continue
                for statement in split_statements(file.read_text(encoding="utf-8")):
                    conn.execute(statement)
                conn.execute(
                    Q["migrations_record"],
                    {"version": version, "name": file.name, "now": time.time()},
                )
                done.append(file.name)
            return done

        return self._write("migrating the schema", work)

    # -- scheduling ------------------------------------------------------------------

    def job_schedule(
        self, specs: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> list[ScheduleResult]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[ScheduleResult]:
            touched = _Touched()
            results = [self._schedule_one(conn, s, t, touched) for s in specs]
            self._settle(conn, touched, t)
            return [r for r in results if r is not None]

        return self._write("scheduling jobs", work)

    def _open_crawl(
        self, conn: sqlite3.Connection, crawl_id: int, *, drop_closed: bool
    ) -> sqlite3.Row | None:
        """The open crawl a job joins: ``CrawlNotFound`` if there is none; if it is
        closed, ``CrawlClosed``, or None with ``drop_closed`` (children, follow-ups)."""
        row: sqlite3.Row | None = conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
        if row is None:
            raise no_such_crawl(crawl_id)
        if row["state"] in OPEN_CRAWL_STATES:
            return row
        if drop_closed:
            return None
        raise CrawlClosed(f"crawl {crawl_id} is {row['state']}: it takes no more jobs")

    def _schedule_one(
        self,
        conn: sqlite3.Connection,
        spec: JobSpec,
        now: float,
        touched: _Touched,
        *,
        drop_closed: bool = False,
    ) -> ScheduleResult | None:
        """Schedule one spec; None only when ``drop_closed`` dropped it."""
        fp = _check_fingerprint(spec)
        crawl = None
        if spec.crawl is not None:
            crawl = self._open_crawl(conn, spec.crawl, drop_closed=drop_closed)
            if crawl is None:
                return None
            if fp is not None:
                new = conn.execute(Q["seen_insert"], {"crawl_id": spec.crawl, "fp": fp})
                if new.fetchone() is None:
                    return ScheduleResult(0, Outcome.SEEN)
        incoming = Request.from_spec(spec, now)
        inserted = self._insert(conn, spec.queue, spec.key, incoming, now, touched, crawl)
        if inserted is not None:
            return ScheduleResult(inserted, Outcome.CREATED)
        live = conn.execute(Q["job_get_live_by_key"], {"queue": spec.queue, "key": spec.key})
        row = live.fetchone()
        if row["state"] == "running":
            return self._defer(conn, row, incoming, spec)
        merged = merge(_request_from_row(row), incoming, spec.on_conflict)
        if merged is None:
            return ScheduleResult(row["id"], Outcome.UNCHANGED)
        self._update_pending(conn, row["id"], merged, now, touched)
        return ScheduleResult(row["id"], Outcome.UPDATED)

    def _update_pending(
        self,
        conn: sqlite3.Connection,
        job_id: JobId,
        request: Request,
        now: float,
        touched: _Touched,
    ) -> None:
        """Write a pending job's new request; its state follows (job_update_pending)."""
        params = {**self._request_params(request, now), "id": job_id}
        touched.note(conn.execute(Q["job_update_pending"], params).fetchall(), crawls=False)

    def _defer(
        self, conn: sqlite3.Connection, row: sqlite3.Row, incoming: Request, spec: JobSpec
    ) -> ScheduleResult:
        """Remember a request for a running key (one per key, merged by the policy)."""
        if row["followup"] is None:
            merged: Request | None = incoming
        else:
            merged = merge(Request.from_json(row["followup"]), incoming, spec.on_conflict)
        if merged is None:
            return ScheduleResult(row["id"], Outcome.UNCHANGED)
        conn.execute(Q["job_set_followup"], {"id": row["id"], "followup": merged.to_json()})
        return ScheduleResult(row["id"], Outcome.DEFERRED)

    @staticmethod
    def _request_params(request: Request, now: float) -> dict[str, Any]:
        return {
            "task": request.task,
            "args": _dumps(request.args),
            "kwargs": _dumps(request.kwargs),
            "priority": request.priority,
            "run_at": request.run_at,
            "max_attempts": request.max_attempts,
            "lease_seconds": request.lease_seconds,
            "timeout": request.timeout,
            "now": now,
        }

    def _insert(
        self,
        conn: sqlite3.Connection,
        queue: str,
        key: str | None,
        request: Request,
        now: float,
        touched: _Touched,
        crawl: sqlite3.Row | None,
    ) -> JobId | None:
        """Insert a pending job unless (queue, key) is live: held in a paused crawl,
        waiting behind its limit key (reconciled when the transaction settles), else ready
        or scheduled by run_at."""
        limit_key = request.limit_key
        if crawl is not None and crawl["state"] == CrawlState.PAUSED:
            state = "held"
        elif limit_key is not None:
            state = "waiting"
        else:
            state = "ready" if request.run_at <= now else "scheduled"
        if limit_key is not None and limit_key not in touched.ensured:
            self._ensure_key(conn, limit_key, queue, None if crawl is None else crawl["limits"])
            touched.ensured.add(limit_key)
        params = {
            **self._request_params(request, now),
            "queue": queue,
            "key": key,
            "state": state,
            "crawl_id": request.crawl,
            "limit_key": limit_key,
        }
        rows = conn.execute(Q["job_insert"], params).fetchall()
        if not rows:
            return None
        if state == "waiting" and limit_key is not None:
            touched.keys.add(limit_key)
        return int(rows[0][0])

    def _spawn_followups(
        self, conn: sqlite3.Connection, rows: list[sqlite3.Row], now: float, touched: _Touched
    ) -> None:
        """Turn the remembered request of each ended job into a pending job (dropped if
        its crawl has closed meanwhile)."""
        for row in rows:
            if row["followup"] is not None:
                request = Request.from_json(row["followup"])
                crawl = None
                if request.crawl is not None:
                    crawl = self._open_crawl(conn, request.crawl, drop_closed=True)
                    if crawl is None:
                        continue
                self._insert(conn, row["queue"], row["key"], request, now, touched, crawl)

    # -- limit keys and crawl finishing (inside a write transaction) ---------------------

    def _ensure_key(
        self, conn: sqlite3.Connection, key: str, queue: str, crawl_limits: str | None
    ) -> None:
        """Make sure ``key`` has a record with fixed settings before a job joins it."""
        limits = limits_from(crawl_limits)
        conn.execute(
            Q["limit_ensure"],
            {
                "key": key,
                "queue": queue,
                "from_crawl": limits is not None,
                "max_running": None if limits is None else limits.max_running,
                "min_interval": 0.0 if limits is None else limits.min_interval,
            },
        )

    def _reconcile(self, conn: sqlite3.Connection, key: str, now: float) -> None:
        """Give ``key`` a front if it has none, room under its cap and a waiting job: the
        best one, due at max(its run_at, last start + min_interval, blocked_until)."""
        row = conn.execute(Q["limit_take_front"], {"key": key}).fetchone()
        if row is None or row["front"] is None:
            return
        gate = 0.0
        if row["last_start"] is not None:
            gate = row["last_start"] + row["min_interval"]
        if row["blocked_until"] is not None:
            gate = max(gate, row["blocked_until"])
        conn.execute(Q["limit_front_due"], {"id": row["front"], "gate": gate, "now": now})

    def _retime(self, conn: sqlite3.Connection, key: str, now: float) -> None:
        """Settings or block of ``key`` changed: its front goes back and is chosen again."""
        conn.execute(Q["limit_demote_front"], {"key": key})
        self._reconcile(conn, key, now)

    def _settle(self, conn: sqlite3.Connection, touched: _Touched, now: float) -> None:
        """End of a write: reconcile the touched keys, then finish each touched crawl with
        nothing outstanding, scheduling its ``on_finish`` in this transaction."""
        while touched.keys or touched.crawls:
            keys, touched.keys = sorted(touched.keys), set()
            for key in keys:
                self._reconcile(conn, key, now)
            crawls, touched.crawls = sorted(touched.crawls), set()
            for crawl_id in crawls:
                self._finish_crawl(conn, crawl_id, now, touched)

    def _finish_crawl(
        self, conn: sqlite3.Connection, crawl_id: int, now: float, touched: _Touched
    ) -> None:
        row = conn.execute(Q["crawl_finish"], {"id": crawl_id, "now": now}).fetchone()
        if row is None or row["on_finish"] is None:
            return
        result = self._schedule_one(conn, on_finish_spec(row["on_finish"]), now, touched)
        if result is not None and result.job_id:
            conn.execute(Q["crawl_set_on_finish_job"], {"id": crawl_id, "job_id": result.job_id})

    # -- claiming and leases ---------------------------------------------------------

    def job_claim(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0 or not params.queues:
            return []
        now = self._now(params.now)
        if not self._read("probing for due jobs", lambda c: self._any_due(c, params.queues, now)):
            return []
        return self._write("claiming jobs", lambda conn: self._claim(conn, params, now))

    @staticmethod
    def _any_due(conn: sqlite3.Connection, queues: Sequence[str], now: float) -> bool:
        return any(
            conn.execute(Q["job_has_due"], {"queue": q, "now": now}).fetchone()[0] for q in queues
        )

    def _claim(self, conn: sqlite3.Connection, params: ClaimParams, now: float) -> list[Job]:
        """Claim rounds: a round that claimed a limit key's front reconciles its key, and
        while room remains looks again (the key's next front may be due now)."""
        jobs: list[Job] = []
        while len(jobs) < params.limit:
            claimed = self._claim_round(conn, params, params.limit - len(jobs), now)
            jobs.extend(claimed)
            keys = sorted({j.limit_key for j in claimed if j.limit_key is not None})
            if not keys:
                break
            for key in keys:
                self._reconcile(conn, key, now)
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

    def _claim_round(
        self, conn: sqlite3.Connection, params: ClaimParams, limit: int, now: float
    ) -> list[Job]:
        candidates: list[tuple[int, float, int]] = []
        for queue in dict.fromkeys(params.queues):
            conn.execute(Q["job_promote_due"], {"queue": queue, "now": now})
            found = conn.execute(
                Q["job_claim_candidates"], {"queue": queue, "now": now, "limit": limit}
            )
            candidates.extend((-r["priority"], r["run_at"], r["id"]) for r in found)
        if not candidates:
            return []
        picked = sorted(candidates)[:limit]
        rows = conn.execute(
            Q["job_claim_ids"],
            {"ids": _dumps([c[2] for c in picked]), "worker_id": params.worker_id, "now": now},
        ).fetchall()
        return [_job_from_row(r) for r in rows]

    def _per_item(self, operation: str, query: str, items: Sequence[dict[str, Any]]) -> list[bool]:
        def work(conn: sqlite3.Connection) -> list[bool]:
            return [conn.execute(Q[query], item).rowcount == 1 for item in items]

        return self._write(operation, work) if items else []

    def job_heartbeat(self, leases: Sequence[Lease], *, now: Timestamp | None = None) -> list[bool]:
        t = self._now(now)
        items = [{"id": lease.job_id, "token": lease.token, "now": t} for lease in leases]
        return self._per_item("heartbeating leases", "job_heartbeat", items)

    def job_release(
        self, releases: Sequence[Release], *, now: Timestamp | None = None
    ) -> list[bool]:
        t = self._now(now)
        items = [
            {"id": r.lease.job_id, "token": r.lease.token, "delay": r.delay, "now": t}
            for r in releases
        ]

        def work(conn: sqlite3.Connection) -> list[bool]:
            touched = _Touched()
            applied = []
            for item in items:
                rows = conn.execute(Q["job_release"], item).fetchall()
                touched.note(rows, crawls=False)  # released jobs stay outstanding
                applied.append(bool(rows))
            self._settle(conn, touched, t)
            return applied

        return self._write("releasing jobs", work) if items else []

    def _ending(
        self,
        operation: str,
        query: str,
        items: Sequence[dict[str, Any]],
        now: float,
        children: Sequence[Sequence[JobSpec]] = (),
    ) -> list[bool]:
        """Apply a state change that may end jobs, then spawn their remembered requests
        and (for completions) their children (dropped when their crawl is closed), then
        settle keys and crawls."""

        def work(conn: sqlite3.Connection) -> list[bool]:
            touched = _Touched()
            applied: list[bool] = []
            for i, item in enumerate(items):
                rows = conn.execute(Q[query], item).fetchall()
                applied.append(bool(rows))
                touched.note(rows)
                ended = [r for r in rows if r["state"] in ("done", "dead")]
                self._spawn_followups(conn, ended, now, touched)
                if rows and children:
                    for spec in children[i]:
                        self._schedule_one(conn, spec, now, touched, drop_closed=True)
            self._settle(conn, touched, now)
            return applied

        return self._write(operation, work) if items else []

    def job_complete(
        self, completions: Sequence[Completion], *, now: Timestamp | None = None
    ) -> list[bool]:
        t = self._now(now)
        items = [
            {"id": c.lease.job_id, "token": c.lease.token, "result": _dumps(c.result), "now": t}
            for c in completions
        ]
        kids = [c.children for c in completions]
        return self._ending("completing jobs", "job_complete", items, t, kids)

    def job_fail(self, failures: Sequence[Failure], *, now: Timestamp | None = None) -> list[bool]:
        t = self._now(now)
        items = [
            {
                "id": f.lease.job_id,
                "token": f.lease.token,
                "error": f.error,
                "retry_delay": f.retry_delay,
                "reason": f.reason,
                "now": t,
            }
            for f in failures
        ]
        return self._ending("recording failed attempts", "job_fail", items, t)

    def job_expire_leases(self, *, now: Timestamp | None = None) -> list[JobId]:
        t = self._now(now)

        def any_expired(conn: sqlite3.Connection) -> bool:
            return bool(conn.execute(Q["job_any_lease_expired"], {"now": t}).fetchone()[0])

        if not self._read("probing for expired leases", any_expired):
            return []  # the common case takes no write lock

        def work(conn: sqlite3.Connection) -> list[JobId]:
            rows = conn.execute(Q["job_expire_leases"], {"now": t}).fetchall()
            return self._leases_returned(conn, rows, t)

        return self._write("returning expired leases", work)

    def _leases_returned(
        self, conn: sqlite3.Connection, rows: list[sqlite3.Row], now: float
    ) -> list[JobId]:
        """The bookkeeping of running jobs taken back from their worker (expired lease,
        worker declared dead): the ones that died spawn their remembered requests, then
        keys and crawls settle. The counters follow by trigger. Returns their ids, sorted."""
        touched = _Touched()
        touched.note(rows)
        self._spawn_followups(conn, [r for r in rows if r["state"] == "dead"], now, touched)
        self._settle(conn, touched, now)
        return sorted(int(r["id"]) for r in rows)

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[JobId]:
            rows = conn.execute(Q["job_cancel"], {"ids": _dumps(list(ids)), "now": t}).fetchall()
            touched = _Touched()
            touched.note(rows)
            self._settle(conn, touched, t)
            return sorted(int(r["id"]) for r in rows)

        return self._write("cancelling jobs", work) if ids else []

    def job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None = None, *, now: Timestamp | None = None
    ) -> list[JobId]:
        t = self._now(now)
        when = t if run_at is None else run_at

        def work(conn: sqlite3.Connection) -> list[JobId]:
            touched = _Touched()
            moved: list[JobId] = []
            for job_id in sorted(set(ids)):
                row = conn.execute(Q["job_pending_by_id"], {"id": job_id}).fetchone()
                if row is not None:
                    request = dataclasses.replace(_request_from_row(row), run_at=when)
                    self._update_pending(conn, job_id, request, t, touched)
                    moved.append(job_id)
            self._settle(conn, touched, t)
            return moved

        return self._write("rescheduling jobs", work) if ids else []

    # -- reading ---------------------------------------------------------------------

    def job_get(self, job_id: JobId) -> Job | None:
        row = self._read(
            "reading a job", lambda c: c.execute(Q["job_get"], {"id": job_id}).fetchone()
        )
        return None if row is None else _job_from_row(row)

    @staticmethod
    def _filter_params(where: JobFilter) -> dict[str, Any]:
        return {
            "after_id": where.after_id,
            "ids": None if where.ids is None else _dumps(list(where.ids)),
            "queue": where.queue,
            "task": where.task,
            "key": where.key,
            "crawl": where.crawl,
            "limit_key": where.limit_key,
            "state": None if where.state is None else _dumps(INTERNAL_STATES[where.state]),
            "finished_before": where.finished_before,
            "limit": -1 if where.limit is None else where.limit,
        }

    def job_list(self, where: JobFilter) -> list[Job]:
        params = self._filter_params(where)
        rows = self._read("listing jobs", lambda c: c.execute(Q["job_list"], params).fetchall())
        return [_job_from_row(r) for r in rows]

    def job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        params = {"queues": _dumps(list(queues)), "limit": check_count("limit", limit, 0)}
        rows = self._read(
            "listing finished jobs", lambda c: c.execute(Q["job_recent"], params).fetchall()
        )
        return [_job_from_row(r) for r in rows]

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        t = self._now(now)
        params = self._filter_params(where)
        if where.state not in (None, JobState.DEAD):
            return []
        params["state"] = _dumps(["dead"])

        def work(conn: sqlite3.Connection) -> list[JobId]:
            touched = _Touched()
            requeued: list[JobId] = []
            for row in conn.execute(Q["job_list"], params).fetchall():
                if row["limit_key"] is not None:  # its record may have been pruned
                    crawl = None
                    if row["crawl_id"] is not None:
                        crawl = conn.execute(Q["crawl_get"], {"id": row["crawl_id"]}).fetchone()
                    limits = None if crawl is None else crawl["limits"]
                    self._ensure_key(conn, row["limit_key"], row["queue"], limits)
                done = conn.execute(Q["job_requeue"], {"id": row["id"], "now": t}).fetchall()
                if done:
                    touched.note(done, crawls=False)
                    requeued.append(int(row["id"]))
            self._settle(conn, touched, t)
            return requeued

        return self._write("requeueing dead jobs", work)

    def job_purge(self, where: JobFilter) -> int:
        params = self._filter_params(where)
        if where.state is None:  # select finished jobs before ``limit`` applies
            params["state"] = _dumps(FINISHED)

        def work(conn: sqlite3.Connection) -> int:
            rows = conn.execute(Q["job_list"], params).fetchall()
            ids = [r["id"] for r in rows if r["state"] in FINISHED]
            return sum(conn.execute(Q["job_delete"], {"id": i}).rowcount for i in ids)

        return self._write("purging jobs", work)

    def job_prune(self, *, retention: float, now: Timestamp | None = None) -> int:
        t = self._now(now)
        before = t - retention

        def work(conn: sqlite3.Connection) -> int:
            conn.execute(Q["limit_prune"], {"now": t})  # key records that say nothing
            conn.execute(Q["cache_prune"], {"now": t})  # expired cache entries
            queues = {r["queue"] for r in conn.execute(Q["queue_counts"])}
            return sum(
                conn.execute(
                    Q["job_prune"], {"queue": q, "state": state, "before": before}
                ).rowcount
                for q in sorted(queues)
                for state in ("done", "cancelled")
            )

        return self._write("pruning finished jobs", work)

    def _min_run_at(self, conn: sqlite3.Connection, queue: str, state: str) -> float | None:
        query = Q[f"queue_min_run_at_{state}"]
        value = conn.execute(query, {"queue": queue}).fetchone()[0]
        return None if value is None else float(value)

    def job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        def work(conn: sqlite3.Connection) -> float | None:
            times = [
                t
                for q in queues
                for state in ("ready", "scheduled")
                if (t := self._min_run_at(conn, q, state)) is not None
            ]
            return min(times, default=None)

        return self._read("finding the next due job", work)

    def job_next_gated(
        self, queues: Sequence[str], *, within: float, now: Timestamp | None = None
    ) -> Timestamp | None:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> float | None:
            args = {"until": t + within, "now": t}
            rows = [
                conn.execute(Q["job_next_gated"], {**args, "queue": q}).fetchone() for q in queues
            ]
            return min((float(r[0]) for r in rows if r is not None), default=None)

        return self._read("finding the next job a limit key keeps back", work)

    def _data_version(self) -> int:
        with self._wait_lock, _translate("watching for new jobs"):
            return int(self._wait_conn.execute("PRAGMA data_version").fetchone()[0])

    def job_wait(self, params: WaitParams) -> None:
        deadline = time.monotonic() + params.timeout
        version = self._data_version()
        next_due = self.job_next_due(params.queues)
        if next_due is not None:
            deadline = min(deadline, time.monotonic() + (next_due - time.time()))
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(self.settings.poll_interval, remaining))
            if self._data_version() != version:
                return

    def queue_stats(self, *, now: Timestamp | None = None) -> list[QueueStats]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[QueueStats]:
            counts: dict[str, dict[str, int]] = {}
            for row in conn.execute(Q["queue_counts"]):
                counts.setdefault(row["queue"], {})[row["state"]] = row["n"]
            return [self._queue_stats(conn, q, c, t) for q, c in sorted(counts.items())]

        return self._read("reading queue stats", work)

    def queue_totals(self) -> list[QueueTotals]:
        def work(conn: sqlite3.Connection) -> list[QueueTotals]:
            totals: dict[str, dict[str, int]] = {}
            for row in conn.execute(Q["queue_counts"]):
                totals.setdefault(row["queue"], {})[row["state"]] = row["n"]
            return [totals_of(q, counts) for q, counts in sorted(totals.items())]

        return self._read("reading queue totals", work)

    def _queue_stats(
        self, conn: sqlite3.Connection, queue: str, counts: dict[str, int], now: float
    ) -> QueueStats:
        args = {"queue": queue, "now": now}
        unpromoted = conn.execute(Q["queue_due_unpromoted"], args).fetchone()[0]
        oldest = [
            t
            for state in ("ready", "scheduled")
            if (t := self._min_run_at(conn, queue, state)) is not None and t <= now
        ]
        done_recent = conn.execute(
            Q["queue_done_since"], {"queue": queue, "since": now - 60.0}
        ).fetchone()[0]
        return QueueStats(
            queue=queue,
            due=counts.get("ready", 0) + unpromoted,
            scheduled=counts.get("scheduled", 0) - unpromoted,
            running=counts.get("running", 0),
            done=counts.get("done", 0),
            dead=counts.get("dead", 0),
            cancelled=counts.get("cancelled", 0),
            waiting=counts.get("waiting", 0),
            held=counts.get("held", 0),
            oldest_due_age=now - min(oldest) if oldest else None,
            done_last_minute=done_recent,
        )

    # -- workers and maintenance -----------------------------------------------------

    def worker_register(self, info: WorkerInfo, *, now: Timestamp | None = None) -> None:
        params = register_params(info, _dumps(list(info.queues)), self._now(now))
        self._write("registering a worker", lambda c: c.execute(Q["worker_register"], params))

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
            worker_id,
            running=running,
            done=done,
            failed=failed,
            rss_bytes=rss_bytes,
            now=self._now(now),
        )
        return self._write(
            "heartbeating a worker",
            lambda c: c.execute(Q["worker_heartbeat"], params).rowcount == 1,
        )

    def worker_stop(
        self, worker_id: str, *, done: int, failed: int, now: Timestamp | None = None
    ) -> None:
        params = stop_params(worker_id, done=done, failed=failed, now=self._now(now))
        self._write("stopping a worker", lambda c: c.execute(Q["worker_stop"], params))

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        rows = self._read("listing workers", lambda c: c.execute(Q["worker_list"]).fetchall())
        return listed((worker_info(dict(r), json.loads(r["queues"])) for r in rows), self._now(now))

    def worker_reap(
        self, *, dead_after: float, gone: Sequence[str] = (), now: Timestamp | None = None
    ) -> list[str]:
        t = self._now(now)
        probe = {"now": t, "dead_after": dead_after}
        if not gone and not self._read(
            "probing for dead workers",
            lambda c: bool(c.execute(Q["worker_any_overdue"], probe).fetchone()[0]),
        ):
            return []  # the common case takes no write lock
        params = {**probe, "gone": _dumps(list(gone))}

        def work(conn: sqlite3.Connection) -> list[str]:
            dead = sorted(r["id"] for r in conn.execute(Q["worker_reap"], params))
            for worker_id in dead:
                query = Q["job_return_worker_leases"]
                rows = conn.execute(query, {"worker_id": worker_id, "now": t}).fetchall()
                self._leases_returned(conn, rows, t)
            return dead

        return self._write("reaping dead workers", work)

    def worker_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        before = self._now(now) - older_than
        return self._write(
            "pruning workers",
            lambda c: c.execute(Q["worker_prune"], {"before": before}).rowcount,
        )

    def maintenance_acquire(
        self, duty: str, owner: str, ttl: float, *, now: Timestamp | None = None
    ) -> bool:
        params = {"duty": duty, "owner": owner, "ttl": ttl, "now": self._now(now)}
        # the workers that do not hold the duty take no write lock
        doing = ("probing a maintenance lease", "acquiring a maintenance lease")
        return self._take_unless_held(
            doing, "maintenance_held_elsewhere", "maintenance_acquire", params
        )

    # -- crawls and seen sets --------------------------------------------------------

    def crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> CrawlInfo:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> CrawlInfo:
            params = {
                "name": spec.name,
                "meta": _dumps(spec.meta),
                "limits": limits_json(spec.limits),
                "now": t,
            }
            crawl_id = int(conn.execute(Q["crawl_insert"], params).fetchone()[0])
            if spec.on_finish is not None:
                on_finish = on_finish_json(spec.on_finish, crawl_id)
                conn.execute(Q["crawl_set_on_finish"], {"id": crawl_id, "on_finish": on_finish})
            touched = _Touched(crawls={crawl_id})  # finishes at once if nothing is left
            for job in start:
                self._schedule_one(conn, _with_crawl(job, crawl_id), t, touched)
            self._settle(conn, touched, t)
            return _crawl_from_row(conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone())

        return self._write("creating a crawl", work)

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        row = self._read(
            "reading a crawl", lambda c: c.execute(Q["crawl_get"], {"id": crawl_id}).fetchone()
        )
        return None if row is None else _crawl_from_row(row)

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        params = {
            "after_id": after_id,
            "state": None if state is None else state.value,
            "limit": -1 if limit is None else limit,
        }
        rows = self._read("listing crawls", lambda c: c.execute(Q["crawl_list"], params).fetchall())
        return [_crawl_from_row(r) for r in rows]

    def _crawl_transition(
        self,
        operation: str,
        crawl_id: int,
        from_states: Sequence[str],
        to_state: str,
        jobs_query: str,
        now: Timestamp | None,
    ) -> bool:
        """Move an open crawl from ``from_states`` to ``to_state`` and its pending jobs
        with ``jobs_query``, then reconcile their keys; False, changing nothing, if the
        crawl was in none of ``from_states``."""
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> bool:
            params = {
                "id": crawl_id,
                "state": to_state,
                "from_states": _dumps(list(from_states)),
                "now": t,
            }
            if conn.execute(Q["crawl_set_state"], params).fetchone() is None:
                return False
            touched = _Touched()
            rows = conn.execute(Q[jobs_query], {"id": crawl_id, "now": t}).fetchall()
            touched.keys.update(r["limit_key"] for r in rows if r["limit_key"] is not None)
            self._settle(conn, touched, t)
            return True

        return self._write(operation, work)

    def crawl_pause(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_transition(
            "pausing a crawl", crawl_id, ["running"], "paused", "crawl_hold_jobs", now
        )

    def crawl_resume(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_transition(
            "resuming a crawl", crawl_id, ["paused"], "running", "crawl_unhold_jobs", now
        )

    def crawl_cancel(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_transition(
            "cancelling a crawl",
            crawl_id,
            ["running", "paused"],
            "cancelled",
            "crawl_cancel_jobs",
            now,
        )

    def seen_add(
        self, crawl_id: int, fingerprints: Sequence[bytes], *, now: Timestamp | None = None
    ) -> list[bool]:
        for fp in fingerprints:
            check_fingerprint(fp)

        def work(conn: sqlite3.Connection) -> list[bool]:
            if conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone() is None:
                raise no_such_crawl(crawl_id)
            query = Q["seen_insert"]
            return [
                conn.execute(query, {"crawl_id": crawl_id, "fp": fp}).fetchone() is not None
                for fp in fingerprints
            ]

        return self._write("adding to a seen set", work)

    def seen_has(self, crawl_id: int, fingerprints: Sequence[bytes]) -> list[bool]:
        fps = [check_fingerprint(fp) for fp in fingerprints]

        def work(conn: sqlite3.Connection) -> list[bool]:
            self._crawl_exists(conn, crawl_id)
            query = Q["seen_has"]
            return [
                conn.execute(query, {"crawl_id": crawl_id, "fp": fp}).fetchone() is not None
                for fp in fps
            ]

        return self._read("reading a seen set", work)

    def _crawl_exists(self, conn: sqlite3.Connection, crawl_id: int) -> None:
        if conn.execute(Q["crawl_get"], {"id": crawl_id}).fetchone() is None:
            raise no_such_crawl(crawl_id)

    def result_add(
        self,
        crawl_id: int,
        items: Sequence[tuple[bytes, str]],
        *,
        now: Timestamp | None = None,
    ) -> list[bool]:
        """Numbered MAX(seq) + 1 inside the write transaction (writers take turns)."""
        checked = check_results(items)

        def work(conn: sqlite3.Connection) -> list[bool]:
            self._crawl_exists(conn, crawl_id)
            seq = int(conn.execute(Q["result_last_seq"], {"crawl_id": crawl_id}).fetchone()[0])
            answers: list[bool] = []
            for key, record in checked:
                params = {"crawl_id": crawl_id, "key": key, "seq": seq + 1, "record": record}
                new = conn.execute(Q["result_insert"], params).fetchone() is not None
                seq += new
                answers.append(new)
            return answers

        return self._write("adding crawl results", work)

    def result_list(
        self, crawl_id: int, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        after, limit = check_page(after, limit)
        params = {"crawl_id": crawl_id, "after": after, "limit": limit}

        def work(conn: sqlite3.Connection) -> list[tuple[int, str]]:
            self._crawl_exists(conn, crawl_id)
            rows = conn.execute(Q["result_list"], params).fetchall()
            return [(int(r["seq"]), str(r["record"])) for r in rows]

        return self._read("listing crawl results", work)

    def result_count(self, crawl_id: int) -> int:
        def work(conn: sqlite3.Connection) -> int:
            self._crawl_exists(conn, crawl_id)
            row = conn.execute(Q["result_last_seq"], {"crawl_id": crawl_id}).fetchone()
            return int(row[0])

        return self._read("counting crawl results", work)

    # -- cache -------------------------------------------------------------------------

    def cache_get(self, key: str, *, now: Timestamp | None = None) -> str | None:
        params = {"key": check_text(key, "a cache key"), "now": self._now(now)}
        row = self._read(
            "reading the cache", lambda c: c.execute(Q["cache_get"], params).fetchone()
        )
        return None if row is None else str(row["value"])

    def _cache_params(
        self, key: str, value: str, ttl: float, now: Timestamp | None
    ) -> dict[str, Any]:
        return {
            "key": check_text(key, "a cache key"),
            "value": check_text(value, "a cache value"),
            "ttl": check_ttl(ttl),
            "now": self._now(now),
        }

    def cache_set(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> None:
        params = self._cache_params(key, value, ttl, now)
        self._write("writing the cache", lambda c: c.execute(Q["cache_set"], params))

    def cache_add(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> bool:
        params = self._cache_params(key, value, ttl, now)
        # the losers of a race for a lock take no write lock
        doing = ("probing the cache", "adding to the cache")
        return self._take_unless_held(doing, "cache_live", "cache_add", params)

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

    def cache_delete(self, key: str) -> None:
        params = {"key": check_text(key, "a cache key")}
        self._write("deleting from the cache", lambda c: c.execute(Q["cache_delete"], params))

    # -- limits ------------------------------------------------------------------------

    def limit_set(self, key: str, limits: Limits, *, now: Timestamp | None = None) -> None:
        t = self._now(now)
        params = {
            "key": key,
            "max_running": limits.max_running,
            "min_interval": limits.min_interval,
        }

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(Q["limit_set"], params)
            self._retime(conn, key, t)

        self._write("setting limits", work)

    def limit_set_default(
        self, queue: str, limits: Limits | None, *, now: Timestamp | None = None
    ) -> None:
        def work(conn: sqlite3.Connection) -> None:
            if limits is None:
                conn.execute(Q["limit_default_delete"], {"queue": queue})
            else:
                conn.execute(
                    Q["limit_default_set"],
                    {
                        "queue": queue,
                        "max_running": limits.max_running,
                        "min_interval": limits.min_interval,
                    },
                )

        self._write("setting default limits", work)

    def limit_block(self, key: str, until: Timestamp, *, now: Timestamp | None = None) -> None:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(Q["limit_block"], {"key": key, "until": until})
            self._retime(conn, key, t)

        self._write("blocking a limit key", work)

    def limit_get(
        self, keys: Sequence[str], *, now: Timestamp | None = None
    ) -> list[KeyLimit | None]:
        def work(conn: sqlite3.Connection) -> list[KeyLimit | None]:
            rows = [conn.execute(Q["limit_get"], {"key": k}).fetchone() for k in keys]
            return [None if r is None else _key_limit_from_row(r) for r in rows]

        return self._read("reading limit keys", work)

    def limit_list(self, *, limit: int = 100, after: str = "") -> list[KeyLimit]:
        params = {"after": after, "limit": limit}
        rows = self._read(
            "listing limit keys", lambda c: c.execute(Q["limit_list"], params).fetchall()
        )
        return [_key_limit_from_row(r) for r in rows]

    def store_summary(self, *, now: Timestamp | None = None) -> StoreSummary:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> StoreSummary:
            crawls = conn.execute(Q["summary_crawls"]).fetchall()
            return summary_of(crawls, conn.execute(Q["summary_keys"], {"now": t}).fetchone())

        return self._read("summing up crawls and keys", work)


def _with_crawl(spec: JobSpec, crawl_id: int) -> JobSpec:
    return dataclasses.replace(spec, crawl=crawl_id)
