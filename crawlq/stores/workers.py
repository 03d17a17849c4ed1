"""Worker records as every store reads and writes them: the SQL parameters of a
registration or heartbeat, and a ``WorkerInfo`` from a row or a Redis hash."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crawlq.jobs import WorkerInfo, WorkerState
from crawlq.types import Timestamp


def register_params(info: WorkerInfo, queues: Any, now: Timestamp | None) -> dict[str, Any]:
    """Parameters of ``worker_register``; ``queues`` as the store keeps them."""
    params = heartbeat_params(
        info.id,
        running=info.running,
        done=info.done,
        failed=info.failed,
        rss_bytes=info.rss_bytes,
        now=now,
    )
    params.update(
        host=info.host,
        pid=info.pid,
        queues=queues,
        runtime=info.runtime,
        concurrency=info.concurrency,
    )
    return params


def heartbeat_params(
    worker_id: str,
    *,
    running: int,
    done: int,
    failed: int,
    rss_bytes: int | None,
    now: Timestamp | None,
) -> dict[str, Any]:
    """Parameters of ``worker_heartbeat``."""
    return {
        "id": worker_id,
        "running": running,
        "done": done,
        "failed": failed,
        "rss_bytes": rss_bytes,
        "now": now,
    }


def worker_info(fields: Mapping[str, Any], queues: Sequence[str]) -> WorkerInfo:
    """A ``WorkerInfo`` from a row or a hash (numbers may be strings, as Redis gives)."""

    def optional(name: str, kind: type[int] | type[float]) -> Any:
        value = fields.get(name)
        return None if value is None else kind(value)

    return WorkerInfo(
        id=str(fields["id"]),
        host=str(fields["host"]),
        pid=int(fields["pid"]),
        queues=tuple(queues),
        runtime=str(fields["runtime"]),
        concurrency=int(fields["concurrency"]),
        started_at=float(fields["started_at"]),
        last_heartbeat=float(fields["last_heartbeat"]),
        running=int(fields["running"]),
        done=int(fields["done"]),
        failed=int(fields["failed"]),
        rss_bytes=optional("rss_bytes", int),
        state=WorkerState(fields["state"]),
        stopped_at=optional("stopped_at", float),
    )
