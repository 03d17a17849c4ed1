"""Crawl and limit-key records as the SQL stores write and read them, shared by SQLite
and PostgreSQL (rows with the same column names)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from crawlq.crawls import CrawlInfo, CrawlState
from crawlq.jobs import ConflictPolicy, JobSpec
from crawlq.limits import KeyLimit, Limits
from crawlq.stores.base import StoreSummary
from crawlq.types import JSONValue


class Row(Protocol):
    """A row read by column name: ``sqlite3.Row``, psycopg's dict rows."""

    def __getitem__(self, column: str, /) -> Any: ...


def limits_json(limits: Limits | None) -> str | None:
    """Limits as stored in a crawl's record (JSON text), None for none."""
    if limits is None:
        return None
    value = {"max_running": limits.max_running, "min_interval": limits.min_interval}
    return json.dumps(value, separators=(",", ":"))


def limits_from(value: str | Mapping[str, Any] | None) -> Limits | None:
    """Limits from stored JSON (text, or already decoded by the driver)."""
    if value is None:
        return None
    fields = json.loads(value) if isinstance(value, str) else value
    return Limits(max_running=fields["max_running"], min_interval=fields["min_interval"])


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
    return json.dumps(fields, separators=(",", ":"))


def on_finish_spec(text: str) -> JobSpec:
    """The spec ``on_finish_json`` stored."""
    fields = json.loads(text)
    fields["on_conflict"] = ConflictPolicy(fields["on_conflict"])
    return JobSpec(**fields)


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
