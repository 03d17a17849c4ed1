"""The asyncio and process runtimes on a real SQLite file: concurrency, hard timeouts,
recycling of child processes, and children that die under a job."""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from crawlq import App, JobContext, JobState, Worker, WorkerSettings
from crawlq.exceptions import ConfigurationError
from crawlq.stores.base import JobFilter
from tests.unit.test_worker import drain, job

# -- asyncio ---------------------------------------------------------------------------


def test_asyncio_runtime_keeps_every_slot_in_flight_in_one_thread(app: App) -> None:
    in_flight = 0
    peak = 0
    gate = asyncio.Event()

    @app.task(name="fetch")
    async def fetch(ctx: JobContext, i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if peak == 200:
            gate.set()
        await asyncio.wait_for(gate.wait(), 10)
        in_flight -= 1
        return i

    ids = [r.job_id for r in fetch.schedule_many([[i] for i in range(200)])]
    worker = drain(app, runtime="asyncio", concurrency=200)
    assert peak == 200
    assert worker.counters.done == 200
    assert [job(app, i).result for i in ids] == list(range(200))


def test_asyncio_runtime_cancels_a_job_past_its_timeout(app: App) -> None:
    cancelled: list[int] = []

    @app.task(name="hang", timeout=0.2, max_attempts=1)
    async def hang(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(ctx.job_id)
            raise

    @app.task(name="quick")
    async def quick(ctx: JobContext) -> str:
        return "ok"

    hung = hang.schedule().job_id
    fine = quick.schedule().job_id
    worker = drain(app, runtime="asyncio", concurrency=1)
    dead = job(app, hung)
    assert (dead.state, dead.dead_reason) == (JobState.DEAD, "timeout")
    assert cancelled == [hung]
    assert job(app, fine).state is JobState.DONE
    assert worker.counters.timed_out == 1


def test_asyncio_runtime_runs_plain_functions_in_threads(app: App) -> None:
    @app.task(name="blocking")
    def blocking(ctx: JobContext, n: int) -> int:
        ctx.schedule("child", n)
        return n + 1

    @app.task(name="child")
    async def child(ctx: JobContext, n: int) -> int:
        return -n

    first = blocking.schedule(4).job_id
    drain(app, runtime="asyncio", concurrency=4)
    assert job(app, first).result == 5
    [kid] = [j for j in app.store.job_list(JobFilter(task="child"))]
    assert (kid.state, kid.result) == (JobState.DONE, -4)


# -- process ---------------------------------------------------------------------------

TASKS = """
import os
import signal
import time

import crawlq

app = crawlq.App("sqlite:///{db}")
LEDGER = {ledger!r}
hoard = []


def note(text):
    with open(LEDGER, "a") as f:
        f.write(text + "\\n")


@app.task(name="pid")
def pid(ctx, i):
    ctx.schedule(child, i)
    return os.getpid()


@app.task(name="child")
def child(ctx, i):
    return -i


@app.task(name="grow")
def grow(ctx, megabytes):
    hoard.append(bytearray(megabytes * 2**20))
    return os.getpid()


@app.task(name="hang", timeout=0.5, max_attempts=1)
def hang(ctx):
    note(str(os.getpid()))
    time.sleep(60)


@app.task(name="poison", max_attempts=3, backoff=crawlq.Backoff(base=0.0))
def poison(ctx):
    note(f"poison {{ctx.attempt}}")
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(name="fine")
def fine(ctx, i):
    return i


@app.task(name="boom", max_attempts=2, backoff=crawlq.Backoff(base=0.0))
def boom(ctx):
    raise ValueError("site is down")
"""


@pytest.fixture
def proc_app(tmp_path: Path) -> Iterator[tuple[ModuleType, Path]]:
    """An app in an importable module (the children import it), and its ledger file."""
    name = f"proc_tasks_{os.getpid()}_{len(list(tmp_path.parent.iterdir()))}"
    ledger = tmp_path / "ledger.txt"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(TASKS).format(db=tmp_path / "jobs.db", ledger=str(ledger))
    )
    sys.path.insert(0, str(tmp_path))
    module = importlib.import_module(name)
    try:
        yield module, ledger
    finally:
        module.app.close()
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_process_runtime_runs_jobs_in_child_processes(proc_app: tuple[ModuleType, Path]) -> None:
    module, _ = proc_app
    app: App = module.app
    ids = [r.job_id for r in module.pid.schedule_many([[i] for i in range(6)])]
    worker = drain(app, runtime="process", concurrency=2)
    pids = {job(app, i).result for i in ids}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert worker.counters.done == 12
    children = app.store.job_list(JobFilter(task="child"))
    assert sorted(c.result for c in children) == [-5, -4, -3, -2, -1, 0]  # type: ignore[type-var]


def test_process_runtime_recycles_a_child_after_n_jobs(proc_app: tuple[ModuleType, Path]) -> None:
    module, _ = proc_app
    app: App = module.app
    ids = [r.job_id for r in module.fine.schedule_many([[i] for i in range(7)])]
    pid_ids = [r.job_id for r in module.grow.schedule_many([[0] for _ in range(6)])]
    worker = drain(app, runtime="process", concurrency=1, max_jobs_per_child=2)
    pids = [job(app, i).result for i in pid_ids]
    assert all(job(app, i).state is JobState.DONE for i in ids + pid_ids)
    assert worker.counters.failed == 0
    # 13 jobs, 2 per child: every child ran at most 2 of the "grow" jobs, and 7 children
    assert max(pids.count(p) for p in set(pids)) <= 2
    assert len(set(pids)) >= 3


def test_process_runtime_recycles_a_child_above_its_memory_ceiling(
    proc_app: tuple[ModuleType, Path],
) -> None:
    module, _ = proc_app
    app: App = module.app
    ids = [r.job_id for r in module.grow.schedule_many([[80] for _ in range(4)])]
    worker = drain(app, runtime="process", concurrency=1, max_memory_per_child=60 * 2**20)
    pids = [job(app, i).result for i in ids]
    assert all(job(app, i).state is JobState.DONE for i in ids)
    assert len(set(pids)) == 4, "each child holds 80 MiB after its job: replaced every time"
    assert worker.counters.failed == 0


def test_process_runtime_kills_a_job_past_its_timeout(proc_app: tuple[ModuleType, Path]) -> None:
    module, ledger = proc_app
    app: App = module.app
    hung = module.hang.schedule().job_id
    fine = module.fine.schedule(1).job_id
    worker = drain(app, runtime="process", concurrency=1)
    dead = job(app, hung)
    assert (dead.state, dead.dead_reason) == (JobState.DEAD, "timeout")
    assert job(app, fine).state is JobState.DONE
    assert worker.counters.timed_out == 1
    child_pid = int(ledger.read_text().split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(child_pid, 0)


def test_a_job_that_kills_its_child_runs_max_attempts_times_then_is_dead(
    proc_app: tuple[ModuleType, Path],
) -> None:
    module, ledger = proc_app
    app: App = module.app
    poison = module.poison.schedule().job_id
    fine = [r.job_id for r in module.fine.schedule_many([[i] for i in range(10)])]
    drain(app, runtime="process", concurrency=2)
    dead = job(app, poison)
    assert ledger.read_text().split("\n")[:-1] == ["poison 1", "poison 2", "poison 3"]
    assert (dead.state, dead.attempts, dead.dead_reason) == (JobState.DEAD, 3, "worker_lost")
    assert "SIGKILL" in (dead.last_error or "")
    assert all(job(app, i).state is JobState.DONE for i in fine)


def test_recycling_options_need_the_process_runtime() -> None:
    with pytest.raises(ConfigurationError, match="--runtime process"):
        WorkerSettings(max_jobs_per_child=20)
    with pytest.raises(ConfigurationError, match="unknown runtime 'fork'"):
        WorkerSettings(runtime="fork")


def test_process_runtime_needs_an_importable_app(app: App) -> None:
    @app.task(name="x")
    def x(ctx: JobContext) -> None:
        return None

    with pytest.raises(ConfigurationError, match="module-level"):
        Worker(app, WorkerSettings(runtime="process", burst=True))


def test_process_runtime_logs_each_failure_in_the_worker(
    proc_app: tuple[ModuleType, Path], caplog: pytest.LogCaptureFixture
) -> None:
    module, _ = proc_app
    app: App = module.app
    boom = module.boom.schedule().job_id
    hung = module.hang.schedule().job_id
    with caplog.at_level(logging.DEBUG, logger="crawlq.worker"):
        drain(app, runtime="process", concurrency=2)
    errors = sorted(r.getMessage() for r in caplog.records if r.levelno == logging.ERROR)
    assert errors == [
        f"job {boom} (task boom) failed on attempt 1 of 2: ValueError: site is down; "
        "will be retried in 0.0 s",
        f"job {boom} (task boom) failed on attempt 2 of 2: ValueError: site is down; "
        "dead (reason max_attempts)",
        f"job {hung} (task hang) failed on attempt 1 of 1: TimeoutError: job {hung} ran "
        "longer than its timeout of 0.5 s; dead (reason timeout)",
    ]
    [traceback] = [
        r for r in caplog.records if r.levelno == logging.INFO and "Traceback" in r.getMessage()
    ]
    assert 'raise ValueError("site is down")' in traceback.getMessage()


def test_the_process_runtime_wire_carries_kept_records() -> None:
    from crawlq.jobs import Lease
    from crawlq.stores.base import Completion, Failure
    from crawlq.worker.runtimes.processes import outcome_from_wire, outcome_to_wire

    records = ((3, bytes(range(16)), "r\u00e9cord \U0001f600"), (4, b"\xff" * 16, ""))
    lease = Lease(7, "token")
    done = Completion(lease=lease, result=[1], records=records)
    dead = Failure(lease=lease, error="e", retry_delay=None, reason="x", records=records)
    fake = type("FakeJob", (), {"lease": lease})()
    for outcome in (done, dead):
        assert outcome_from_wire(fake, outcome_to_wire(outcome)) == outcome  # type: ignore[arg-type]
