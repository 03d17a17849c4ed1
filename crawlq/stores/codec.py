"""The codec of the stores: jobs, requests, crawls and limit keys as every store writes
and reads them, in one place.

- SQL rows (SQLite and PostgreSQL, the same column names): ``job_from_row``,
  ``request_from_row``, ``request_params``, ``crawl_info``, ``key_limit``,
  ``summary_of``. JSON columns are text on SQLite and decoded by psycopg on PostgreSQL:
  the caller says which with ``loads``.
- Redis hashes and script replies (all text): ``job_from_hash``, ``crawl_from_hash``,
  ``key_limit_from_reply``, ``jobs_from_reply``; a spec as the scripts read it:
  ``spec_row`` (``spec_from`` in ``prelude.lua``).
- Shared by all: a crawl's limits (``limits_json``, ``limits_from``), its ``on_finish``
  spec on the SQL stores (``on_finish_json``, ``on_finish_spec``), the records a job's
  end keeps (``records_by_crawl``; as JSON for the Redis scripts and the process runtime:
  ``records_json``, ``records_from_json``). A remembered request is
  ``conflict.Request.to_json``; compact JSON is ``crawlq.payload.dumps``, the encoder
  that sizes arguments.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from crawlq.crawls import CrawlInfo, CrawlState
from crawlq.exceptions import StoreError
from crawlq.jobs import ConflictPolicy, Job, JobSpec, JobState
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import dumps
from crawlq.stores.base import CrawlRecord, StoreSummary
from crawlq.stores.conflict import Request
from crawlq.stores.states import PUBLIC_STATE
from crawlq.types import JobId, JSONValue

_SORTED_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True)


def loads(text: str | None) -> Any:
    """JSON text (None stays None): a JSON column as SQLite gives it."""
    return None if text is None else json.loads(text)


def as_read(value: Any) -> Any:
    """A JSON column as psycopg gives it: already decoded."""
    return value


Decode = Callable[[Any], Any]
"""How a store's driver gives a JSON column: ``loads`` (text) or ``as_read``."""


class Row(Protocol):
    """A row read by column name: ``sqlite3.Row``, psycopg's dict rows."""

    def __getitem__(self, column: str, /) -> Any: ...


def limits_json(limits: Limits | None) -> str | None:
    """Limits as stored in a crawl's record (JSON text), None for none."""
    if limits is None:
        return None
    return dumps({"max_running": limits.max_running, "min_interval": float(limits.min_interval)})


def limits_from(value: str | Mapping[str, Any] | None) -> Limits | None:
    """Limits from stored JSON (text, or already decoded by the driver); None or "" for
    none."""
    if not value:
        return None
    fields = json.loads(value) if isinstance(value, str) else value
    return Limits(max_running=fields["max_running"], min_interval=float(fields["min_interval"]))


def on_finish_json(spec: JobSpec, crawl_id: int) -> str:
    """A crawl's ``on_finish`` spec as stored: outside any crawl, ``crawl_id`` added to its
    keyword arguments; numbers as floats where the spec has floats."""

    def number(value: float | None) -> float | None:
        return None if value is None else float(value)

    fields = {
        "queue": spec.queue,
        "task": spec.task,
        "args": list(spec.args),
        "kwargs": {**spec.kwargs, "crawl_id": crawl_id},
        "key": spec.key,
        "priority": spec.priority,
        "delay": float(spec.delay),
        "run_at": number(spec.run_at),
        "max_attempts": spec.max_attempts,
        "lease_seconds": float(spec.lease_seconds),
        "timeout": number(spec.timeout),
        "on_conflict": spec.on_conflict.value,
        "limit_key": spec.limit_key,
    }
    return dumps(fields)


def on_finish_spec(text: str) -> JobSpec:
    """The spec ``on_finish_json`` stored."""
    fields = json.loads(text)
    fields["on_conflict"] = ConflictPolicy(fields["on_conflict"])
    return JobSpec(**fields)


# -- SQL rows ----------------------------------------------------------------------------


def job_from_row(row: Row, decode: Decode) -> Job:
    """A job from its row; ``decode`` reads its JSON columns (args, kwargs, result)."""
    return Job(
        id=row["id"],
        queue=row["queue"],
        task=row["task"],
        args=decode(row["args"]),
        kwargs=decode(row["kwargs"]),
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
        result=decode(row["result"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        crawl_id=row["crawl_id"],
        limit_key=row["limit_key"],
    )


def request_from_row(row: Row, decode: Decode, run_at: float | None = None) -> Request:
    """The request a pending job's row holds; ``run_at`` its own when the row's is a
    front's (PostgreSQL keeps it in ``own_run_at``)."""
    return Request(
        task=row["task"],
        args=decode(row["args"]),
        kwargs=decode(row["kwargs"]),
        priority=row["priority"],
        run_at=row["run_at"] if run_at is None else run_at,
        max_attempts=row["max_attempts"],
        lease_seconds=row["lease_seconds"],
        timeout=row["timeout"],
        crawl=row["crawl_id"],
        limit_key=row["limit_key"],
    )


def request_params(request: Request) -> dict[str, Any]:
    """The columns a request writes to a pending job (arguments as JSON text)."""
    return {
        "task": request.task,
        "args": dumps(request.args),
        "kwargs": dumps(request.kwargs),
        "priority": request.priority,
        "run_at": float(request.run_at),
        "max_attempts": request.max_attempts,
        "lease_seconds": float(request.lease_seconds),
        "timeout": None if request.timeout is None else float(request.timeout),
    }


def crawl_info(row: Row, meta: dict[str, JSONValue]) -> CrawlInfo:
    """A crawl from its row (``meta`` decoded by the caller, as drivers differ)."""
    return CrawlInfo(
        id=row["id"],
        name=row["name"],
        meta=meta,
        state=CrawlState(row["state"]),
        pending=row["pending"],
        running=row["running"],
        done=row["done"],
        dead=row["dead"],
        cancelled=row["cancelled"],
        seen=row["seen"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        on_finish_job=row["on_finish_job"],
        limits=limits_from(row["limits"]),
    )


def key_limit(row: Row, next_start: float | None) -> KeyLimit:
    """A limit key from its row; ``next_start`` is its front job's run_at, if any."""
    return KeyLimit(
        key=row["key"],
        limits=Limits(max_running=row["max_running"], min_interval=row["min_interval"]),
        override=row["source"] == "override",
        blocked_until=row["blocked_until"],
        running=row["running"],
        last_start=row["last_start"],
        pending=row["pending"],
        next_start=next_start,
    )


def summary_of(crawl_rows: Sequence[Row], key_row: Row | None) -> StoreSummary:
    """A StoreSummary from the rows of ``summary_crawls`` (state, n, done, dead,
    cancelled) and ``summary_keys`` (n, blocked)."""
    assert key_row is not None  # an aggregate always has a row
    crawls = dict.fromkeys(CrawlState, 0)
    ended = {"done": 0, "dead": 0, "cancelled": 0}
    for row in crawl_rows:
        crawls[CrawlState(row["state"])] = int(row["n"])
        for name in ended:
            ended[name] += int(row[name])
    return StoreSummary(
        crawls=crawls,
        crawl_jobs=ended,
        limit_keys=int(key_row["n"]),
        blocked_keys=int(key_row["blocked"]),
    )


# -- Redis hashes and replies ------------------------------------------------------------


def _float(text: str | None) -> float | None:
    return None if text is None else float(text)


def job_from_hash(job_id: JobId, h: Mapping[str, str]) -> Job:
    """A job from its Redis hash (a field that is None is absent)."""
    result = h.get("result")
    crawl_id = h.get("crawl_id")
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
        crawl_id=None if crawl_id is None else int(crawl_id),
        limit_key=h.get("limit_key"),
    )


def pairs(flat: Sequence[str]) -> dict[str, str]:
    """A hash from the flat [field, value, ...] list HGETALL gives a script."""
    return dict(zip(flat[::2], flat[1::2], strict=True))


def jobs_from_reply(text: str) -> list[Job]:
    """Jobs from the scripts' JSON list of ``[id, [field, value, ...]]``."""
    return [job_from_hash(int(job_id), pairs(flat)) for job_id, flat in json.loads(text)]


def crawl_from_hash(crawl_id: int, h: Mapping[str, str]) -> CrawlInfo:
    """A crawl from its Redis hash."""
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
        limits=limits_from(h.get("limits")),
    )


def key_limit_from_reply(row: Sequence[str]) -> KeyLimit:
    """A limit key from a row of ``limit_read.lua`` ('' for none)."""
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


def signatures(spec: JobSpec) -> tuple[str | None, str | None]:
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


REDIS_MAX_INTEGER = 2**53
"""Priorities, max_attempts and crawl ids are Lua numbers (doubles) in the Redis scripts:
exact to 2**53."""


def redis_integer(value: int, what: str) -> int:
    """A whole number the Redis scripts hold exactly, else a ``StoreError`` (a limit of
    this store, as a PostgreSQL column's range is of that one)."""
    number = operator.index(value)
    if abs(number) > REDIS_MAX_INTEGER:
        raise StoreError(f"{what} {number} is out of range for the Redis store (±2**53)")
    return number


def spec_row(spec: JobSpec) -> list[Any]:
    """One spec as the Redis scripts read it (``spec_from`` in ``prelude.lua``); the
    gate has checked its fingerprint and seconds."""
    sig, cmp = signatures(spec)
    return [
        spec.queue,
        spec.task,
        dumps(list(spec.args)),
        dumps(dict(spec.kwargs)),
        spec.key,
        sig,
        redis_integer(spec.priority, "priority"),
        None if spec.run_at is None else float(spec.run_at),
        float(spec.delay),
        redis_integer(spec.max_attempts, "max_attempts"),
        float(spec.lease_seconds),
        None if spec.timeout is None else float(spec.timeout),
        ConflictPolicy(spec.on_conflict).value,
        cmp,
        None if spec.crawl is None else redis_integer(spec.crawl, "crawl"),
        spec.limit_key,
        None if spec.fingerprint is None else spec.fingerprint.hex(),
    ]


def records_by_crawl(
    records: Sequence[Sequence[CrawlRecord]], applied: Sequence[bool]
) -> list[tuple[int, list[tuple[bytes, str]]]]:
    """The records of the job ends applied (``applied[i]`` for ``records[i]``) as
    ``result_add`` takes them: (key, record) pairs per crawl in batch order, the crawls by
    id (the order in which the SQL stores lock their counters)."""
    by_crawl: dict[int, list[tuple[bytes, str]]] = {}
    for items, ok in zip(records, applied, strict=True):
        if ok:
            for crawl_id, key, record in items:
                by_crawl.setdefault(crawl_id, []).append((key, record))
    return sorted(by_crawl.items())


def records_json(records: Iterable[CrawlRecord]) -> list[list[Any]]:
    """A job end's records as JSON: [crawl id, key in hex, record] each (``keep_records``
    in prelude.lua reads them)."""
    return [[crawl_id, key.hex(), record] for crawl_id, key, record in records]


def records_from_json(rows: Iterable[Sequence[Any]]) -> tuple[CrawlRecord, ...]:
    """``records_json``'s rows back as records."""
    return tuple((int(crawl_id), bytes.fromhex(key), record) for crawl_id, key, record in rows)
