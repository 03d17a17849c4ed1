"""A store server restarted in the middle of a drain: workers come back, nothing is lost."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import crawlq
from tests import servers
from tests.integration.conftest import STORE_URLS, Processes, wait_until

TASKS = """
    import os, time
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])
    LEDGER = open(f"executed-{os.getpid()}.log", "a", buffering=1)

    @app.task(name="work", lease=2.0, max_attempts=20, backoff=0.1)
    def work(ctx, n):
        time.sleep(0.002)
        LEDGER.write(f"{n}\\n")
"""


def _restart_postgres() -> None:
    servers.postgres().restart("immediate")


def _restart_redis() -> None:
    servers.redis().restart(signal.SIGKILL)


RESTARTS: dict[str, Callable[[], None]] = {
    "postgres": _restart_postgres,
    "redis": _restart_redis,
}
"""Server stores and how to restart their server like a crash."""

SERVER_STORES = sorted(set(RESTARTS) & set(STORE_URLS))


@pytest.mark.parametrize("server", SERVER_STORES)
def test_workers_survive_a_server_restart_mid_drain(server: str, tmp_path: Path) -> None:
    url = STORE_URLS[server](tmp_path)
    procs = Processes(tmp_path, url)
    procs.write_module("restarttasks", TASKS)
    app = crawlq.App(url)
    work = app.task(name="work", lease=2.0, max_attempts=20)(lambda ctx, n: None)
    total = 3000
    for start in range(0, total, 500):
        work.schedule_many([[n] for n in range(start, start + 500)])

    def done() -> int:
        return sum(s.done for s in app.stats())

    try:
        workers = [
            procs.crawlq("worker", "--app", "restarttasks:app", "--concurrency", "4",
                         log=f"worker-{i}.err")
            for i in range(2)
        ]  # fmt: skip
        wait_until(lambda: done() >= 300, timeout=60, what="the drain to get going")
        RESTARTS[server]()
        back = time.monotonic()
        before = _retrying(done)
        wait_until(lambda: _retrying(done) > before, timeout=30, what="work after the restart")
        assert time.monotonic() - back < 10, "workers took more than 10 s to come back"
        wait_until(lambda: _retrying(done) == total, timeout=120, what="the drain to finish")
        for proc in workers:
            proc.send_signal(signal.SIGTERM)
        for proc in workers:
            assert proc.wait(60) == 0
    finally:
        procs.stop_all()
    executed = {
        int(line)
        for path in tmp_path.glob("executed-*.log")
        for line in path.read_text().splitlines()
    }
    assert executed == set(range(total)), f"lost {len(set(range(total)) - executed)} jobs"
    [stats] = app.stats()
    assert (stats.done, stats.dead, stats.pending, stats.running) == (total, 0, 0, 0)
    app.close()


def _retrying(read: Callable[[], int]) -> int:
    """Read through the store while the server may still be coming back."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return read()
        except crawlq.StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
