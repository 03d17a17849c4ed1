"""The Redis store: many workers on many machines share one redis-server.

Every change that touches more than one key is one Lua script (``scripts/*.lua``), so no
two clients ever interleave: claims, leases, uniqueness, counts and the dead-letter queue
are atomic, and so are a crawl's counters and finish and a limit key's front (the shared
Lua of crawls and limits is in ``scripts/prelude.lua``). The store's clock is the
server's ``TIME``. The key layout is in ``keys.py``.

A script runs at most once per call: the client does not retry on its own (a retried
script whose first reply was lost would run twice). A lost connection raises
``StoreUnavailable``; the next call reconnects, and a script the restarted server does not
know is loaded again (``NOSCRIPT`` -> ``SCRIPT LOAD`` -> ``EVALSHA``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import operator
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, cast

from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState, check_seen_has_crawl, no_such_crawl
from crawlq.exceptions import (
    ConfigurationError,
    CrawlClosed,
    StoreError,
    StoreUnavailable,
)
from crawlq.fingerprint import check_fingerprint
from crawlq.jobs import (
    FINISHED_STATES,
    ConflictPolicy,
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
from crawlq.stores.redis import keys
from crawlq.stores.redis.crawl_delete import SCRIPTS as CRAWL_DELETE_SCRIPTS
from crawlq.stores.redis.crawl_delete import CrawlDeleteMixin
from crawlq.stores.workers import listed, worker_info
from crawlq.types import JobId, Timestamp

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.client import PubSub
    from redis.commands.core import Script
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ConfigurationError(
        "the Redis store needs the redis package: pip install 'crawlq[redis]'"
    ) from exc

logger = logging.getLogger("crawlq.stores.redis")

SCRIPTS = (
    "job_schedule",
    "job_claim",
    "job_heartbeat",
    "job_complete",
    "job_fail",
    "job_release",
    "job_expire_leases",
    "job_cancel",
    "job_reschedule",
    "job_list",
    "job_requeue",
    "job_purge",
    "job_prune",
    "job_next_due",
    "job_next_gated",
    "queue_stats",
    "queue_totals",
    "worker_register",
    "worker_heartbeat",
    "worker_stop",
    "worker_reap",
    "worker_prune",
    "maintenance_acquire",
    "crawl_create",
    "crawl_pause",
    "crawl_resume",
    "crawl_cancel",
    "seen_add",
    "seen_has",
    "result_add",
    "result_read",
    "cache_get",
    "cache_set",
    "limit_set",
    "limit_block",
    "limit_read",
    "store_summary",
    *CRAWL_DELETE_SCRIPTS,
)
SCAN_BUDGET = 1000
"""Job ids one listing, requeue or purge script looks at per call (bounds its run time)."""
PRUNE_BUDGET = 1000
"""Jobs one prune script deletes per call."""
MAX_INTEGER = 2**53
"""Priorities and max_attempts are Lua numbers (doubles) in the scripts: exact to 2**53."""
SUBSCRIBE_TIMEOUT = 5.0
WARN_EVERY = 24 * 3600
"""Seconds between two logs of one warning about the server, per store (``_warn``)."""


def _script_source(name: str) -> str:
    """A script as loaded: prefix, key builders, the shared prelude, then the script."""
    folder = resources.files("crawlq.stores.redis").joinpath("scripts")
    return "".join(
        [
            "local PREFIX = ARGV[1]\n",
            keys.lua_key_builders(),
            folder.joinpath("prelude.lua").read_text(encoding="utf-8"),
            folder.joinpath(f"{name}.lua").read_text(encoding="utf-8"),
        ]
    )


SOURCES = {name: _script_source(name) for name in SCRIPTS}


@dataclass(frozen=True, kw_only=True, slots=True)
class RedisSettings:
    """How the Redis store connects.

    - ``url``: ``redis://[user:password@]host:port/db`` (or ``rediss://`` for TLS).
    - ``prefix``: the first part of every key, so several apps share a server
      (default ``crawlq``).
    - ``require_persistence``: refuse a server that persists nothing (default False:
      log a warning).
    - ``socket_timeout``: seconds a command may take before ``StoreUnavailable`` (10).
    - ``socket_connect_timeout``: seconds to connect (5).
    - ``warn``: log the warnings about a server that may lose jobs (default True), each at
      most once a day per store: the first opener on any machine to set the store's
      ``{p}:warned:{warning}`` key (``SET NX`` with a one-day expiry) logs it. False (a
      caller that only looks) logs none; ``require_persistence`` still refuses.
    """

    url: str
    prefix: str = keys.DEFAULT_PREFIX
    require_persistence: bool = False
    socket_timeout: float = 10.0
    socket_connect_timeout: float = 5.0
    warn: bool = True

    def __post_init__(self) -> None:
        if not self.prefix or any(c.isspace() for c in self.prefix):
            raise ConfigurationError(
                f"Redis key prefix {self.prefix!r} must be a non-empty word, e.g. ?prefix=crawlq"
            )
        if self.socket_timeout <= 0 or self.socket_connect_timeout <= 0:
            raise ConfigurationError("socket_timeout and socket_connect_timeout must be positive")


_TRANSIENT = (
    redis.exceptions.OutOfMemoryError,  # maxmemory reached: frees up as jobs are pruned
    redis.exceptions.ReadOnlyError,  # a replica during a failover
    redis.exceptions.TryAgainError,
)
"""Redis errors other than connection trouble that a later call may not meet."""


@contextmanager
def _translate(operation: str) -> Iterator[None]:
    """Turn driver errors into crawlq errors, keeping the cause."""
    try:
        yield
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise StoreUnavailable(f"Redis could not be reached during {operation}: {exc}") from exc
    except _TRANSIENT as exc:  # the same call may work later: retried, not given up
        raise StoreUnavailable(f"Redis is unavailable during {operation}: {exc}") from exc
    except redis.RedisError as exc:
        raise StoreError(f"Redis failed during {operation}: {exc}") from exc


# -- encoding arguments --------------------------------------------------------------


_ENCODER = json.JSONEncoder(separators=(",", ":"))
_SORTED_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def _dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _finite(value: float, what: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise StoreError(f"{what} must be a finite number, not {value!r}")
    return number


def _opt_finite(value: float | None, what: str) -> float | None:
    return None if value is None else _finite(value, what)


def _number(value: float, what: str) -> str:
    return repr(_finite(value, what))


def _opt(value: str | None) -> str:
    """'' for None, '=' + value otherwise (the scripts' optional-string convention)."""
    return "" if value is None else "=" + value


def _opt_number(value: float | None, what: str) -> str:
    return "" if value is None else "=" + _number(value, what)


def _now_arg(now: Timestamp | None) -> str:
    return "" if now is None else _number(now, "now")


def _integer(value: int, what: str) -> int:
    number = operator.index(value)
    if abs(number) > MAX_INTEGER:
        raise StoreError(f"{what} {number} is out of range for the Redis store (±2**53)")
    return number


def _plain(value: Any) -> Any:
    """``value`` as ``==`` sees it: bools and integral floats as ints (``1 == 1.0 ==
    True``). With sorted keys, two plain values have the same JSON text iff they are equal."""
    if value is True or value is False:
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _has_tuple(values: Iterable[Any]) -> bool:
    for value in values:
        if isinstance(value, tuple):
            return True
        if isinstance(value, list) and _has_tuple(value):
            return True
        if isinstance(value, dict) and _has_tuple(value.values()):
            return True
    return False


TUPLE_CMP = "tuple"
"""The ``cmp`` of arguments holding a tuple: Python finds them unequal to any stored
(JSON) arguments, where every tuple has become a list; no ``sig`` is ever this text."""


def _signatures(spec: JobSpec) -> tuple[str | None, str | None]:
    """What stands for (args, kwargs) when the on_conflict rules compare requests.

    ``sig`` is stored with a keyed job: a digest of its arguments as a later request reads
    them back (JSON). ``cmp`` is given only when the spec's own arguments compare
    differently (crawlq.stores.conflict.merge compares the spec's values with the stored
    ones): with a tuple inside, they equal no stored arguments.
    """
    if spec.key is None:
        return None, None
    args, kwargs = list(spec.args), dict(spec.kwargs)
    text = _SORTED_ENCODER.encode(_plain([args, kwargs]))
    sig = hashlib.blake2b(text.encode(), digest_size=12).hexdigest()
    cmp = TUPLE_CMP if _has_tuple(args) or _has_tuple(kwargs.values()) else None
    return sig, cmp


def _spec_row(spec: JobSpec) -> list[Any]:
    """One spec as the scripts read it (spec_from in prelude.lua)."""
    sig, cmp = _signatures(spec)
    fingerprint = None
    if spec.fingerprint is not None:
        check_seen_has_crawl([spec])
        fingerprint = check_fingerprint(spec.fingerprint).hex()
    return [
        spec.queue,
        spec.task,
        _dumps(list(spec.args)),
        _dumps(dict(spec.kwargs)),
        spec.key,
        sig,
        _integer(spec.priority, "priority"),
        _opt_finite(spec.run_at, "run_at"),
        _finite(spec.delay, "delay"),
        _integer(spec.max_attempts, "max_attempts"),
        _finite(spec.lease_seconds, "lease_seconds"),
        _opt_finite(spec.timeout, "timeout"),
        ConflictPolicy(spec.on_conflict).value,
        cmp,
        None if spec.crawl is None else _integer(spec.crawl, "crawl"),
        spec.limit_key,
        fingerprint,
    ]


def _limits_json(limits: Limits | None) -> str:
    if limits is None:
        return ""
    cap = None if limits.max_running is None else _integer(limits.max_running, "max_running")
    interval = _finite(limits.min_interval, "min_interval")
    return _dumps({"max_running": cap, "min_interval": interval})


def _limits(text: str | None) -> Limits | None:
    if not text:
        return None
    data = json.loads(text)
    return Limits(max_running=data["max_running"], min_interval=float(data["min_interval"]))


def _refused(reply: Any) -> None:
    """Raise for a script's refusal ``[kind, crawl, state]`` (closed_crawl, prelude)."""
    if reply and isinstance(reply[0], str):
        kind, crawl, state = reply
        if kind == "crawl_not_found":
            raise no_such_crawl(crawl)
        raise CrawlClosed(f"crawl {crawl} is {state}: it takes no more jobs")


# -- decoding replies ------------------------------------------------------------------


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)


def _jobs(text: str) -> list[Job]:
    """Jobs from the scripts' JSON list of ``[id, [field, value, ...]]``."""
    return [
        _job_from_hash(int(job_id), dict(zip(flat[::2], flat[1::2], strict=True)))
        for job_id, flat in json.loads(text)
    ]


def _job_from_hash(job_id: JobId, h: dict[str, str]) -> Job:
    result = h.get("result")
    return Job(
        id=job_id,
        queue=h["queue"],
        task=h["task"],
        args=json.loads(h["args"]),
        kwargs=json.loads(h["kwargs"]),
        key=h.get("key"),
        priority=int(h["priority"]),
        run_at=float(h["run_at"]),
        state=JobState(h["state"]),
        attempts=int(h["attempts"]),
        max_attempts=int(h["max_attempts"]),
        lease_seconds=float(h["lease_seconds"]),
        timeout=_float(h.get("timeout")),
        worker_id=h.get("worker_id"),
        lease_token=h.get("lease_token"),
        lease_expires_at=_float(h.get("lease_expires_at")),
        last_error=h.get("last_error"),
        dead_reason=h.get("dead_reason"),
        result=None if result is None else json.loads(result),
        created_at=float(h["created_at"]),
        started_at=_float(h.get("started_at")),
        finished_at=_float(h.get("finished_at")),
        crawl_id=None if "crawl_id" not in h else int(h["crawl_id"]),
        limit_key=h.get("limit_key"),
    )


def _crawl_from_hash(crawl_id: int, h: dict[str, str]) -> CrawlInfo:
    on_finish_job = h.get("on_finish_job")
    return CrawlInfo(
        id=crawl_id,
        name=h["name"],
        meta=json.loads(h["meta"]),
        state=CrawlState(h["state"]),
        pending=int(h["pending"]),
        running=int(h["running"]),
        done=int(h["done"]),
        dead=int(h["dead"]),
        cancelled=int(h["cancelled"]),
        seen=int(h["seen"]),
        created_at=float(h["created_at"]),
        finished_at=_float(h.get("finished_at")),
        on_finish_job=None if on_finish_job is None else int(on_finish_job),
        limits=_limits(h.get("limits")),
    )


def _key_limit(row: Sequence[str]) -> KeyLimit:
    key, cap, interval, source, blocked, running, last_start, pending, next_start = row
    return KeyLimit(
        key=key,
        limits=Limits(max_running=int(cap) if cap else None, min_interval=float(interval)),
        override=source == "override",
        blocked_until=float(blocked) if blocked else None,
        running=int(running),
        last_start=float(last_start) if last_start else None,
        pending=int(pending),
        next_start=float(next_start) if next_start else None,
    )


class RedisStore(CrawlDeleteMixin):
    """The Redis store. Thread-safe: each call borrows a pooled connection."""

    capabilities = Capabilities(notify=True, multi_host=True)

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings
        self._prefix = settings.prefix
        self._local = threading.local()
        self._pubsubs: list[PubSub] = []
        self._pubsubs_lock = threading.Lock()
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                settings.url,
                decode_responses=True,
                retry=Retry(NoBackoff(), 0),
                socket_timeout=settings.socket_timeout,
                socket_connect_timeout=settings.socket_connect_timeout,
            )
        except ValueError as exc:
            raise ConfigurationError(f"bad Redis URL {settings.url!r}: {exc}") from exc
        self._scripts: dict[str, Script] = {
            name: self._client.register_script(source) for name, source in SOURCES.items()
        }
        try:
            with _translate("checking the server's settings"):
                self._check_server()
        except BaseException:
            self._client.close()
            raise

    # -- connection and server settings ----------------------------------------------

    def _check_server(self) -> None:
        """Refuse a server that may evict keys; warn about one that persists nothing."""
        try:
            config: dict[str, str] = {}
            for name in ("maxmemory-policy", "appendonly", "save"):
                config.update(cast("dict[str, str]", self._client.config_get(name)))
        except redis.ResponseError as exc:
            self._warn(
                "unchecked",
                f"could not check the Redis server's settings (CONFIG GET failed: {exc}): make "
                "sure it has maxmemory-policy noeviction and appendonly yes, or jobs can be lost",
            )
            return
        policy = config.get("maxmemory-policy", "noeviction")
        if policy != "noeviction":
            raise ConfigurationError(
                f"the Redis server at {self._where()} has maxmemory-policy {policy}: it may "
                "evict crawlq's keys and lose jobs. Run `CONFIG SET maxmemory-policy "
                "noeviction` (and set `maxmemory-policy noeviction` in redis.conf so it "
                "survives a restart)"
            )
        self._check_persistence(config.get("appendonly", "no"), config.get("save", ""))

    def _check_persistence(self, appendonly: str, save: str) -> None:
        if appendonly == "yes":
            return
        if save.strip():
            self._warn(
                "snapshots",
                f"the Redis server at {self._where()} saves snapshots only (appendonly no): a "
                "crash loses the jobs acknowledged since the last snapshot. Run `CONFIG SET "
                "appendonly yes` and set `appendonly yes` in redis.conf",
            )
            return
        message = (
            f'the Redis server at {self._where()} persists nothing (appendonly no, save ""): '
            "a restart loses every job. Run `CONFIG SET appendonly yes` and set "
            "`appendonly yes` in redis.conf"
        )
        if self.settings.require_persistence:
            raise ConfigurationError(message + " (refused because of ?require_persistence=1)")
        self._warn("nothing", message)

    def _warn(self, warning: str, message: str) -> None:
        """Log ``message`` if this store has not logged ``warning`` in the last day."""
        if not self.settings.warn:
            return
        name = keys.key("warned", self._prefix, warning=warning)
        try:
            first = self._client.set(name, "1", nx=True, ex=WARN_EVERY)
        except redis.ResponseError:  # a read-only replica, or out of memory: warn anyway
            first = True
        if first:
            logger.warning("%s (this warning shows once a day per store)", message)

    def _where(self) -> str:
        kwargs = self._client.connection_pool.connection_kwargs
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"

    def _run(self, operation: str, script: str, args: Sequence[str]) -> Any:
        with _translate(operation):
            return self._scripts[script](keys=[], args=[self._prefix, *args])

    def close(self) -> None:
        with self._pubsubs_lock:
            pubsubs, self._pubsubs = self._pubsubs, []
        for pubsub in pubsubs:
            with suppress(redis.RedisError, OSError):
                pubsub.close()
        self._client.close()

    def now(self) -> Timestamp:
        with _translate("reading the server's clock"):
            seconds, micros = self._client.time()
        return float(seconds) + float(micros) / 1_000_000

    # -- scheduling and leases -------------------------------------------------------

    def job_schedule(
        self, specs: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> list[ScheduleResult]:
        if not specs:
            return []
        args = [_now_arg(now), _dumps([_spec_row(spec) for spec in specs])]
        rows = self._run("scheduling jobs", "job_schedule", args)
        _refused(rows)
        return [ScheduleResult(int(job_id), Outcome(outcome)) for job_id, outcome in rows]

    def job_claim(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0 or not params.queues:
            return []
        args = [_now_arg(params.now), params.worker_id, str(params.limit), *params.queues]
        return _jobs(self._run("claiming jobs", "job_claim", args))

    def _per_item(
        self, operation: str, script: str, now: Timestamp | None, items: list[str]
    ) -> list[bool]:
        if not items:
            return []
        return [bool(ok) for ok in self._run(operation, script, [_now_arg(now), *items])]

    def job_heartbeat(self, leases: Sequence[Lease], *, now: Timestamp | None = None) -> list[bool]:
        items = [part for lease in leases for part in (str(lease.job_id), lease.token)]
        return self._per_item("heartbeating leases", "job_heartbeat", now, items)

    def job_complete(
        self, completions: Sequence[Completion], *, now: Timestamp | None = None
    ) -> list[bool]:
        if not completions:
            return []
        rows = [
            [
                str(c.lease.job_id),
                c.lease.token,
                _dumps(c.result),
                [_spec_row(child) for child in c.children],
            ]
            for c in completions
        ]
        return self._per_item("completing jobs", "job_complete", now, [_dumps(rows)])

    def job_fail(self, failures: Sequence[Failure], *, now: Timestamp | None = None) -> list[bool]:
        items = [
            part
            for f in failures
            for part in (
                str(f.lease.job_id),
                f.lease.token,
                f.error,
                _opt_number(f.retry_delay, "retry_delay"),
                f.reason,
            )
        ]
        return self._per_item("recording failed attempts", "job_fail", now, items)

    def job_release(
        self, releases: Sequence[Release], *, now: Timestamp | None = None
    ) -> list[bool]:
        items = [
            part
            for r in releases
            for part in (str(r.lease.job_id), r.lease.token, _number(r.delay, "delay"))
        ]
        return self._per_item("releasing jobs", "job_release", now, items)

    def job_expire_leases(self, *, now: Timestamp | None = None) -> list[JobId]:
        expired = self._run("returning expired leases", "job_expire_leases", [_now_arg(now)])
        return [int(job_id) for job_id in expired]

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        if not ids:
            return []
        args = [_now_arg(now), *(str(operator.index(i)) for i in ids)]
        return [int(job_id) for job_id in self._run("cancelling jobs", "job_cancel", args)]

    def job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None = None, *, now: Timestamp | None = None
    ) -> list[JobId]:
        if not ids:
            return []
        when = "" if run_at is None else _number(run_at, "run_at")
        args = [_now_arg(now), when, *(str(operator.index(i)) for i in ids)]
        return [int(job_id) for job_id in self._run("rescheduling jobs", "job_reschedule", args)]

    # -- reading, requeueing, purging ------------------------------------------------

    def job_get(self, job_id: JobId) -> Job | None:
        with _translate("reading a job"):
            raw = self._client.hgetall(keys.key("job", self._prefix, id=job_id))
        h = cast("dict[str, str]", raw)  # decode_responses=True: text only
        return _job_from_hash(job_id, h) if h else None

    def _scan(
        self,
        operation: str,
        script: str,
        where: JobFilter,
        states: Sequence[str] | None,
        now: Timestamp | None = None,
    ) -> Iterator[Any]:
        """Run a filter script page by page; yields each page's payload."""
        ids = ""
        if where.ids is not None:
            chosen = sorted({operator.index(i) for i in where.ids if i > where.after_id})
            if not chosen:
                return
            ids = "=" + ",".join(map(str, chosen))
        remaining = -1 if where.limit is None or where.limit < 0 else where.limit
        cursor = where.after_id
        while remaining != 0:
            args = [
                _now_arg(now),
                str(cursor),
                ids,
                _opt(where.queue),
                _opt(where.task),
                "" if states is None else "=" + ",".join(states),
                _opt_number(where.finished_before, "finished_before"),
                str(remaining),
                str(SCAN_BUDGET),
                _opt(where.key),
                "" if where.crawl is None else "=" + str(where.crawl),
                _opt(where.limit_key),
            ]
            cursor, done, matched, payload = self._run(operation, script, args)
            yield payload
            if done:
                return
            if remaining > 0:
                remaining = max(0, remaining - int(matched))

    def job_list(self, where: JobFilter) -> list[Job]:
        states = None if where.state is None else [where.state.value]
        pages = self._scan("listing jobs", "job_list", where, states)
        return [job for page in pages for job in _jobs(page)]

    def job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        """The last ``limit`` of each queue's finished zsets (score = finished_at), merged."""
        limit = check_count("limit", limit, 0)
        if not limit or not queues:
            return []
        with _translate("listing finished jobs"):
            pipe = self._client.pipeline(transaction=False)
            for queue in queues:
                for state in ("cancelled", "dead", "done"):
                    name = keys.key("finished", self._prefix, queue=queue, state=state)
                    pipe.zrevrange(name, 0, limit - 1, withscores=True)
            ranked = sorted(
                ((float(score), int(job_id)) for page in pipe.execute() for job_id, score in page),
                reverse=True,
            )[:limit]
            pipe = self._client.pipeline(transaction=False)
            for _, job_id in ranked:
                pipe.hgetall(keys.key("job", self._prefix, id=job_id))
            hashes = cast("list[dict[str, str]]", pipe.execute())
        return [
            _job_from_hash(job_id, h) for (_, job_id), h in zip(ranked, hashes, strict=True) if h
        ]

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        if where.state not in (None, JobState.DEAD):
            return []
        pages = self._scan("requeueing dead jobs", "job_requeue", where, ["dead"], now)
        return [int(job_id) for page in pages for job_id in page]

    def job_purge(self, where: JobFilter) -> int:
        if where.state is None:
            states = sorted(s.value for s in FINISHED_STATES)
        elif where.state in FINISHED_STATES:
            states = [where.state.value]
        else:
            return 0
        return sum(int(n) for n in self._scan("purging jobs", "job_purge", where, states))

    def job_prune(self, *, retention: float, now: Timestamp | None = None) -> int:
        """Also deletes the records of idle limit keys (keys.py, job_prune.lua)."""
        args = [_now_arg(now), _number(retention, "retention"), str(PRUNE_BUDGET)]
        total, cursor = 0, ""
        while True:
            deleted, more, cursor = self._run("pruning finished jobs", "job_prune", [*args, cursor])
            total += int(deleted)
            if not more:
                return total

    # -- waiting ---------------------------------------------------------------------

    def _next_due_and_now(self, queues: Sequence[str]) -> tuple[float | None, float]:
        first, now = self._run("finding the next due job", "job_next_due", ["", *queues])
        return (float(first) if first else None), float(now)

    def job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        return self._next_due_and_now(queues)[0] if queues else None

    def job_next_gated(
        self, queues: Sequence[str], *, within: float, now: Timestamp | None = None
    ) -> Timestamp | None:
        if not queues:
            return None
        args = [_now_arg(now), _number(within, "within"), *queues]
        first = self._run("finding the next job a limit key keeps back", "job_next_gated", args)
        return float(first) if first else None

    def job_wait(self, params: WaitParams) -> None:
        """Subscribe to the queues' wake-up channels, then return at once if a job is
        due; else wait until the next run_at (the earliest pending one, or one a wake-up
        announces) or the timeout, whichever is first.

        The subscription lasts only as long as the wait, so the server never buffers
        wake-ups for a worker that is busy running jobs."""
        deadline = time.monotonic() + params.timeout
        if not params.queues:
            time.sleep(max(0.0, params.timeout))
            return
        channels = {keys.wake_channel(self._prefix, q) for q in params.queues}
        pubsub = self._pubsub()
        try:
            with _translate("waiting for jobs"):
                self._subscribe(pubsub, channels)
                try:
                    next_due, now = self._next_due_and_now(params.queues)
                    offset = now - time.monotonic()  # server clock - this host's monotonic
                    if next_due is not None:
                        deadline = min(deadline, next_due - offset)
                    self._listen(pubsub, channels, deadline, offset)
                finally:
                    pubsub.unsubscribe()  # type: ignore[no-untyped-call]
        except StoreError:
            self._drop_pubsub(pubsub)
            raise

    def _pubsub(self) -> PubSub:
        """This thread's pub/sub connection: made on its first wait, and made again when
        the last one was closed meanwhile (e.g. by a server restart)."""
        pubsub: PubSub | None = getattr(self._local, "pubsub", None)
        if pubsub is not None and not self._healthy(pubsub):
            self._drop_pubsub(pubsub)
            pubsub = None
        if pubsub is None:
            pubsub = self._client.pubsub()  # type: ignore[no-untyped-call]
            self._local.pubsub = pubsub
            with self._pubsubs_lock:
                self._pubsubs.append(pubsub)
        return pubsub

    @staticmethod
    def _healthy(pubsub: PubSub) -> bool:
        """Between two waits nothing but the last wait's leftovers may arrive: read them;
        anything readable after that is the server closing the connection."""
        try:
            while pubsub.get_message(timeout=0.0) is not None:
                pass
            connection = pubsub.connection
            return connection is None or not connection.can_read(timeout=0)
        except (redis.RedisError, OSError):
            return False

    def _drop_pubsub(self, pubsub: PubSub) -> None:
        """Forget a pub/sub connection that failed; the next wait makes a new one."""
        self._local.pubsub = None
        with self._pubsubs_lock:
            if pubsub in self._pubsubs:
                self._pubsubs.remove(pubsub)
        with suppress(redis.RedisError, OSError):
            pubsub.close()

    @staticmethod
    def _subscribe(pubsub: PubSub, channels: set[str]) -> None:
        """Subscribe and read up to the server's confirmations, so that the due check
        that follows misses no wake-up. What came before them (wake-ups from before this
        wait, the last wait's unsubscribe) is skipped: the due check covers it."""
        pubsub.subscribe(*sorted(channels))
        unconfirmed = set(channels)
        deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
        while unconfirmed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StoreUnavailable(
                    f"Redis did not confirm a SUBSCRIBE within {SUBSCRIBE_TIMEOUT} s"
                )
            message = pubsub.get_message(timeout=remaining)
            if message is not None and message["type"] == "subscribe":
                unconfirmed.discard(message["channel"])

    @staticmethod
    def _listen(pubsub: PubSub, channels: set[str], deadline: float, offset: float) -> None:
        """Wait until ``deadline`` (monotonic), or until a wake-up's job is due; a wake-up
        for a later job moves the deadline earlier if it is due before it."""
        while (remaining := deadline - time.monotonic()) > 0:
            message = pubsub.get_message(timeout=remaining)
            if message is None or message["type"] != "message":
                continue
            if message["channel"] not in channels:
                continue
            try:
                due = float(message["data"]) - offset
            except ValueError:
                return  # not one of ours: returning early is always allowed
            deadline = min(deadline, due)

    # -- statistics ------------------------------------------------------------------

    def queue_stats(self, *, now: Timestamp | None = None) -> list[QueueStats]:
        server_now, rows = self._run("reading queue stats", "queue_stats", [_now_arg(now)])
        t = float(server_now)
        return sorted((self._queue_stats(row, t) for row in rows), key=lambda s: s.queue)

    def queue_totals(self) -> list[QueueTotals]:
        rows = self._run("reading queue totals", "queue_totals", [])
        return sorted(
            (
                QueueTotals(
                    queue=queue,
                    enqueued=int(enqueued),
                    completed=int(completed),
                    retried=int(retried),
                    dead_lettered=int(dead_lettered),
                )
                for queue, enqueued, completed, retried, dead_lettered in rows
            ),
            key=lambda t: t.queue,
        )

    @staticmethod
    def _queue_stats(row: Sequence[Any], now: float) -> QueueStats:
        queue, pending, running, done, dead, cancelled, due, oldest, recent, waiting, held = row
        return QueueStats(
            queue=queue,
            due=int(due),
            scheduled=int(pending) - int(due) - int(waiting) - int(held),
            waiting=int(waiting),
            held=int(held),
            running=int(running),
            done=int(done),
            dead=int(dead),
            cancelled=int(cancelled),
            oldest_due_age=now - float(oldest) if oldest else None,
            done_last_minute=int(recent),
        )

    # -- workers and maintenance -----------------------------------------------------

    def worker_register(self, info: WorkerInfo, *, now: Timestamp | None = None) -> None:
        args = [
            _now_arg(now),
            info.id,
            info.host,
            str(operator.index(info.pid)),
            _dumps(list(info.queues)),
            info.runtime,
            str(operator.index(info.concurrency)),
            str(operator.index(info.running)),
            str(operator.index(info.done)),
            str(operator.index(info.failed)),
            _opt(None if info.rss_bytes is None else str(operator.index(info.rss_bytes))),
            _opt(info.process),
        ]
        self._run("registering a worker", "worker_register", args)

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
        args = [
            _now_arg(now),
            worker_id,
            str(operator.index(running)),
            str(operator.index(done)),
            str(operator.index(failed)),
            _opt(None if rss_bytes is None else str(operator.index(rss_bytes))),
        ]
        return bool(self._run("heartbeating a worker", "worker_heartbeat", args))

    def worker_stop(
        self, worker_id: str, *, done: int, failed: int, now: Timestamp | None = None
    ) -> None:
        counters = [str(operator.index(done)), str(operator.index(failed))]
        self._run("stopping a worker", "worker_stop", [_now_arg(now), worker_id, *counters])

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        with _translate("listing workers"):
            worker_ids = cast(
                "list[str]", self._client.zrange(keys.key("workers", self._prefix), 0, -1)
            )
            pipe = self._client.pipeline(transaction=False)
            for worker_id in worker_ids:
                pipe.hgetall(keys.key("worker", self._prefix, worker=worker_id))
            hashes = cast("list[dict[str, str]]", pipe.execute())
        workers = (
            worker_info({**h, "id": worker_id}, json.loads(h["queues"]))
            for worker_id, h in zip(worker_ids, hashes, strict=True)
            if h  # pruned meanwhile
        )
        return listed(workers, self.now() if now is None else now)

    def worker_reap(
        self, *, dead_after: float, gone: Sequence[str] = (), now: Timestamp | None = None
    ) -> list[str]:
        args = [_now_arg(now), _number(dead_after, "dead_after"), *gone]
        return sorted(str(w) for w in self._run("reaping dead workers", "worker_reap", args))

    def worker_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        args = [_now_arg(now), _number(older_than, "older_than")]
        return int(self._run("pruning workers", "worker_prune", args))

    def maintenance_acquire(
        self, duty: str, owner: str, ttl: float, *, now: Timestamp | None = None
    ) -> bool:
        args = [_now_arg(now), duty, owner, _number(ttl, "ttl")]
        return bool(self._run("acquiring a maintenance lease", "maintenance_acquire", args))

    # -- crawls and seen sets ----------------------------------------------------------

    def crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> CrawlInfo:
        """The id is taken (INCR) before the script runs, so the on_finish spec and the
        start specs are encoded with it; a create that fails leaves a gap in the ids."""
        with _translate("creating a crawl"):
            crawl_id = int(self._client.incr(keys.key("crawl_ids", self._prefix)))
        on_finish = ""
        if spec.on_finish is not None:
            kwargs = {**spec.on_finish.kwargs, "crawl_id": crawl_id}
            on_finish = _dumps(_spec_row(replace(spec.on_finish, crawl=None, kwargs=kwargs)))
        args = [
            _now_arg(now),
            str(crawl_id),
            spec.name,
            _dumps(dict(spec.meta)),
            on_finish,
            _limits_json(spec.limits),
            _dumps([_spec_row(replace(s, crawl=crawl_id)) for s in start]),
        ]
        flat = self._run("creating a crawl", "crawl_create", args)
        return _crawl_from_hash(crawl_id, dict(zip(flat[::2], flat[1::2], strict=True)))

    def store_summary(self, *, now: Timestamp | None = None) -> StoreSummary:
        raw = self._run("summing up crawls and keys", "store_summary", [_now_arg(now)])
        counts = {str(k): int(v) for k, v in json.loads(raw).items()}
        return StoreSummary(
            crawls={s: counts.get(s.value, 0) for s in CrawlState},
            crawl_jobs={
                name: counts.get("job_" + name, 0) for name in ("done", "dead", "cancelled")
            },
            limit_keys=counts.get("keys", 0),
            blocked_keys=counts.get("blocked", 0),
        )

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        with _translate("reading a crawl"):
            raw = self._client.hgetall(keys.key("crawl", self._prefix, crawl=int(crawl_id)))
        h = cast("dict[str, str]", raw)
        return _crawl_from_hash(int(crawl_id), h) if h else None

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        found: list[CrawlInfo] = []
        cursor = int(after_id)
        page = 500
        while limit is None or len(found) < limit:
            with _translate("listing crawls"):
                ids = cast(
                    "list[str]",
                    self._client.zrangebyscore(
                        keys.key("crawls", self._prefix), f"({cursor}", "+inf", 0, page
                    ),
                )
                pipe = self._client.pipeline(transaction=False)
                for crawl_id in ids:
                    pipe.hgetall(keys.key("crawl", self._prefix, crawl=crawl_id))
                hashes = cast("list[dict[str, str]]", pipe.execute())
            for crawl_id, h in zip(ids, hashes, strict=True):
                info = _crawl_from_hash(int(crawl_id), h)
                if state is None or info.state == state:
                    found.append(info)
            if len(ids) < page:
                break
            cursor = int(ids[-1])
        return found if limit is None else found[: max(limit, 0)]

    def _crawl_change(
        self, operation: str, script: str, crawl_id: int, now: Timestamp | None
    ) -> bool:
        return bool(self._run(operation, script, [_now_arg(now), str(operator.index(crawl_id))]))

    def crawl_pause(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_change("pausing a crawl", "crawl_pause", crawl_id, now)

    def crawl_resume(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_change("resuming a crawl", "crawl_resume", crawl_id, now)

    def crawl_cancel(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        return self._crawl_change("cancelling a crawl", "crawl_cancel", crawl_id, now)

    def seen_add(
        self, crawl_id: int, fingerprints: Sequence[bytes], *, now: Timestamp | None = None
    ) -> list[bool]:
        fps = [check_fingerprint(fp) for fp in fingerprints]
        args: list[Any] = [_now_arg(now), str(operator.index(crawl_id)), *fps]
        answers = self._run("adding to a seen set", "seen_add", args)
        if answers == [-1]:
            raise no_such_crawl(crawl_id)
        return [bool(a) for a in answers]

    def seen_has(self, crawl_id: int, fingerprints: Sequence[bytes]) -> list[bool]:
        fps = [check_fingerprint(fp) for fp in fingerprints]
        args: list[Any] = ["", str(operator.index(crawl_id)), *fps]
        answers = self._run("reading a seen set", "seen_has", args)
        if answers == [-1]:
            raise no_such_crawl(crawl_id)
        return [bool(a) for a in answers]

    def result_add(
        self,
        crawl_id: int,
        items: Sequence[tuple[bytes, str]],
        *,
        now: Timestamp | None = None,
    ) -> list[bool]:
        """Numbered 1, 2, 3, ... by the script (HLEN of the crawl's keys + 1)."""
        pairs = [part for item in check_results(items) for part in item]
        args: list[Any] = [_now_arg(now), str(operator.index(crawl_id)), *pairs]
        answers = self._run("adding crawl results", "result_add", args)
        if answers == [-1]:
            raise no_such_crawl(crawl_id)
        return [bool(a) for a in answers]

    def _result_read(self, operation: str, crawl_id: int, *args: str) -> list[Any]:
        """The script's reply: [n, record...] (see result_read.lua)."""
        reply: list[Any] = self._run(
            operation, "result_read", ["", str(operator.index(crawl_id)), *args]
        )
        if reply == [-1]:
            raise no_such_crawl(crawl_id)
        return reply

    def result_list(
        self, crawl_id: int, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        after, limit = check_page(after, limit)
        reply = self._result_read("listing crawl results", crawl_id, "list", str(after), str(limit))
        return [(after + i, str(record)) for i, record in enumerate(reply[1:], start=1)]

    def result_count(self, crawl_id: int) -> int:
        return int(self._result_read("counting crawl results", crawl_id, "count")[0])

    # -- cache -------------------------------------------------------------------------

    def cache_get(self, key: str, *, now: Timestamp | None = None) -> str | None:
        args = [_now_arg(now), check_text(key, "a cache key")]
        value = self._run("reading the cache", "cache_get", args)
        return None if value is None else str(value)

    def _cache_write(
        self, operation: str, mode: str, key: str, value: str, ttl: float, now: Timestamp | None
    ) -> bool:
        args = [
            _now_arg(now),
            check_text(key, "a cache key"),
            check_text(value, "a cache value"),
            repr(check_ttl(ttl)),
            mode,
        ]
        return bool(self._run(operation, "cache_set", args))

    def cache_set(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> None:
        self._cache_write("writing the cache", "set", key, value, ttl, now)

    def cache_add(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> bool:
        return self._cache_write("adding to the cache", "add", key, value, ttl, now)

    def cache_delete(self, key: str) -> None:
        name = keys.key("cache", self._prefix, ckey=check_text(key, "a cache key"))
        with _translate("deleting from the cache"):
            self._client.delete(name)

    # -- limits --------------------------------------------------------------------------

    def limit_set(self, key: str, limits: Limits, *, now: Timestamp | None = None) -> None:
        cap = "" if limits.max_running is None else str(_integer(limits.max_running, "max_running"))
        args = [_now_arg(now), key, cap, _number(limits.min_interval, "min_interval")]
        self._run("setting a key's limits", "limit_set", args)

    def limit_set_default(
        self, queue: str, limits: Limits | None, *, now: Timestamp | None = None
    ) -> None:
        name = keys.key("limit_defaults", self._prefix)
        with _translate("setting a queue's default limits"):
            if limits is None:
                self._client.hdel(name, queue)
            else:
                self._client.hset(name, queue, _limits_json(limits))

    def limit_block(self, key: str, until: Timestamp, *, now: Timestamp | None = None) -> None:
        args = [_now_arg(now), key, _number(until, "until")]
        self._run("blocking a key", "limit_block", args)

    def limit_get(
        self, keys: Sequence[str], *, now: Timestamp | None = None
    ) -> list[KeyLimit | None]:
        if not keys:
            return []
        rows = self._run("reading key limits", "limit_read", ["", "get", *keys])
        return [_key_limit(row) if row else None for row in rows]

    def limit_list(self, *, limit: int = 100, after: str = "") -> list[KeyLimit]:
        if limit <= 0:
            return []
        rows = self._run("listing key limits", "limit_read", ["", "list", after, str(limit)])
        return [_key_limit(row) for row in rows]
