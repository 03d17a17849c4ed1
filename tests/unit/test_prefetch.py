"""The worker's prefetch: the auto rule, the leases a worker holds beyond its slots by
its jobs' run times, and runtimes that never run more than their slots."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import threading
import time
from typing import Any

import pytest
from click.testing import CliRunner

import crawlq
from crawlq import App, JobContext, Worker, WorkerSettings
from crawlq.cli import cli
from crawlq.stores.gate import JobGate
from crawlq.worker.prefetch import HORIZON, MOST, PER_SLOT, Prefetch
from tests.unit.test_worker import drain

# -- the rule ----------------------------------------------------------------------------


def test_auto_prefetches_nothing_before_a_job_has_run() -> None:
    assert Prefetch("auto", 8).extra() == 0


def test_auto_prefetch_follows_the_run_time_within_its_bound() -> None:
    prefetch = Prefetch("auto", 8)
    assert prefetch.most == PER_SLOT * 8
    prefetch.ran(0.0001)
    assert prefetch.extra() == PER_SLOT * 8  # 800 would start within the horizon
    for _ in range(60):
        prefetch.ran(HORIZON * 8 / 4)  # each slot starts one every 2.5 ms
    assert prefetch.extra() == 4
    for _ in range(60):
        prefetch.ran(1.0)
    assert prefetch.extra() == 0
    assert Prefetch("auto", 1000).most == MOST


def test_a_fixed_prefetch_ignores_run_times() -> None:
    prefetch = Prefetch(5, 8)
    assert prefetch.extra() == 5
    prefetch.ran(30.0)
    assert prefetch.extra() == 5
    assert prefetch.describe() == "prefetch 5"
    assert Prefetch("auto", 8).describe() == "prefetch auto (up to 24)"


def test_a_claim_waits_for_the_prefetch_room_only_when_a_batch_outruns_a_round_trip() -> None:
    prefetch = Prefetch("auto", 8, batches=True)
    assert prefetch.room(24) == 1  # nothing measured yet: claim for any free slot
    prefetch.ran(0.00001)
    assert prefetch.room(24) == 1  # no claim timed yet
    prefetch.claimed(0.001)
    # 32 jobs of 10 µs on 8 slots: 40 µs, well within the 1 ms round trip
    assert prefetch.room(24) == 24
    assert prefetch.room(0) == 1  # no prefetch: every free slot is worth a claim
    for _ in range(60):
        prefetch.ran(0.0005)  # 32 jobs of 0.5 ms on 8 slots: 2 ms, over the round trip
    assert prefetch.room(24) == 1
    for _ in range(60):
        prefetch.claimed(0.005)  # a slower store: a batch runs within its round trip
    assert prefetch.room(24) == 24


def test_a_store_whose_calls_cost_little_is_claimed_from_for_any_free_slot() -> None:
    prefetch = Prefetch("auto", 8)  # batches=False: SQLite, Redis
    prefetch.ran(0.00001)
    prefetch.claimed(0.001)
    assert prefetch.room(24) == 1


@pytest.mark.parametrize("value", [-1, 10_001, "x", 2.5, True, None])
def test_a_bad_prefetch_is_refused_in_one_line(value: object) -> None:
    with pytest.raises(crawlq.ConfigurationError, match='prefetch must be "auto" or a whole'):
        WorkerSettings(prefetch=value)  # type: ignore[arg-type]


def test_the_cli_takes_auto_or_a_number() -> None:
    result = CliRunner().invoke(cli, ["worker", "--prefetch", "lots"])
    assert result.exit_code == 2
    assert 'prefetch must be "auto" or a whole number from 0 to 10000' in result.output
    assert "Traceback" not in result.output


# -- the worker --------------------------------------------------------------------------


def running_peak(app: App, slots: int, jobs: int, sleep: float, **settings: object) -> int:
    """The most jobs the store had running (leased) while a burst worker with ``slots``
    slots ran ``jobs`` jobs that each sleep ``sleep`` s, as its jobs saw it."""
    peak = 0
    lock = threading.Lock()

    @app.task(name="work")
    def work(ctx: JobContext, i: int) -> None:
        nonlocal peak
        if sleep:
            time.sleep(sleep)
        running = sum(s.running for s in app.stats())
        with lock:
            peak = max(peak, running)

    work.schedule_many([[i] for i in range(jobs)])
    worker = drain(app, concurrency=slots, **settings)
    assert worker.counters.done == jobs
    return peak


def test_a_worker_of_short_jobs_leases_ahead_of_its_slots(app: App) -> None:
    assert running_peak(app, 2, 300, 0.0) > 2


def test_a_worker_of_long_jobs_leases_only_for_its_slots(app: App) -> None:
    # 2 slots, 50 ms jobs: a prefetched job would wait 25 ms, past the 10 ms horizon
    assert running_peak(app, 2, 12, 0.05) == 2


def test_prefetch_zero_leases_only_for_the_slots(app: App) -> None:
    assert running_peak(app, 2, 300, 0.0, prefetch=0) == 2


def test_the_asyncio_runtime_runs_no_more_than_its_slots_with_a_prefetch(app: App) -> None:
    in_flight = peak = 0

    @app.task(name="fetch")
    async def fetch(ctx: JobContext, i: int) -> int:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return i

    fetch.schedule_many([[i] for i in range(40)])
    worker = drain(app, runtime="asyncio", concurrency=3, prefetch=10)
    assert worker.counters.done == 40
    assert peak == 3


def test_a_stopped_asyncio_worker_releases_its_prefetched_jobs(app: App) -> None:
    started = threading.Event()

    @app.task(name="slow")
    async def slow(ctx: JobContext, i: int) -> None:
        started.set()
        await asyncio.sleep(0.3)

    slow.schedule_many([[i] for i in range(10)])
    worker = Worker(app, WorkerSettings(runtime="asyncio", concurrency=2, prefetch=6))
    thread = threading.Thread(target=worker.run)
    thread.start()
    assert started.wait(10)
    worker.stop()
    thread.join(10)
    assert worker.counters.done == 2
    assert worker.counters.released == 6
    [stats] = app.stats()
    assert (stats.done, stats.pending, stats.running) == (2, 8, 0)


def test_a_burst_worker_exits_when_its_last_job_ends_not_after_a_poll(app: App) -> None:
    @app.task(name="last")
    def last(ctx: JobContext) -> None:
        time.sleep(0.2)

    last.schedule()
    began = time.monotonic()
    worker = Worker(app, WorkerSettings(burst=True, concurrency=4, poll_timeout=10))
    worker.run()
    assert worker.counters.done == 1
    assert time.monotonic() - began < 5  # it waited in the store for 10 s before


def test_a_worker_waiting_for_its_prefetch_room_is_not_held_up_by_a_long_job(
    app: App, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store whose calls cost more than their jobs (PostgreSQL's capability, given to
    # this SQLite store) and short jobs: the worker waits for its prefetch's room before
    # it claims. A long job keeps one slot; the other slot's jobs still free the room,
    # so the worker never waits for its poll timeout, and every job is done once.
    capabilities = dataclasses.replace(app.store.capabilities, batched_claims=True)
    monkeypatch.setattr(type(app.store), "capabilities", capabilities)
    out = tmp_path / "out"

    @app.task(name="short")
    def short(ctx: JobContext, i: int) -> None:
        if i == 0:
            time.sleep(0.5)
        with open(out, "a") as f:
            f.write(f"{i}\n")

    short.schedule_many([[i] for i in range(600)])
    began = time.monotonic()
    worker = Worker(app, WorkerSettings(burst=True, concurrency=2, poll_timeout=30))
    worker.run()
    assert worker.counters.done == 600
    assert time.monotonic() - began < 15
    assert sorted(map(int, out.read_text().split())) == list(range(600))


def test_a_worker_with_every_slot_busy_records_ends_in_its_claims(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A key at its cap: the prefetch finds nothing more. The worker then waits for a job
    # to end and records it in the next claim's round trip, which takes the key's next
    # job; it does not wait for work in the store, leaving the ends to the acker.
    calls: collections.Counter[str] = collections.Counter()
    for name in ("job_complete", "job_complete_claim", "job_wait_claim"):
        real = getattr(JobGate, name)

        def counted(self: JobGate, *args: Any, _name: str = name, _real: Any = real) -> Any:
            calls[_name] += 1 if _name == "job_wait_claim" else len(args[0])  # ends recorded
            return _real(self, *args)

        monkeypatch.setattr(JobGate, name, counted)
    app.set_limit("site.test", max_running=2)

    @app.task(name="fetch")
    def fetch(ctx: JobContext, i: int) -> None:
        time.sleep(0.03)

    fetch.with_options(limit_key="site.test").schedule_many([[i] for i in range(12)])
    worker = Worker(app, WorkerSettings(concurrency=2, prefetch=4, poll_timeout=0.5))
    thread = threading.Thread(target=worker.run)
    thread.start()
    deadline = time.monotonic() + 20
    while sum(s.done for s in app.stats()) < 12 and time.monotonic() < deadline:
        time.sleep(0.01)
    worker.stop()
    thread.join(10)
    assert worker.counters.done == 12
    # (the last ends may find a slot free, the worker waiting in the store, the acker
    # recording them)
    assert calls["job_complete_claim"] >= 10, calls
    assert calls["job_complete"] <= 2, calls
    assert calls["job_wait_claim"] <= 3, calls
