"""Workers abused the way scraping workers are: killed at random, frozen past their
lease, recycled, fed a job that kills its process. On every store, in real processes.

``CRAWLQ_TEST_CHAOS_SECONDS`` sets how long the SIGKILL chaos lasts (default 20).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import crawlq
from crawlq import JobState
from tests.integration.conftest import Processes, wait_until

LEASE = 1.0
CONCURRENCY = 4

TASKS = """
    import os, time
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])
    hoard = []

    def note(*fields):
        with open(f"ledger-{os.getpid()}.log", "a") as f:
            f.write(" ".join(str(x) for x in fields) + "\\n")

    @app.task(name="fetch", lease=1.0, max_attempts=20)
    def fetch(ctx, n, seconds):
        note(ctx.job_id, ctx.attempt, time.time(), "start")
        time.sleep(seconds)
        note(ctx.job_id, ctx.attempt, time.time(), "end")
        return os.getpid()

    @app.task(name="grow", lease=5.0)
    def grow(ctx, megabytes):
        hoard.append(bytearray(megabytes * 2**20))
        return os.getpid()

    @app.task(name="poison", lease=5.0, max_attempts=3, backoff=crawlq.Backoff(base=0.0))
    def poison(ctx):
        note(ctx.job_id, ctx.attempt, time.time(), "poison")
        os.kill(os.getpid(), 9)
"""


def ledger(workdir: Path) -> list[tuple[int, int, float, str, int]]:
    """Every ledger line as (job id, attempt, time, what, pid)."""
    rows = []
    for path in workdir.glob("ledger-*.log"):
        pid = int(path.stem.split("-")[1])
        for line in path.read_text().splitlines():
            job_id, attempt, at, what = line.split()
            rows.append((int(job_id), int(attempt), float(at), what, pid))
    return rows


def setup(procs: Processes) -> tuple[crawlq.App, crawlq.Task[..., object]]:
    procs.write_module("chaostasks", TASKS)
    app = crawlq.App(procs.store_url)
    fetch = app.task(name="fetch", lease=LEASE, max_attempts=20)(lambda ctx, n, s: n)
    return app, fetch


def worker(procs: Processes, *extra: str, log: str = "worker.err") -> subprocess.Popen[str]:
    return procs.crawlq(
        "worker", "--app", "chaostasks:app", "--concurrency", str(CONCURRENCY), *extra, log=log
    )


def test_random_sigkills_lose_nothing_and_orphans_come_back_within_a_lease(
    procs: Processes,
) -> None:
    app, fetch = setup(procs)
    ids = [r.job_id for r in fetch.schedule_many([[i, 0.05] for i in range(600)])]
    workers = [worker(procs, log=f"w{i}.err") for i in range(3)]
    chaos_for = float(os.environ.get("CRAWLQ_TEST_CHAOS_SECONDS", "20"))
    kills: list[tuple[int, float]] = []  # (pid, time of the kill)
    rng = random.Random(5)
    deadline = time.monotonic() + chaos_for
    while time.monotonic() < deadline:
        time.sleep(2.0)
        alive = [w for w in workers if w.poll() is None]
        victim = rng.choice(alive)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        kills.append((victim.pid, time.time()))
        workers.remove(victim)
        workers.append(worker(procs, log=f"w{len(kills) + 3}.err"))
    wait_until(
        lambda: sum(s.done for s in app.stats() if s.queue == "fetch") == len(ids),
        timeout=120,
        what="every job to be done after the chaos",
    )
    rows = ledger(procs.workdir)
    starts = [r for r in rows if r[3] == "start"]
    ended = {(r[0], r[1]) for r in rows if r[3] == "end"}
    jobs = {i: app.get_job(i) for i in ids}
    lost = [i for i, j in jobs.items() if j is None or j.state is not JobState.DONE]
    duplicates = len(starts) - len(ids)
    assert lost == []
    assert duplicates <= len(kills) * CONCURRENCY, (duplicates, len(kills))
    # every attempt a kill cut short started again within lease + 2 s of the kill
    killed_at = dict(kills)
    for job_id, attempt, _at, _what, pid in starts:
        if pid in killed_at and (job_id, attempt) not in ended:
            again = [r[2] for r in starts if r[0] == job_id and r[1] > attempt]
            assert again, (job_id, attempt)
            gap = min(again) - killed_at[pid]
            assert gap <= LEASE + 2.0, (
                f"job {job_id} attempt {attempt}: again {gap:.2f} s after the kill"
            )
    assert len(kills) >= 1
    app.close()


def test_a_frozen_worker_loses_its_job_and_its_late_completion_is_refused(
    procs: Processes,
) -> None:
    app, fetch = setup(procs)
    job_id = fetch.schedule(1, 2.5).job_id
    frozen = worker(procs, log="frozen.err")
    wait_until(lambda: bool(ledger(procs.workdir)), timeout=30, what="the job to start")
    frozen.send_signal(signal.SIGSTOP)
    try:
        rescuer = worker(procs, log="rescuer.err")
        wait_until(
            lambda: (j := app.get_job(job_id)) is not None and j.state is JobState.DONE,
            timeout=60,
            what="another worker to run the job",
        )
    finally:
        frozen.send_signal(signal.SIGCONT)
    done = app.get_job(job_id)
    assert done is not None and done.result == rescuer.pid and done.attempts == 2
    time.sleep(3.0)  # the frozen worker wakes up, finishes its sleep, reports
    after = app.get_job(job_id)
    assert after is not None and (after.result, after.attempts) == (rescuer.pid, 2)
    for proc in (frozen, rescuer):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    log = (procs.workdir / "frozen.err").read_text()
    # it learnt it had lost the job: from a heartbeat, a refused completion, or fencing
    assert any(what in log for what in ("lost the lease", "refused", "stopping it here")), log[
        -2000:
    ]
    app.close()


def test_a_job_longer_than_four_leases_is_never_delivered_twice(procs: Processes) -> None:
    app, fetch = setup(procs)
    job_id = fetch.schedule(1, 4.5 * LEASE).job_id
    workers = [worker(procs, log=f"w{i}.err") for i in range(2)]
    wait_until(
        lambda: (j := app.get_job(job_id)) is not None and j.state is JobState.DONE,
        timeout=60,
        what="the long job to finish",
    )
    starts = [r for r in ledger(procs.workdir) if r[3] == "start"]
    assert len(starts) == 1 and app.get_job(job_id).attempts == 1  # type: ignore[union-attr]
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    app.close()


def test_a_job_that_kills_its_process_goes_dead_after_max_attempts(procs: Processes) -> None:
    app, fetch = setup(procs)
    poison = app.task(name="poison", lease=5.0, max_attempts=3)(lambda ctx: None)
    bad = poison.schedule().job_id
    good = [r.job_id for r in fetch.schedule_many([[i, 0.01] for i in range(20)])]
    proc = worker(procs, "--runtime", "process", "--burst", log="worker.err")
    assert proc.wait(120) == 0, (procs.workdir / "worker.err").read_text()[-3000:]
    dead = app.get_job(bad)
    assert dead is not None
    assert (dead.state, dead.attempts, dead.dead_reason) == (JobState.DEAD, 3, "worker_lost")
    assert [r[1] for r in sorted(ledger(procs.workdir)) if r[3] == "poison"] == [1, 2, 3]
    assert all(app.get_job(i).state is JobState.DONE for i in good)  # type: ignore[union-attr]
    app.close()


def test_children_are_recycled_by_job_count_and_by_memory(procs: Processes) -> None:
    app, _ = setup(procs)
    grow = app.task(name="grow", lease=5.0)(lambda ctx, mb: None)
    by_count = [r.job_id for r in grow.schedule_many([[0] for _ in range(6)])]
    proc = worker(
        procs, "--runtime", "process", "--max-jobs-per-child", "2", "--burst", log="count.err"
    )
    assert proc.wait(120) == 0, (procs.workdir / "count.err").read_text()[-3000:]
    pids = [app.get_job(i).result for i in by_count]  # type: ignore[union-attr]
    assert max(pids.count(p) for p in pids) <= 2 and len(set(pids)) >= 3

    by_memory = [r.job_id for r in grow.schedule_many([[80] for _ in range(3)])]
    proc = procs.crawlq(
        "worker", "--app", "chaostasks:app", "--concurrency", "1", "--runtime", "process",
        "--max-memory-per-child", "60MiB", "--burst", log="memory.err",
    )  # fmt: skip
    assert proc.wait(120) == 0, (procs.workdir / "memory.err").read_text()[-3000:]
    jobs = [app.get_job(i) for i in by_memory]
    assert all(j is not None and j.state is JobState.DONE for j in jobs)
    assert len({j.result for j in jobs if j is not None}) == 3
    assert "recycling child process" in (procs.workdir / "memory.err").read_text()
    app.close()
