"""Several processes on one store: producers and workers at once, nothing lost,
nothing run twice, no lock error reaching anyone."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import crawlq
from tests.integration.conftest import Processes, wait_until

SECONDS = float(os.environ.get("CRAWLQ_TEST_SOAK_SECONDS", "30"))
PER_PRODUCER = int(os.environ.get("CRAWLQ_TEST_SOAK_JOBS", "15000"))
"""Jobs each producer schedules at most: the workers' drain after the producers stop is
bounded by it, whatever the store's schedule rate (a faster store used to fill a queue
that took longer than the drain's wait)."""

TASKS = """
    import os
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])
    LEDGER = open(f"executed-{os.getpid()}.log", "a", buffering=1)

    @app.task(name="record", max_attempts=5, backoff=0)
    def record(ctx, producer, seq):
        LEDGER.write(f"{ctx.job_id} {producer} {seq} {ctx.attempt}\\n")
"""

PRODUCER = """
    import random, sys, time
    import crawlq
    from mptasks import app, record

    producer, seconds, most = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    acked = open(f"scheduled-{producer}.log", "a", buffering=1)
    errors = open(f"errors-{producer}.log", "a", buffering=1)
    rng = random.Random(producer)
    seq = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and seq < most:
        batch = rng.choice([1, 1, 1, 5, 50])
        specs = [record.spec(producer, seq + i) for i in range(batch)]
        try:
            results = app.schedule_many(specs)
        except Exception as exc:  # counted: nothing may reach a caller
            errors.write(f"{type(exc).__name__}: {exc}\\n")
            continue
        for i, result in enumerate(results):
            acked.write(f"{result.job_id} {producer} {seq + i}\\n")
        seq += batch
        time.sleep(rng.random() * 0.002)
"""


def read_ledgers(workdir: Path, pattern: str) -> list[list[int]]:
    rows: list[list[int]] = []
    for path in sorted(workdir.glob(pattern)):
        rows.extend([int(x) for x in line.split()] for line in path.read_text().splitlines())
    return rows


def test_four_producers_and_four_workers_share_one_store(procs: Processes, tmp_path: Path) -> None:
    procs.write_module("mptasks", TASKS)
    procs.write_module("producer", PRODUCER)
    app = crawlq.App(procs.store_url)
    try:
        check_a_shared_store(procs, tmp_path, app)
    finally:
        app.close()


def check_a_shared_store(procs: Processes, tmp_path: Path, app: crawlq.App) -> None:
    app.store  # noqa: B018 - create the schema before the crowd arrives
    workers = [
        procs.crawlq("worker", "--app", "mptasks:app", "--concurrency", "4", log=f"worker-{i}.err")
        for i in range(4)
    ]
    producers = [
        procs.python(
            "producer.py", str(i), str(SECONDS), str(PER_PRODUCER), log=f"producer-{i}.err"
        )
        for i in range(4)
    ]
    for proc in producers:
        assert proc.wait(SECONDS + 120) == 0
    scheduled = read_ledgers(tmp_path, "scheduled-*.log")
    assert len(scheduled) > 1000, "the producers scheduled too little to prove anything"

    def drained() -> bool:
        [stats] = app.stats()
        return stats.pending == 0 and stats.running == 0

    wait_until(drained, timeout=120, what="the workers to drain the queue")
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
    for proc in workers:
        assert proc.wait(60) == 0

    executed = read_ledgers(tmp_path, "executed-*.log")
    acked = {(p, s) for _, p, s in scheduled}
    ran = [(p, s) for _, p, s, _ in executed]
    assert len(acked) == len(scheduled), "a producer saw the same (producer, seq) twice"
    lost = acked - set(ran)
    duplicated = len(ran) - len(set(ran))
    assert (len(lost), duplicated) == (0, 0), f"lost {len(lost)}, duplicated {duplicated}"
    assert set(ran) == acked
    [stats] = app.stats()
    assert stats.done == len(acked) and stats.dead == 0
    errors = "".join(p.read_text() for p in tmp_path.glob("errors-*.log"))
    assert errors == "", f"errors reached producers: {errors[:2000]}"
    logs = "".join(p.read_text() for p in tmp_path.glob("*.err"))
    assert "locked" not in logs and "Traceback" not in logs, logs[:4000]
    summary = {"scheduled": len(acked), "seconds": SECONDS}
    print(json.dumps(summary))
