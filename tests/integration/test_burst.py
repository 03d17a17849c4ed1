"""``crawlq worker --burst`` drains what can run without outside action, on every store:
jobs a limit key keeps back for a while (min_interval) are waited for, jobs due later by
their own run_at (delay) are left."""

from __future__ import annotations

import subprocess
import time

import crawlq
from crawlq import JobState, Limits
from crawlq.stores.base import JobFilter
from tests.integration.conftest import Processes

TASKS = """
    import crawlq

    app = crawlq.App()

    @app.task(name="page")
    def page(ctx, n):
        if n < 5:
            ctx.schedule(page, n + 1, limit_key="site")
        return n

    @app.task(name="later")
    def later(ctx):
        return "later"
"""


def test_a_burst_worker_drains_a_rate_limited_crawl_and_leaves_delayed_jobs(
    procs: Processes,
) -> None:
    procs.write_module("limited", TASKS)
    app = crawlq.App(procs.store_url)
    try:

        @app.task(name="page")
        def page(ctx: crawlq.JobContext, n: int) -> None: ...

        @app.task(name="later")
        def later(ctx: crawlq.JobContext) -> None: ...

        crawl = app.crawl("c", [page.spec(0, limit_key="site")], limits=Limits(min_interval=0.2))
        delayed = later.schedule(delay=3600).job_id
        started = time.monotonic()
        worker = subprocess.run(
            procs.argv("worker", "--app", "limited:app", "--burst"),
            cwd=procs.workdir,
            env=procs.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - started
        assert worker.returncode == 0, worker.stderr
        assert "claimed 6, done 6, failed 0" in worker.stdout, worker.stderr
        assert 1.0 <= took < 30, "five starts 0.2 s apart, then no wait for the delayed job"
        done = app.store.job_list(JobFilter(task="page"))
        assert sorted(j.result for j in done) == [0, 1, 2, 3, 4, 5]  # type: ignore[type-var]
        assert app.get_crawl(crawl.id).state.value == "finished"
        assert app.get_job(delayed).state is JobState.PENDING  # type: ignore[union-attr]
    finally:
        app.close()


SLOW = """
    import time

    import crawlq

    app = crawlq.App()

    @app.task(name="slow")
    def slow(ctx):
        time.sleep(0.5)
"""


def test_a_burst_worker_exits_as_its_last_job_ends_not_after_a_poll(procs: Processes) -> None:
    """The last job runs while nothing is left to claim: the worker waits for it, not
    for new jobs (a store wait that no job's end interrupts, up to --poll-timeout)."""
    procs.write_module("slowjobs", SLOW)
    app = crawlq.App(procs.store_url)
    try:

        @app.task(name="slow")
        def slow(ctx: crawlq.JobContext) -> None: ...

        slow.schedule()
        argv = procs.argv("worker", "--app", "slowjobs:app", "--burst", "--poll-timeout", "20")
        started = time.monotonic()
        worker = subprocess.run(
            argv, cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, timeout=60
        )
        took = time.monotonic() - started
        assert worker.returncode == 0, worker.stderr
        assert "claimed 1, done 1, failed 0" in worker.stdout, worker.stderr
        assert took < 10, f"the worker took {took:.1f} s to exit after a 0.5 s job"
    finally:
        app.close()
