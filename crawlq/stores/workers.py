"""Worker records as every store reads and writes them: the SQL parameters of a
registration, heartbeat or stop, a ``WorkerInfo`` from a row or a Redis hash, and the
listing's order and liveness rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from crawlq.config import DEAD_AFTER
from crawlq.jobs import WorkerInfo, WorkerState
from crawlq.types import Timestamp


class Counters(NamedTuple):
    """A worker's counters, as its registration and each heartbeat report them."""

    running: int
    done: int
    failed: int
    rss_bytes: int | None

    @classmethod
    def of(cls, info: WorkerInfo) -> Counters:
        return cls(info.running, info.done, info.failed, info.rss_bytes)


def register_params(info: WorkerInfo, queues: Any, now: Timestamp | None) -> dict[str, Any]:
    """Parameters of ``worker_register``; ``queues`` as the store keeps them."""
    params = heartbeat_params(info.id, Counters.of(info), now)
    params.update(
        host=info.host,
        pid=info.pid,
        process=info.process,
        queues=queues,
        runtime=info.runtime,
        concurrency=info.concurrency,
    )
    return params


def heartbeat_params(worker_id: str, counters: Counters, now: Timestamp | None) -> dict[str, Any]:
    """Parameters of ``worker_heartbeat``."""
    return {"id": worker_id, **counters._asdict(), "now": now}


def stop_params(worker_id: str, *, done: int, failed: int, now: Timestamp | None) -> dict[str, Any]:
    """Parameters of ``worker_stop``: the final counters, nothing running."""
    return {"id": worker_id, "done": done, "failed": failed, "now": now}


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
        process=fields.get("process") or None,
    )


def listed(workers: Iterable[WorkerInfo], now: Timestamp) -> list[WorkerInfo]:
    """``worker_list``'s answer: an alive worker whose last heartbeat is older than
    ``now - DEAD_AFTER`` shows as lost (no other worker may be running to reap it);
    alive ones first, then lost ones, then the others, each by started_at, then id."""
    shown = [
        replace(w, state=WorkerState.LOST)
        if w.state is WorkerState.ALIVE and w.last_heartbeat < now - DEAD_AFTER
        else w
        for w in workers
    ]
    rank = {WorkerState.ALIVE: 0, WorkerState.LOST: 1}
    return sorted(shown, key=lambda w: (rank.get(w.state, 2), w.started_at, w.id))
