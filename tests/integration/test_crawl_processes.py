"""Crawls and limits with real worker processes on every store.

- 1,000 crawls (``CRAWLQ_TEST_CRAWLS``) of 1 to 50 jobs, a fifth of which add two
  children and a few of which always fail, under random SIGKILLs of the workers: every
  crawl finishes exactly once, never before its last job ended (the tasks keep a ledger),
  with the right done and dead counts.
- A key with max_running=1 and min_interval=0.5 s, four workers: its jobs never overlap
  and start at least 0.49 s apart, while jobs of other keys keep flowing.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import crawlq
from crawlq import CrawlState, JobState
from crawlq.stores.base import JobFilter
from tests.integration.conftest import Processes, wait_until

TASKS = """
    import os, time
    import crawlq

    app = crawlq.App(os.environ["CRAWLQ_STORE"])

    def note(*fields):
        with open(f"ledger-{os.getpid()}.log", "a") as f:
            f.write(" ".join(str(x) for x in fields) + "\\n")

    @app.task(name="page", lease=1.0, max_attempts=30)
    def page(ctx, crawl_no, kids, seconds):
        note("start", ctx.crawl_id, ctx.job_id, time.time())
        for i in range(kids):
            ctx.schedule(page, crawl_no, 0, seconds)
        time.sleep(seconds)
        note("end", ctx.crawl_id, ctx.job_id, time.time())

    @app.task(name="poison", lease=1.0, max_attempts=2, backoff=crawlq.Backoff(base=0.0))
    def poison(ctx, crawl_no):
        note("poison", ctx.crawl_id, ctx.job_id, time.time())
        raise RuntimeError("this page always fails")

    @app.task(name="finished", lease=5.0, max_attempts=30)
    def finished(ctx, crawl_id):
        note("finish", crawl_id, ctx.job_id, time.time())

    @app.task(name="polite", lease=5.0)
    def polite(ctx, n, seconds):
        note("start", ctx.limit_key, ctx.job_id, time.time())
        time.sleep(seconds)
        note("end", ctx.limit_key, ctx.job_id, time.time())
"""


def ledger(workdir: Path) -> list[tuple[str, str, int, float]]:
    """Every ledger line as (what, crawl id or limit key, job id, time)."""
    rows = []
    for path in workdir.glob("ledger-*.log"):
        for line in path.read_text().splitlines():
            what, owner, job_id, at = line.split()
            rows.append((what, owner, int(job_id), float(at)))
    return rows


def worker(procs: Processes, n: int, *extra: str) -> subprocess.Popen[str]:
    return procs.crawlq(
        "worker", "--app", "crawltasks:app", "--concurrency", "4", *extra, log=f"w{n}.err"
    )


def test_a_thousand_crawls_under_sigkill_each_finish_once_and_never_early(
    procs: Processes,
) -> None:
    procs.write_module("crawltasks", TASKS)
    app = crawlq.App(procs.store_url)
    page = app.task(name="page", lease=1.0, max_attempts=30)(lambda ctx, c, k, s: None)
    poison = app.task(name="poison", lease=1.0, max_attempts=2)(lambda ctx, c: None)
    finished = app.task(name="finished", lease=5.0, max_attempts=30)(lambda ctx, crawl_id: None)
    rng = random.Random(6)
    count = int(os.environ.get("CRAWLQ_TEST_CRAWLS", "1000"))
    expected: dict[int, tuple[int, int]] = {}  # crawl id -> (done, dead)
    for c in range(count):
        size = rng.randint(1, 50)
        specs, done, dead = [], 0, 0
        for _ in range(size):
            if rng.random() < 0.02:
                specs.append(poison.spec(c))
                dead += 1
            else:
                kids = 2 if rng.random() < 0.2 else 0
                specs.append(page.spec(c, kids, 0.0))
                done += 1 + kids
        info = app.crawl(f"crawl-{c}", specs, on_finish=finished)
        expected[info.id] = (done, dead)

    workers = [worker(procs, i) for i in range(3)]
    kills = 0
    chaos_for = float(os.environ.get("CRAWLQ_TEST_CHAOS_SECONDS", "20"))
    deadline = time.monotonic() + chaos_for
    while time.monotonic() < deadline and any(
        app.get_crawl(i).state is CrawlState.RUNNING for i in list(expected)[-50:]
    ):
        time.sleep(1.5)
        victim = rng.choice(workers)
        victim.send_signal(signal.SIGKILL)
        victim.wait(10)
        kills += 1
        workers.remove(victim)
        workers.append(worker(procs, 3 + kills))

    def all_finished() -> bool:
        return all(c.state is CrawlState.FINISHED for c in app.crawls(limit=count + 10))

    wait_until(all_finished, timeout=300, what="every crawl to finish")
    wait_until(
        lambda: all(
            (j := app.get_job(c.on_finish_job or 0)) is not None and j.state is JobState.DONE
            for c in app.crawls(limit=count + 10)
        ),
        timeout=120,
        what="every on_finish job to be done",
    )
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)

    rows = ledger(procs.workdir)
    last_end: dict[str, float] = defaultdict(float)
    for what, crawl, _job, at in rows:
        if what in ("end", "poison"):
            last_end[crawl] = max(last_end[crawl], at)
    first_finish: dict[str, float] = {}
    for what, crawl, _job, at in sorted(rows, key=lambda r: r[3]):
        if what == "finish":
            first_finish.setdefault(crawl, at)

    on_finish_jobs = app.store.job_list(JobFilter(task="finished"))
    per_crawl = defaultdict(list)
    for job in on_finish_jobs:
        per_crawl[job.kwargs["crawl_id"]].append(job.id)
    wrong = []
    for crawl_id, (done, dead) in expected.items():
        info = app.get_crawl(crawl_id)
        if (info.done, info.dead, info.pending, info.running) != (done, dead, 0, 0):
            wrong.append((crawl_id, "counters", info, done, dead))
        if per_crawl[crawl_id] != [info.on_finish_job]:
            wrong.append((crawl_id, "on_finish jobs", per_crawl[crawl_id]))
        if first_finish[str(crawl_id)] < last_end[str(crawl_id)]:
            wrong.append((crawl_id, "finished early", first_finish, last_end[str(crawl_id)]))
    assert wrong == [], wrong[:5]
    assert kills >= 1
    app.close()


def test_a_limited_key_never_overlaps_and_keeps_its_interval_while_others_flow(
    procs: Processes,
) -> None:
    procs.write_module("crawltasks", TASKS)
    app = crawlq.App(procs.store_url)
    polite = app.task(name="polite", lease=5.0)(lambda ctx, n, s: None)
    app.set_limit("slow.example", max_running=1, min_interval=0.3)
    slow = [polite.spec(i, 0.05, limit_key="slow.example") for i in range(50)]
    others = [polite.spec(i, 0.05, limit_key=f"host{i % 20}.example") for i in range(400)]
    app.schedule_many(slow + others)
    started = time.time()
    workers = [worker(procs, i) for i in range(4)]
    wait_until(
        lambda: sum(s.done for s in app.stats()) == 450, timeout=120, what="every job to finish"
    )
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    rows = ledger(procs.workdir)
    runs: dict[int, list[float]] = defaultdict(list)
    for _what, key, job_id, at in rows:
        if key == "slow.example":
            runs[job_id].append(at)
    assert len(runs) == 50
    spans = sorted((min(times), max(times)) for times in runs.values())
    overlaps = [(a, b) for a, b in itertools.pairwise(spans) if b[0] < a[1]]
    assert overlaps == []
    # starts as the store saw them (the claim), on its own clock
    claims = sorted(app.get_job(job_id).started_at or 0.0 for job_id in runs)  # type: ignore[union-attr]
    gaps = [b - a for a, b in itertools.pairwise(claims)]
    assert min(gaps) >= 0.29, sorted(gaps)[:5]
    other_ends = [at for what, key, _j, at in rows if what == "end" and key != "slow.example"]
    # the 400 other jobs are not held up behind the slow key (it takes 15 s on its own)
    assert len(other_ends) == 400 and max(other_ends) - started < 10, max(other_ends) - started
    app.close()
