"""What every peer module shares: the interface run.py drives, and helpers to start,
watch and stop real worker processes.

A peer is a class built as ``Peer(store, url, tmp, gate)`` (``store`` is ``"sqlite"``,
``"postgres"`` or ``"redis"``; ``url`` the private server's URL, empty for SQLite;
``tmp`` a fresh directory of its own; ``gate`` the shared ``QuietGate``) with:

- ``name`` (the column in the table) and ``STORES`` (the store kinds it runs on);
- ``schedule_one(n)``: seconds to schedule ``n`` no-op jobs, one API call each;
- ``schedule_bulk(n)``: seconds to schedule ``n`` no-op jobs with its bulk API
  (``None`` when it has none);
- ``drain(n)``: ``n`` no-op jobs queued first (not timed), then its worker processes
  started as users start them; seconds from starting them until all ``n`` are done;
- ``latency(count, rate)``: one idle worker set started and warmed up (one job run
  and seen done before timing), then ``count`` jobs sent at ``rate`` per second, one call
  each, each carrying its send time (``time.time()``); the task writes
  ``"<i> <sent> <started>"`` to the ledger when it starts; returns the ``count``
  schedule-to-start delays in seconds;
- ``fanout(total, sleep)``: a tree of ``total`` jobs: job ``i`` sleeps ``sleep`` seconds
  (a simulated fetch), then schedules its children ``3i+1, 3i+2, 3i+3`` (those below
  ``total``) with the system's own call from inside the task, then writes ``"<i>"`` to
  the ledger; only job 0 is scheduled from outside; returns seconds from starting the
  workers until the ledger holds ``total`` lines (the crawl's shape);
- ``deep(n, sample)``: ``n`` no-op jobs queued first with the bulk API (not timed; each
  task writes ``"<i>"`` to the ledger), then the workers started; returns
  ``(jobs_per_second, peak_rss_bytes)``: ``sample`` jobs divided by the seconds between
  the ledger reaching ``LEDGER_SKIP`` lines and reaching ``LEDGER_SKIP + sample``
  (steady state, start-up excluded), and the peak summed resident memory of the worker
  processes (``Workers.rss()``, sampled while waiting); the workers are stopped after;
- ``close()``: stop anything still running;

Latency, fan-out and deep-queue tasks report to a ``Ledger``: a file every worker
process appends lines to (``LEDGER_CODE`` is the task-side half, pasted into the
generated task modules; the file's path comes in the ``BENCH_LEDGER`` environment
variable).

and a module docstring whose ``CONFIG:`` paragraph says which worker configuration it
runs and why (what its own docs recommend for a 2-core machine).

Each measurement gets fresh state (a new SQLite file, PostgreSQL schema or table, Redis
key prefix or queue name); run.py flushes Redis and drops PostgreSQL schemas between
measurements.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

BULK_BATCH = 500
"""Jobs per bulk call, as in bench_stores.py's ``schedule_many`` figure."""
DRAIN_TIMEOUT = 900.0
"""Seconds a drain may take before it is abandoned (and reported as failed)."""
BIN = Path(sys.executable).parent
LEDGER_SKIP = 1_000
"""Deep queue: ledger lines written before the claim rate is timed (start-up)."""

LEDGER_CODE = '''
import os as _os


def ledger_write(line):
    """Append one line to the bench ledger (one write(2) with O_APPEND: atomic between
    processes for lines this short)."""
    fd = _os.open(_os.environ["BENCH_LEDGER"], _os.O_WRONLY | _os.O_APPEND | _os.O_CREAT, 0o644)
    try:
        _os.write(fd, (str(line) + "\\n").encode())
    finally:
        _os.close(fd)
'''
"""Task-side half of ``Ledger``: paste into a generated task module, call
``ledger_write(text)``."""


class Peer(Protocol):
    name: str
    store: str

    def schedule_one(self, n: int) -> float: ...

    def schedule_bulk(self, n: int) -> float | None: ...

    def drain(self, n: int) -> float: ...

    def latency(self, count: int, rate: float) -> list[float]: ...

    def fanout(self, total: int, sleep: float) -> float: ...

    def deep(self, n: int, sample: int) -> tuple[float, int]: ...

    def close(self) -> None: ...


class Workers:
    """Worker processes started in their own session (so that the pool children they
    fork are stopped with them), their output in ``log``."""

    def __init__(self, tmp: Path, tag: str) -> None:
        self.tmp = tmp
        self.log = tmp / f"workers-{tag}.log"
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, **(env or {})}
        full_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(self.tmp), full_env.get("PYTHONPATH", "")) if p
        )
        with open(self.log, "ab") as log:
            self.procs.append(
                subprocess.Popen(
                    cmd,
                    cwd=self.tmp,
                    env=full_env,
                    stdout=log,
                    stderr=log,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )

    def all_exited(self) -> bool:
        return all(p.poll() is not None for p in self.procs)

    def returncodes(self) -> list[int | None]:
        return [p.returncode for p in self.procs]

    def stop(self, sig: int = signal.SIGINT, grace: float = 10.0) -> None:
        """Send ``sig`` (graceful shutdown for the worker CLIs measured) to each worker's
        process group, wait up to ``grace`` seconds, then SIGKILL what is left."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
        deadline = time.perf_counter() + grace
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.perf_counter()))
        for p in self.procs:
            # the group too: pool children may outlive their parent
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            if p.poll() is None:
                p.wait()

    def rss(self) -> int:
        """Summed resident memory (bytes) of every live process in the workers' process
        groups (pool children included), read from /proc."""
        groups = {p.pid for p in self.procs if p.poll() is None}
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[2]) not in groups:  # field 5, pgrp
                    continue
                for line in (entry / "status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
            except (OSError, ValueError, IndexError):
                continue
        return total

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


def wait_until(
    done: Callable[[], bool],
    workers: Workers,
    what: str,
    timeout: float = DRAIN_TIMEOUT,
    interval: float = 0.02,
    exit_ends: bool = False,
) -> float:
    """Poll ``done`` every ``interval`` s; return perf_counter() when it holds. Fails when
    the workers all exit first (unless ``exit_ends``: burst workers exiting means the
    work is over, so check ``done`` once more) or after ``timeout`` s."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if done():
            return time.perf_counter()
        if workers.all_exited():
            if exit_ends and done():
                return time.perf_counter()
            raise RuntimeError(
                f"{what}: workers exited ({workers.returncodes()}) before all jobs were "
                f"done:\n{workers.tail()}"
            )
        time.sleep(interval)
    raise RuntimeError(f"{what}: not done after {timeout:.0f} s:\n{workers.tail()}")


class Ledger:
    """The bench side of the ledger: a file worker processes append lines to; counted
    incrementally (only new bytes are read)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_bytes(b"")
        self._offset = 0
        self._partial = b""
        self._lines: list[str] = []

    @property
    def env(self) -> dict[str, str]:
        """The environment variable the task-side ``ledger_write`` reads."""
        return {"BENCH_LEDGER": str(self.path)}

    def lines(self) -> list[str]:
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        self._offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        self._lines.extend(line.decode() for line in complete)
        return self._lines

    def count(self) -> int:
        return len(self.lines())


def latencies(ledger: Ledger) -> list[float]:
    """Schedule-to-start delays (seconds) from ``"<i> <sent> <started>"`` ledger lines."""
    out = []
    for line in ledger.lines():
        _i, sent, started = line.split()
        out.append(float(started) - float(sent))
    return out


def latencies_without_warmup(ledger: Ledger) -> list[float]:
    """The timed jobs' delays: every ledger line but the warm-up job's (id -1)."""
    timed = [line for line in ledger.lines() if not line.startswith("-1 ")]
    return [float(started) - float(sent) for _i, sent, started in map(str.split, timed)]


def check_tree(ledger: Ledger, total: int, who: str) -> None:
    """Every job of the fan-out tree ran, exactly once."""
    ids = sorted(int(line) for line in ledger.lines())
    if ids != list(range(total)):
        missing = sorted(set(range(total)) - set(ids))[:10]
        raise RuntimeError(
            f"{who} fan-out: {len(ids)} ledger lines for {total} jobs "
            f"({len(ids) - len(set(ids))} duplicates; missing e.g. {missing})"
        )


def send_paced(send: Callable[[int, float], None], count: int, rate: float) -> None:
    """Call ``send(i, time.time())`` ``count`` times at ``rate`` per second (on a fixed
    timetable, so a slow call does not slow the ones after it)."""
    t0 = time.perf_counter()
    for i in range(count):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(i, time.time())


def analyze_postgres(url: str) -> None:
    """``ANALYZE`` the whole database at ``url`` (untimed, after a deep queue's fill).
    A table filled just before has no statistics until autovacuum's first look (up to a
    minute later), and a claim planned without them may sort every queued job: PgQueuer's
    deep queue gave 719 jobs/s in one run and about 6,000 in others, by whether
    autovacuum had come. Every PostgreSQL system's deep queue is measured analyzed, as a
    queue that has been deep for a while is."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE")


def wait_deep(ledger: Ledger, workers: Workers, what: str, sample: int) -> tuple[float, int]:
    """The deep-queue measurement once the workers are started: (jobs/s over ``sample``
    ledger lines after ``LEDGER_SKIP``, peak summed RSS of the workers)."""
    peak = 0

    def reached(k: int) -> Callable[[], bool]:
        def done() -> bool:
            nonlocal peak
            peak = max(peak, workers.rss())
            return ledger.count() >= k

        return done

    t1 = wait_until(reached(LEDGER_SKIP), workers, what, interval=0.05)
    t2 = wait_until(reached(LEDGER_SKIP + sample), workers, what, interval=0.05)
    return sample / (t2 - t1), peak


def latency_run(
    workers: Workers,
    cmd: list[str],
    env: dict[str, str],
    send: Callable[[int, float], Any],
    ledger: Ledger,
    gate: Any,
    count: int,
    rate: float,
    who: str,
) -> list[float]:
    """The latency workload, once a peer has its ledger, its workers and ``send(i,
    sent)``: start the workers, warm up with job -1, let them idle 1 s, send ``count``
    jobs at ``rate`` per second, wait until all have started; their delays. The caller
    stops the workers (in a ``finally``)."""
    workers.start(cmd, env)
    send(-1, time.time())
    wait_until(lambda: ledger.count() >= 1, workers, f"{who} latency warm-up")
    time.sleep(1.0)
    gate.wait()
    send_paced(send, count, rate)
    wait_until(lambda: ledger.count() >= count + 1, workers, f"{who} latency")
    return latencies_without_warmup(ledger)


def fanout_run(
    workers: Workers, cmd: list[str], env: dict[str, str], ledger: Ledger, total: int, who: str
) -> float:
    """The timed part of the fan-out, once the root job is queued: start the workers,
    wait until the ledger holds ``total`` lines; seconds. The caller stops the workers
    (in a ``finally``), then checks the tree with ``check_tree``."""
    t0 = time.perf_counter()
    workers.start(cmd, env)
    return wait_until(lambda: ledger.count() >= total, workers, f"{who} fan-out") - t0


def fanout_children(i: int, total: int) -> list[int]:
    """The children of job ``i`` in the fan-out tree of ``total`` jobs."""
    return [c for c in (3 * i + 1, 3 * i + 2, 3 * i + 3) if c < total]


def write_module(tmp: Path, name: str, text: str) -> Any:
    """Write ``name``.py into ``tmp`` (which the workers get on PYTHONPATH) and import it
    here too, so that this process enqueues through the very functions the workers run."""
    import importlib

    (tmp / f"{name}.py").write_text(text)
    if str(tmp) not in sys.path:
        sys.path.insert(0, str(tmp))
    sys.modules.pop(name, None)
    return importlib.import_module(name)


def module_config(module: Any) -> str:
    """The ``CONFIG:`` paragraph of a peer module's docstring, on one line."""
    doc = module.__doc__ or ""
    for para in doc.split("\n\n"):
        if para.strip().startswith("CONFIG:"):
            return " ".join(para.split())[len("CONFIG:") :].strip().replace("``", "`")
    return ""
