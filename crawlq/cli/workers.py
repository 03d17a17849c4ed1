"""``crawlq workers``: every registered worker, its slots, counters and heartbeat."""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich.table import Table

from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import cell, human_age, iso_utc, print_rows, table
from crawlq.cli.watch import check_watch, run_watch, stamp, watch_option
from crawlq.jobs import WorkerInfo
from crawlq.types import Timestamp


def human_bytes(n: int | None) -> str:
    """``512 B``, ``3.2 KiB``, ``312.5 MiB``, ``1.4 GiB``; ``-`` for None."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(size) < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def worker_to_dict(w: WorkerInfo, now: Timestamp) -> dict[str, object]:
    return {
        "id": w.id,
        "host": w.host,
        "pid": w.pid,
        "state": w.state.value,
        "runtime": w.runtime,
        "concurrency": w.concurrency,
        "queues": list(w.queues),
        "running": w.running,
        "done": w.done,
        "failed": w.failed,
        "rss_bytes": w.rss_bytes,
        "started_at": iso_utc(w.started_at),
        "last_heartbeat": iso_utc(w.last_heartbeat),
        "last_heartbeat_age": now - w.last_heartbeat,
        "stopped_at": iso_utc(w.stopped_at),
    }


@click.command()
@target_options
@json_option
@watch_option
def workers(as_json: bool, watch: float | None) -> None:
    """Show every registered worker: alive ones first, then lost, stopped and dead ones.

    \b
    state        alive; lost (no heartbeat for 30 s: it crashed, hangs or cannot
                 reach the store; its jobs go back when a worker next runs); stopped
                 (clean exit); dead (its heartbeat was overdue or its process was gone:
                 its running jobs were given back)
    slots        how many jobs it runs at once (--concurrency)
    running      jobs it was running at its last heartbeat
    done, failed jobs it finished since it started (final counts once stopped)
    memory       resident memory at its last heartbeat
    started      how long ago it started
    heartbeat    how long ago it last heartbeated

    --json prints a list of objects with the fields id, host, pid, state, runtime,
    concurrency, queues, running, done, failed, rss_bytes (or null), started_at,
    last_heartbeat and stopped_at (ISO 8601, UTC; stopped_at null while alive) and
    last_heartbeat_age (seconds).

    \b
    Example:
      crawlq --store postgresql://localhost/jobs workers
      crawlq workers --watch
    """
    check_watch(watch, as_json)
    with open_app() as app:
        if watch is not None:
            run_watch(watch, lambda: stamp(workers_table(app.workers(), app.store.now())))
            return
        rows = app.workers()
        now = app.store.now()
    print_rows(
        rows,
        as_json=as_json,
        to_dict=lambda w: worker_to_dict(w, now),
        render=lambda shown: workers_table(shown, now),
        empty="no workers yet: none has registered with this store",
    )


def workers_table(rows: Sequence[WorkerInfo], now: Timestamp) -> Table:
    out = table(
        "ID",
        "HOST",
        ">PID",
        "STATE",
        "RUNTIME",
        ">SLOTS",
        ">RUNNING",
        ">DONE",
        ">FAILED",
        ">MEMORY",
        ">STARTED",
        ">HEARTBEAT",
    )
    for w in rows:
        out.add_row(
            cell(w.id),
            cell(w.host),
            cell(w.pid),
            cell(w.state.value),
            cell(w.runtime),
            *(cell(n) for n in (w.concurrency, w.running, w.done, w.failed)),
            cell(human_bytes(w.rss_bytes)),
            cell(human_age(now - w.started_at) + " ago"),
            cell(human_age(now - w.last_heartbeat) + " ago"),
        )
    return out
