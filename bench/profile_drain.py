"""Profile crawlq's drain path: an in-process burst worker over N queued no-op jobs.

    .venv/bin/python bench/profile_drain.py            # N=20,000
    .venv/bin/python bench/profile_drain.py -n 5000 --top 30

cProfile only sees the thread that enabled it, so every thread the worker starts (main
loop, 8 slot threads, acker, heartbeat) gets its own profiler and the stats are merged.
Functions that block (queue get, lock acquire, event wait, sleep) are listed separately
so that waiting does not hide where the CPU goes. Also prints, without the profiler, the
wall time, CPU time, and the store calls the worker made: how many, how long, and how
many jobs each claim and each ack batch carried.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crawlq

BLOCKING = (
    "acquire",
    "get' of '_queue.SimpleQueue",
    "wait",
    "sleep",
    "join",
)


def make_app(path: Path) -> crawlq.App:
    app = crawlq.App(f"sqlite:///{path}")

    @app.task(name="bench.noop")
    def noop(ctx: crawlq.JobContext, i: int) -> None:
        return None

    _ = app.store
    return app


def fill(app: crawlq.App, n: int) -> None:
    noop = app.tasks["bench.noop"]
    for start in range(0, n, 500):
        app.schedule_many(noop.spec(i) for i in range(start, min(n, start + 500)))


class CallLog:
    """Wraps store methods to count calls, time them and record batch sizes."""

    def __init__(self, store: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.sizes: dict[str, Counter[int]] = {}
        self._lock = threading.Lock()
        for name in (
            "job_claim",
            "job_complete",
            "job_heartbeat",
            "job_expire_leases",
            "job_prune",
            "job_wait",
            "job_next_due",
        ):
            self._wrap(store, name)

    def _wrap(self, store: Any, name: str) -> None:
        inner: Callable[..., Any] = getattr(store, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            result = inner(*args, **kwargs)
            elapsed = time.perf_counter() - t0
            size = len(args[0]) if name == "job_complete" else None
            if name == "job_claim":
                size = len(result)
            with self._lock:
                self.calls[name] += 1
                self.seconds[name] += elapsed
                if size is not None:
                    self.sizes.setdefault(name, Counter())[size] += 1
            return result

        setattr(store, name, wrapper)

    def report(self, wall: float) -> str:
        lines = [
            "| store call | calls | total s | share of wall | mean ms | sizes (size: count) |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for name, count in self.calls.most_common():
            sizes = self.sizes.get(name)
            shown = ""
            if sizes:
                top = sorted(sizes.items(), key=lambda kv: -kv[1])[:6]
                shown = ", ".join(f"{k}: {v}" for k, v in top)
                mean = sum(k * v for k, v in sizes.items()) / sum(sizes.values())
                shown += f" (mean {mean:.2f})"
            lines.append(
                f"| {name} | {count:,} | {self.seconds[name]:.2f} | "
                f"{self.seconds[name] / wall:.0%} | {1000 * self.seconds[name] / count:.3f} | "
                f"{shown} |"
            )
        return "\n".join(lines)


def run_worker(app: crawlq.App) -> crawlq.Worker:
    worker = app.worker(crawlq.WorkerSettings(burst=True, concurrency=8))
    worker.run()
    return worker


def profiled_run(app: crawlq.App) -> tuple[pstats.Stats, float]:
    profiles: list[cProfile.Profile] = []
    original = threading.Thread.run

    def run(self: threading.Thread) -> None:
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
        try:
            original(self)
        finally:
            prof.disable()

    threading.Thread.run = run  # type: ignore[method-assign]
    main = cProfile.Profile()
    profiles.append(main)
    t0 = time.perf_counter()
    try:
        main.enable()
        run_worker(app)
        main.disable()
    finally:
        threading.Thread.run = original  # type: ignore[method-assign]
    wall = time.perf_counter() - t0
    for t in threading.enumerate():
        if t is not threading.current_thread() and t.name.startswith("crawlq"):
            t.join(5)
    stats = pstats.Stats(profiles[0])
    for p in profiles[1:]:
        stats.add(p)
    return stats, wall


def print_stats(stats: pstats.Stats, sort: str, top: int, blocking: bool) -> None:
    """Print the top lines, with or without the blocking primitives."""
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats(sort).print_stats(400)
    lines = buf.getvalue().splitlines()
    head = [i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")]
    if not head:
        print(buf.getvalue())
        return
    start = head[0]
    print(lines[start])
    shown = 0
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        is_blocking = any(b in line for b in BLOCKING)
        if is_blocking != blocking:
            continue
        print(line)
        shown += 1
        if shown >= top:
            break


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="crawlq-profile-"))
    try:
        # 1. plain run: wall time, CPU time and the store calls
        app = make_app(tmp / "plain.db")
        fill(app, args.n)
        log = CallLog(app.store)
        cpu0, t0 = time.process_time(), time.perf_counter()
        worker = run_worker(app)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        print(f"## Unprofiled in-process burst worker, N={args.n:,}, concurrency 8\n")
        print(
            f"- wall {wall:.2f} s = {args.n / wall:,.0f} jobs/s; process CPU {cpu:.2f} s "
            f"({cpu / wall:.0%} of one core)"
        )
        print(f"- counters: {worker.counters}\n")
        print(log.report(wall))
        app.close()

        # 2. profiled run
        app = make_app(tmp / "profiled.db")
        fill(app, args.n)
        stats, pwall = profiled_run(app)
        app.close()
        print(f"\n## cProfile, every thread merged (wall {pwall:.2f} s under the profiler)\n")
        print("### by own time (tottime), blocking primitives left out\n\n```")
        print_stats(stats, "tottime", args.top, blocking=False)
        print("```\n\n### by cumulative time, blocking primitives left out\n\n```")
        print_stats(stats, "cumulative", args.top, blocking=False)
        print("```\n\n### blocking primitives (time spent waiting)\n\n```")
        print_stats(stats, "tottime", 10, blocking=True)
        print("```")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
