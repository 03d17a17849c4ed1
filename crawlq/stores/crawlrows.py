"""Crawl and limit-key records as the SQL stores read them back, shared by SQLite and
PostgreSQL (rows with the same column names)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from crawlq.crawls import CrawlInfo, CrawlState
from crawlq.limits import KeyLimit, Limits
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
