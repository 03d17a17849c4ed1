"""The SQLite store: one file, shared safely by every process on one machine.

WAL journal, one write transaction per call (``BEGIN IMMEDIATE``), SQLite's busy handler
for waiting on other processes, and a separate connection that watches
``PRAGMA data_version`` so an idle worker wakes up within milliseconds of a commit by any
process. The store's clock is the host's clock, the only one a local file has.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from crawlq.exceptions import ConfigurationError, StoreError, StoreUnavailable
from crawlq.jobs import (
    Job,
    JobSpec,
    JobState,
    Lease,
    Outcome,
    QueueStats,
    ScheduleResult,
    WorkerInfo,
)
from crawlq.stores._sqlfile import load_queries, split_statements
from crawlq.stores.base import (
    Capabilities,
    ClaimParams,
    Completion,
    Failure,
    JobFilter,
    Release,
    WaitParams,
)
from crawlq.stores.conflict import Request, merge
from crawlq.stores.states import FINISHED, INTERNAL_STATES, PUBLIC_STATE
from crawlq.stores.workers import heartbeat_params, register_params, worker_info
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
    """

    path: str
    busy_timeout: float = 60.0
    synchronous: str = "normal"
    poll_interval: float = 0.002

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
        raise StoreError(f"SQLite failed during {operation}: {exc}") from exc
    except sqlite3.Error as exc:
        raise StoreError(f"SQLite failed during {operation}: {exc}") from exc


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


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
    )


class SQLiteStore:
    """The embedded store. Thread-safe: calls from many threads are serialised."""

    capabilities = Capabilities(notify=True, multi_host=False)

    def __init__(self, settings: SQLiteSettings) -> None:
        self.settings = settings
        self._lock = threading.RLock()
        self._wait_lock = threading.Lock()
        with _translate("opening the database"):
            self._conn = self._connect()
            self._wait_conn = self._connect()
        try:
            self.migrate()
        except BaseException:
            self.close()  # a refused or failed migration must not keep the file open
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
        return self._write(
            "scheduling jobs", lambda conn: [self._schedule_one(conn, s, t) for s in specs]
        )

    def _schedule_one(self, conn: sqlite3.Connection, spec: JobSpec, now: float) -> ScheduleResult:
        incoming = Request.from_spec(spec, now)
        inserted = self._insert(conn, spec.queue, spec.key, incoming, now)
        if inserted is not None:
            return ScheduleResult(inserted, Outcome.CREATED)
        live = conn.execute(Q["job_get_live_by_key"], {"queue": spec.queue, "key": spec.key})
        row = live.fetchone()
        if row["state"] == "running":
            return self._defer(conn, row, incoming, spec)
        existing = Request(
            task=row["task"],
            args=json.loads(row["args"]),
            kwargs=json.loads(row["kwargs"]),
            priority=row["priority"],
            run_at=row["run_at"],
            max_attempts=row["max_attempts"],
            lease_seconds=row["lease_seconds"],
            timeout=row["timeout"],
        )
        merged = merge(existing, incoming, spec.on_conflict)
        if merged is None:
            return ScheduleResult(row["id"], Outcome.UNCHANGED)
        conn.execute(
            Q["job_update_pending"], {**self._request_params(merged, now), "id": row["id"]}
        )
        return ScheduleResult(row["id"], Outcome.UPDATED)

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
        self, conn: sqlite3.Connection, queue: str, key: str | None, request: Request, now: float
    ) -> JobId | None:
        params = {**self._request_params(request, now), "queue": queue, "key": key}
        rows = conn.execute(Q["job_insert"], params).fetchall()
        return int(rows[0][0]) if rows else None

    def _spawn_followups(
        self, conn: sqlite3.Connection, rows: list[sqlite3.Row], now: float
    ) -> None:
        """Turn the remembered request of each ended job into a pending job."""
        for row in rows:
            if row["followup"] is not None:
                request = Request.from_json(row["followup"])
                self._insert(conn, row["queue"], row["key"], request, now)

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
        candidates: list[tuple[int, float, int]] = []
        for queue in dict.fromkeys(params.queues):
            conn.execute(Q["job_promote_due"], {"queue": queue, "now": now})
            found = conn.execute(
                Q["job_claim_candidates"], {"queue": queue, "now": now, "limit": params.limit}
            )
            candidates.extend((-r["priority"], r["run_at"], r["id"]) for r in found)
        if not candidates:
            return []
        picked = sorted(candidates)[: params.limit]
        rows = conn.execute(
            Q["job_claim_ids"],
            {"ids": _dumps([c[2] for c in picked]), "worker_id": params.worker_id, "now": now},
        ).fetchall()
        jobs = [_job_from_row(r) for r in rows]
        jobs.sort(key=lambda j: (-j.priority, j.run_at, j.id))
        return jobs

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
        return self._per_item("releasing jobs", "job_release", items)

    def _ending(
        self,
        operation: str,
        query: str,
        items: Sequence[dict[str, Any]],
        now: float,
        children: Sequence[Sequence[JobSpec]] = (),
    ) -> list[bool]:
        """Apply a state change that may end jobs, then spawn their remembered requests
        and (for completions) their children."""

        def work(conn: sqlite3.Connection) -> list[bool]:
            applied: list[bool] = []
            for i, item in enumerate(items):
                rows = conn.execute(Q[query], item).fetchall()
                applied.append(bool(rows))
                ended = [r for r in rows if query == "job_complete" or r["state"] == "dead"]
                self._spawn_followups(conn, ended, now)
                if rows and children:
                    for spec in children[i]:
                        self._schedule_one(conn, spec, now)
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
        worker declared dead): the ones that died spawn their remembered requests. The
        counters follow by trigger. Returns their ids, sorted."""
        self._spawn_followups(conn, [r for r in rows if r["state"] == "dead"], now)
        return sorted(int(r["id"]) for r in rows)

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        t = self._now(now)

        def work(conn: sqlite3.Connection) -> list[JobId]:
            cursor = conn.execute(Q["job_cancel"], {"ids": _dumps(list(ids)), "now": t})
            return sorted(int(r[0]) for r in cursor.fetchall())

        return self._write("cancelling jobs", work) if ids else []

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
            "state": None if where.state is None else _dumps(INTERNAL_STATES[where.state]),
            "finished_before": where.finished_before,
            "limit": -1 if where.limit is None else where.limit,
        }

    def job_list(self, where: JobFilter) -> list[Job]:
        params = self._filter_params(where)
        rows = self._read("listing jobs", lambda c: c.execute(Q["job_list"], params).fetchall())
        return [_job_from_row(r) for r in rows]

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        t = self._now(now)
        params = self._filter_params(where)
        if where.state not in (None, JobState.DEAD):
            return []
        params["state"] = _dumps(["dead"])

        def work(conn: sqlite3.Connection) -> list[JobId]:
            ids = [r["id"] for r in conn.execute(Q["job_list"], params).fetchall()]
            requeued = [
                int(i)
                for i in ids
                if conn.execute(Q["job_requeue"], {"id": i, "now": t}).fetchall()
            ]
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
        before = self._now(now) - retention

        def work(conn: sqlite3.Connection) -> int:
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

    def worker_stop(self, worker_id: str, *, now: Timestamp | None = None) -> None:
        params = {"id": worker_id, "now": self._now(now)}
        self._write("stopping a worker", lambda c: c.execute(Q["worker_stop"], params))

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        rows = self._read("listing workers", lambda c: c.execute(Q["worker_list"]).fetchall())
        return [worker_info(dict(r), json.loads(r["queues"])) for r in rows]

    def worker_reap(self, *, dead_after: float, now: Timestamp | None = None) -> list[str]:
        t = self._now(now)
        probe = {"now": t, "dead_after": dead_after}
        if not self._read(
            "probing for dead workers",
            lambda c: bool(c.execute(Q["worker_any_overdue"], probe).fetchone()[0]),
        ):
            return []  # the common case takes no write lock

        def work(conn: sqlite3.Connection) -> list[str]:
            dead = sorted(
                r["id"]
                for r in conn.execute(Q["worker_reap"], {"now": t, "dead_after": dead_after})
            )
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
        if self._read(
            "probing a maintenance lease",
            lambda c: bool(c.execute(Q["maintenance_held_elsewhere"], params).fetchone()[0]),
        ):
            return False  # the workers that do not hold the duty take no write lock
        return self._write(
            "acquiring a maintenance lease",
            lambda c: c.execute(Q["maintenance_acquire"], params).fetchone() is not None,
        )
