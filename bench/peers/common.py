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
- ``close()``: stop anything still running;

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


class Peer(Protocol):
    name: str
    store: str

    def schedule_one(self, n: int) -> float: ...

    def schedule_bulk(self, n: int) -> float | None: ...

    def drain(self, n: int) -> float: ...

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
