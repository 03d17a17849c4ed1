"""The thread worker on a real SQLite file: outcomes, retries, control flow, shutdown."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import crawlq
from crawlq import App, JobContext, JobState, Worker, WorkerSettings
from crawlq.cli.worker import summary
from crawlq.fingerprint import fingerprint
from crawlq.stores.base import ClaimParams, JobFilter


def drain(app: App, **settings: object) -> crawlq.Worker:
    worker = Worker(app, WorkerSettings(burst=True, poll_timeout=0.05, **settings))  # type: ignore[arg-type]
    worker.run()
    return worker


def job(app: App, job_id: int) -> crawlq.Job:
    found = app.get_job(job_id)
    assert found is not None
    return found


def test_burst_worker_runs_every_job_and_keeps_results(app: App) -> None:
    @app.task(name="double")
    def double(ctx: JobContext, n: int) -> int:
        return n * 2

    ids = [r.job_id for r in double.schedule_many([[i] for i in range(50)])]
    worker = drain(app, concurrency=4)
    assert worker.counters.done == 50
    assert [job(app, i).result for i in ids] == [i * 2 for i in range(50)]
    assert all(job(app, i).state is JobState.DONE for i in ids)
    [stats] = app.stats()
    assert (stats.done, stats.pending, stats.running) == (50, 0, 0)


def test_failing_task_is_retried_then_dead_with_its_traceback(app: App) -> None:
    calls: list[int] = []

    @app.task(name="flaky", max_attempts=3, backoff=crawlq.Backoff(base=0.0))
    def flaky(ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        raise ValueError("site is down")

    job_id = flaky.schedule().job_id
    drain(app)
    dead = job(app, job_id)
    assert calls == [1, 2, 3]
    assert dead.state is JobState.DEAD and dead.attempts == 3
    assert dead.dead_reason == "max_attempts"
    assert "ValueError: site is down" in (dead.last_error or "")
    assert "Traceback" in (dead.last_error or "")


def failure_lines(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    records = [r for r in caplog.records if r.name == "crawlq.worker" and r.levelno == level]
    return [r.getMessage() for r in records if "failed on attempt" in r.getMessage()]


def tracebacks(caplog: pytest.LogCaptureFixture) -> dict[int, str]:
    """Level of each worker record that holds a traceback -> its text."""
    return {
        r.levelno: r.getMessage()
        for r in caplog.records
        if r.name == "crawlq.worker" and "Traceback" in r.getMessage()
    }


@pytest.mark.parametrize("runtime", ["thread", "asyncio"])
def test_each_failure_is_one_error_line_and_the_traceback_follows(
    app: App, runtime: str, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(name="flaky", max_attempts=2, backoff=crawlq.Backoff(base=0.0))
    def flaky(ctx: JobContext) -> None:
        raise ValueError("site is down")

    job_id = flaky.schedule().job_id
    with caplog.at_level(logging.DEBUG, logger="crawlq"):
        drain(app, runtime=runtime)
    assert failure_lines(caplog, logging.ERROR) == [
        f"job {job_id} (task flaky) failed on attempt 1 of 2: ValueError: site is down; "
        "will be retried in 0.0 s",
        f"job {job_id} (task flaky) failed on attempt 2 of 2: ValueError: site is down; "
        "dead (reason max_attempts)",
    ]
    found = tracebacks(caplog)
    assert sorted(found) == [logging.DEBUG, logging.INFO]  # retried: DEBUG; dead: INFO
    assert found[logging.INFO].startswith(f"job {job_id} attempt 2: Traceback")
    assert 'raise ValueError("site is down")' in found[logging.INFO]


def test_a_retry_or_discard_the_task_asks_for_is_logged_at_info(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(name="polite", max_attempts=3)
    def polite(ctx: JobContext) -> None:
        if ctx.attempt == 1:
            raise crawlq.Retry(delay=0, reason="HTTP 429")
        raise crawlq.Discard("HTTP 404")

    job_id = polite.schedule().job_id
    with caplog.at_level(logging.DEBUG, logger="crawlq"):
        drain(app)
    assert failure_lines(caplog, logging.ERROR) == []
    assert failure_lines(caplog, logging.INFO) == [
        f"job {job_id} (task polite) failed on attempt 1 of 3: crawlq.exceptions.Retry: "
        "HTTP 429; will be retried in 0.0 s",
        f"job {job_id} (task polite) failed on attempt 2 of 3: crawlq.exceptions.Discard: "
        "HTTP 404; dead (reason discarded)",
    ]
    assert sorted(tracebacks(caplog)) == [logging.DEBUG]


def test_burst_worker_waits_for_retries_its_own_failures_make_due(app: App) -> None:
    """A burst worker stops only when nothing is held, every outcome is recorded and a
    claim after that finds nothing. Here the store records the failure slowly, and the
    claim that runs meanwhile (finding nothing) returns only after the failure, with
    its retry due at once, is recorded: the worker must go on and run the retry."""

    @app.task(name="once", max_attempts=2, backoff=crawlq.Backoff(base=0.0))
    def once(ctx: JobContext) -> int:
        if ctx.attempt == 1:
            raise ConnectionError("reset")
        return ctx.attempt

    store = app.store
    real_fail, real_claim = store.job_fail, store.job_claim
    recording = threading.Event()

    def slow_fail(failures: Any, **kwargs: Any) -> list[bool]:
        recording.set()
        try:
            time.sleep(0.05)
            return real_fail(failures, **kwargs)
        finally:
            recording.clear()

    def claim_that_returns_late(params: Any) -> list[crawlq.Job]:
        jobs = real_claim(params)
        if not jobs and recording.is_set():
            while recording.is_set():
                time.sleep(0.001)
            time.sleep(0.02)  # and the acker has marked it recorded
        return jobs

    store.job_fail = slow_fail  # type: ignore[method-assign]
    store.job_claim = claim_that_returns_late  # type: ignore[method-assign]
    job_id = once.schedule().job_id
    drain(app, concurrency=1)
    assert (job(app, job_id).state, job(app, job_id).result) == (JobState.DONE, 2)


def test_task_recovers_on_a_later_attempt(app: App) -> None:
    @app.task(name="second", backoff=0)
    def second(ctx: JobContext) -> str:
        if ctx.attempt < 2:
            raise ConnectionError("reset")
        return "ok"

    job_id = second.schedule().job_id
    drain(app)
    assert (job(app, job_id).state, job(app, job_id).result) == (JobState.DONE, "ok")


def test_retry_sets_the_next_run_time(app: App) -> None:
    @app.task(name="limited", max_attempts=5)
    def limited(ctx: JobContext) -> None:
        raise crawlq.Retry(delay=3600, reason="429 Too Many Requests")

    job_id = limited.schedule().job_id
    before = app.store.now()
    drain(app)
    pending = job(app, job_id)
    assert pending.state is JobState.PENDING and pending.attempts == 1
    assert before + 3590 < pending.run_at < before + 3610


def test_discard_goes_straight_to_the_dead_letter_queue(app: App) -> None:
    @app.task(name="gone", max_attempts=10)
    def gone(ctx: JobContext) -> None:
        raise crawlq.Discard("404: page removed")

    job_id = gone.schedule().job_id
    drain(app)
    dead = job(app, job_id)
    assert (dead.state, dead.attempts, dead.dead_reason) == (JobState.DEAD, 1, "discarded")


def test_snooze_does_not_use_up_an_attempt(app: App) -> None:
    @app.task(name="sleepy", max_attempts=1)
    def sleepy(ctx: JobContext) -> None:
        raise crawlq.Snooze(delay=600)

    job_id = sleepy.schedule().job_id
    worker = drain(app)
    snoozed = job(app, job_id)
    assert snoozed.state is JobState.PENDING and snoozed.attempts == 0
    assert snoozed.run_at > app.store.now() + 590
    counters = worker.counters
    assert (counters.claimed, counters.done, counters.failed, counters.snoozed) == (1, 0, 0, 1)
    assert summary(worker).endswith("done 0, failed 0, released 0, snoozed 1")


def test_children_are_scheduled_only_when_the_parent_completes(app: App) -> None:
    @app.task(name="child")
    def child(ctx: JobContext, url: str) -> str:
        return url

    @app.task(name="parent", max_attempts=1)
    def parent(ctx: JobContext, fail: bool) -> None:
        ctx.schedule(child, "https://a.example/1", key="1")
        ctx.schedule("child", "https://a.example/2")
        if fail:
            raise RuntimeError("crashed after finding links")

    parent.schedule(True)
    drain(app)
    assert app.store.job_list(crawlq.stores.base.JobFilter(task="child")) == []
    parent.schedule(False)
    drain(app)
    children = app.store.job_list(crawlq.stores.base.JobFilter(task="child"))
    assert sorted(c.result for c in children) == ["https://a.example/1", "https://a.example/2"]  # type: ignore[type-var]


def test_kept_results_go_with_the_end_of_the_attempt(app: App) -> None:
    @app.task(name="keeper", max_attempts=2, backoff=crawlq.Backoff(base=0.0))
    def keeper(ctx: JobContext, name: str, fail: int) -> None:
        ctx.keep_result(fingerprint(name), f"{name} attempt {ctx.attempt}")
        if ctx.attempt <= fail:
            raise RuntimeError("failed after keeping a record")

    # "retried": its first failure keeps its record; "dead": both attempts fail
    starts = [keeper.spec("done", 0), keeper.spec("retried", 1), keeper.spec("dead", 2)]
    crawl_id = app.store.crawl_create(crawlq.CrawlSpec(name="c"), starts).id
    drain(app)
    found = app.store.result_get(crawl_id, [fingerprint(n) for n in ("done", "retried", "dead")])
    assert found == ["done attempt 1", "retried attempt 1", "dead attempt 1"]
    assert app.store.result_count(crawl_id) == 3


def test_keep_result_needs_a_crawl(app: App) -> None:
    @app.task(name="lone", max_attempts=1)
    def lone(ctx: JobContext) -> None:
        ctx.keep_result(bytes(16), "record")

    job_id = lone.schedule().job_id
    drain(app)
    assert "needs a crawl" in (job(app, job_id).last_error or "")


def test_context_knows_its_job(app: App) -> None:
    seen: list[tuple[int, int, str | None, str]] = []

    @app.task(name="ctx", queue="special")
    def ctx_task(ctx: JobContext) -> None:
        seen.append((ctx.job_id, ctx.attempt, ctx.key, ctx.queue))
        ctx.log.info("running")

    job_id = ctx_task.schedule(key="k").job_id
    drain(app)
    assert seen == [(job_id, 1, "k", "special")]


def test_async_task_runs_in_the_thread_runtime(app: App) -> None:
    import asyncio

    @app.task(name="aio")
    async def aio(ctx: JobContext, n: int) -> int:
        await asyncio.sleep(0.01)
        return n + 1

    job_id = aio.schedule(41).job_id
    drain(app)
    assert job(app, job_id).result == 42


def test_result_that_is_not_json_fails_the_attempt_clearly(app: App) -> None:
    @app.task(name="bad", max_attempts=1)
    def bad(ctx: JobContext) -> object:
        return object()

    job_id = bad.schedule().job_id
    drain(app)
    dead = job(app, job_id)
    assert dead.dead_reason == "bad_result" and "not JSON" in (dead.last_error or "")


def test_a_result_over_the_cap_sends_the_job_dead_at_once(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'jobs.db'}", max_payload_bytes=1000)
    runs: list[int] = []

    @app.task(name="big", max_attempts=3)
    def big(ctx: JobContext) -> str:
        runs.append(ctx.job.attempts)
        return "x" * 2000

    job_id = big.schedule().job_id
    drain(app)
    dead = job(app, job_id)
    assert runs == [1], "a task that ran to its end is not run again for its result"
    assert (dead.state, dead.dead_reason, dead.attempts) == (JobState.DEAD, "bad_result", 1)
    assert "the result of task 'big' takes 2002 bytes as JSON, over the limit of 1000" in (
        dead.last_error or ""
    )
    with pytest.raises(crawlq.JobFailed, match="bad_result"):
        app.result(job_id, timeout=0)
    app.close()


def test_result_waits_for_a_running_worker_and_raises_its_errors(app: App) -> None:
    @app.task(name="square")
    def square(ctx: JobContext, n: int) -> int:
        if n < 0:
            raise crawlq.Discard(f"no square root of {n} wanted")
        time.sleep(0.2)
        return n * n

    worker = crawlq.Worker(app, WorkerSettings(concurrency=2, poll_timeout=0.05))
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        assert app.result(square.schedule(12), timeout=10) == 144
        with pytest.raises(crawlq.JobFailed, match=r"discarded.*no square root of -1"):
            app.result(square.schedule(-1).job_id, timeout=10)
        with pytest.raises(crawlq.WaitTimeout):
            app.result(square.schedule(3, delay=60), timeout=0.1)
    finally:
        worker.stop()
        runner.join(10)


def test_job_of_an_unknown_task_ends_dead_with_a_reason(app: App) -> None:
    app.task(name="known", queue="shared")(lambda ctx: None)
    spec = crawlq.JobSpec(queue="shared", task="renamed.elsewhere", max_attempts=1)
    [result] = app.schedule_many([spec])
    drain(app)
    dead = job(app, result.job_id)
    assert dead.dead_reason == "unknown_task" and "renamed.elsewhere" in (dead.last_error or "")


def test_timeout_fails_the_attempt_and_frees_the_slot(app: App) -> None:
    release = threading.Event()

    @app.task(name="hang", timeout=0.2, max_attempts=1)
    def hang(ctx: JobContext) -> None:
        release.wait(10)

    @app.task(name="quick")
    def quick(ctx: JobContext) -> str:
        return "done"

    hung = hang.schedule().job_id
    quick_ids = [quick.schedule().job_id for _ in range(5)]
    worker = drain(app, concurrency=1)
    release.set()
    dead = job(app, hung)
    assert (dead.state, dead.dead_reason) == (JobState.DEAD, "timeout")
    assert "timeout of 0.2 s" in (dead.last_error or "")
    assert all(job(app, i).state is JobState.DONE for i in quick_ids)
    assert worker.counters.timed_out == 1


def test_heartbeats_keep_a_job_longer_than_its_lease(app: App) -> None:
    @app.task(name="long", lease=0.3)
    def long(ctx: JobContext) -> int:
        time.sleep(1.2)
        return ctx.attempt

    job_id = long.schedule().job_id
    drain(app)
    done = job(app, job_id)
    assert (done.state, done.attempts, done.result) == (JobState.DONE, 1, 1)


def run_in_thread(worker: crawlq.Worker) -> threading.Thread:
    thread = threading.Thread(target=worker.run)
    thread.start()
    return thread


def wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_stop_lets_running_jobs_finish_within_the_grace(app: App) -> None:
    started = threading.Event()

    @app.task(name="slow")
    def slow(ctx: JobContext) -> str:
        started.set()
        time.sleep(0.3)
        return "finished"

    job_id = slow.schedule().job_id
    worker = Worker(app, WorkerSettings(shutdown_grace=5, poll_timeout=0.05))
    thread = run_in_thread(worker)
    assert started.wait(5)
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert job(app, job_id).state is JobState.DONE


def test_stop_now_releases_running_jobs_without_using_an_attempt(app: App) -> None:
    started = threading.Event()
    unblock = threading.Event()

    @app.task(name="stuck", max_attempts=1)
    def stuck(ctx: JobContext) -> None:
        started.set()
        unblock.wait(10)

    job_id = stuck.schedule().job_id
    worker = Worker(app, WorkerSettings(shutdown_grace=30, poll_timeout=0.05))
    thread = run_in_thread(worker)
    assert started.wait(5)
    worker.stop(now=True)
    thread.join(10)
    unblock.set()
    released = job(app, job_id)
    assert (released.state, released.attempts) == (JobState.PENDING, 0)
    assert worker.counters.released == 1


def test_grace_period_ends_with_a_release(app: App) -> None:
    started = threading.Event()
    unblock = threading.Event()

    @app.task(name="stuck")
    def stuck(ctx: JobContext) -> None:
        started.set()
        unblock.wait(10)

    job_id = stuck.schedule().job_id
    worker = Worker(app, WorkerSettings(shutdown_grace=0.2, poll_timeout=0.05))
    thread = run_in_thread(worker)
    assert started.wait(5)
    worker.stop()
    thread.join(10)
    unblock.set()
    assert job(app, job_id).state is JobState.PENDING


def test_idle_worker_starts_a_new_job_quickly(app: App) -> None:
    done = threading.Event()

    @app.task(name="ping")
    def ping(ctx: JobContext) -> None:
        done.set()

    worker = Worker(app, WorkerSettings(poll_timeout=5))
    thread = run_in_thread(worker)
    time.sleep(0.2)  # the worker is now waiting on the store
    started = time.monotonic()
    ping.schedule()
    assert done.wait(5)
    assert time.monotonic() - started < 1.0  # woken by the commit, not by the 5 s timeout
    worker.stop()
    thread.join(10)


def test_a_job_the_wait_claims_after_a_stop_is_released_not_started(app: App) -> None:
    """The wait ends in a claim (``job_wait_claim``): if the worker was told to stop while
    it waited, what that claim took goes back at once, its attempt not used."""
    ran: list[int] = []

    @app.task(name="late")
    def late(ctx: JobContext) -> None:
        ran.append(ctx.job.id)

    worker = Worker(app, WorkerSettings(poll_timeout=5, shutdown_grace=5))
    thread = run_in_thread(worker)
    time.sleep(0.2)  # the worker is now waiting on the store
    worker.stop()
    job_id = late.schedule().job_id  # ends the wait, whose claim takes it
    thread.join(10)
    assert not thread.is_alive() and ran == []
    released = job(app, job_id)
    assert (released.state, released.attempts) == (JobState.PENDING, 0)
    assert (worker.counters.claimed, worker.counters.released) == (1, 1)


def test_a_job_that_ends_while_the_loop_waits_on_the_store_is_recorded_at_once(
    app: App,
) -> None:
    """The loop records outcomes itself, before each claim; while it waits on the store
    (here up to 30 s, nothing else due), the acker's thread records them."""
    release = threading.Event()

    @app.task(name="slow")
    def slow(ctx: JobContext) -> None:
        release.wait(10)

    job_id = slow.schedule().job_id
    worker = Worker(app, WorkerSettings(poll_timeout=30))
    thread = run_in_thread(worker)
    deadline = time.monotonic() + 5
    while job(app, job_id).state is not JobState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # the loop found nothing more to claim and waits on the store
    release.set()
    started = time.monotonic()
    while job(app, job_id).state is not JobState.DONE and time.monotonic() - started < 5:
        time.sleep(0.02)
    assert time.monotonic() - started < 1.0, "the outcome waited for the loop"
    worker.stop()
    thread.join(10)


def test_worker_without_queues_is_refused(app: App) -> None:
    with pytest.raises(crawlq.ConfigurationError, match="no queue"):
        Worker(app, WorkerSettings())


@pytest.mark.parametrize(
    ("settings", "fragment"),
    [
        ({"concurrency": 0}, "concurrency"),
        ({"prefetch": -1}, "prefetch"),
        ({"poll_timeout": 0}, "poll_timeout"),
    ],
)
def test_bad_worker_settings_are_refused(settings: dict[str, float], fragment: str) -> None:
    with pytest.raises(crawlq.ConfigurationError, match=fragment):
        WorkerSettings(**settings)  # type: ignore[arg-type]


def test_a_worker_gives_back_the_jobs_of_a_dead_worker_at_once(app: App) -> None:
    from crawlq import WorkerInfo
    from crawlq.stores.base import ClaimParams

    @app.task(name="slow-lease", lease=3600)
    def slow_lease(ctx: JobContext) -> int:
        return ctx.attempt

    job_id = slow_lease.schedule().job_id
    ghost = WorkerInfo(
        id="ghost:1:abc", host="ghost", pid=1, queues=("slow-lease",), runtime="thread",
        concurrency=1,
    )  # fmt: skip
    app.store.worker_register(ghost, now=app.store.now() - 120)
    [claimed] = app.store.job_claim(ClaimParams(queues=["slow-lease"], worker_id=ghost.id))
    worker = drain(app)
    done = job(app, job_id)
    assert (done.state, done.result) == (JobState.DONE, 2)  # not after the 1 h lease
    states = {w.id: w.state for w in app.workers()}
    assert states == {ghost.id: "dead", worker.id: "stopped"}
    assert app.store.job_complete([crawlq.stores.base.Completion(lease=claimed.lease)]) == [False]


def test_an_idle_worker_names_unserved_queues_with_due_jobs_once(
    app: App, caplog: pytest.LogCaptureFixture
) -> None:
    @app.task(name="mine")
    def mine(ctx: JobContext) -> None:
        pass

    app.schedule_many([dataclasses.replace(mine.spec(), queue="elsewhere") for _ in range(2)])
    worker = Worker(app, WorkerSettings(poll_timeout=0.02))
    with caplog.at_level(logging.INFO, logger="crawlq.worker"):
        thread = run_in_thread(worker)
        time.sleep(0.5)  # some 25 idle polls
        worker.stop()
        thread.join(10)
    said = [r for r in caplog.records if "queues it does not serve" in r.getMessage()]
    assert [(r.levelname, r.getMessage().split(": ", 1)[1]) for r in said] == [
        ("WARNING", "elsewhere (2 due). A worker takes jobs only from its app's task queues "
         "or --queue; a task scheduled under another name (see 'Task names' in the README) "
         "is never claimed here"),
    ]  # fmt: skip


def test_burst_waits_for_jobs_behind_max_running_and_leaves_a_long_block(app: App) -> None:
    """Jobs of a key at max_running wait behind a job running elsewhere (here a worker
    that vanished: its lease runs out in 0.5 s): the burst worker waits and runs them. A
    key blocked for an hour is outside action's business: the worker exits at once."""

    @app.task(name="hosted", lease=0.5)
    def hosted(ctx: JobContext, n: int) -> int:
        return n

    app.set_limit("busy", max_running=1)
    busy = [r.job_id for r in app.schedule_many(hosted.spec(i, limit_key="busy") for i in range(3))]
    app.store.job_claim(ClaimParams(queues=("hosted",), worker_id="gone", limit=1))
    hosted.schedule(9, limit_key="blocked")
    app.store.limit_block("blocked", app.store.now() + 3600)
    started = time.monotonic()
    worker = drain(app)
    assert time.monotonic() - started < 10
    assert worker.counters.done == 3
    assert [job(app, i).state for i in busy] == [JobState.DONE] * 3
    [blocked] = app.store.job_list(JobFilter(task="hosted", state=JobState.PENDING))
    assert blocked.limit_key == "blocked"
