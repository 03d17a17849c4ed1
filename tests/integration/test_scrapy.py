"""crawlq.scrapy with real ``scrapy crawl`` processes against the generated test site, on
every store: several processes share one crawl, a killed one loses nothing, seeding is
idempotent, politeness holds across processes, delayed requests come on time, and
unserialisable requests are refused loudly."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("scrapy")

from crawlq.app import App
from crawlq.crawls import CrawlState
from crawlq.stores.base import JobFilter
from tests.crawlsite import CrawlSite, SiteSpec
from tests.integration.conftest import wait_until
from tests.integration.scrapy_project import read_jsonl, scrapy_argv, write_project

# a site with nothing Scrapy and crawlq would treat differently: no redirects (Scrapy
# dedups a redirect's target), no hangs, errors, files or other schemes
SITE = SiteSpec(
    pages=120,
    hang=False,
    bombs=False,
    files=False,
    huge_bytes=0,
    redirects=False,
    errors=False,
    flaky_failures=0,
    offsite=False,
    other_schemes=False,
    slow_pages=0,
    base_pages=0,
)


@dataclass
class Run:
    """Scrapy processes of one test, all writing into ``out``."""

    out: Path
    project: Path
    site: CrawlSite
    store_url: str
    procs: list[subprocess.Popen[bytes]]

    def start(self, *settings: str, extra: list[dict[str, object]] | None = None) -> int:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
        env.update(SITE_URL=self.site.url, SITE_OUT=str(self.out))
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        if extra:
            env["SITE_EXTRA"] = json.dumps(extra)
        argv = scrapy_argv(f"CRAWLQ_STORE={self.store_url}", *settings)
        index = len(self.procs)
        with open(self.out / f"scrapy-{index}.log", "w") as log:
            self.procs.append(
                subprocess.Popen(argv, cwd=self.project, env=env, stdout=log, stderr=log)
            )
        return index

    def wait(self, timeout: float = 60) -> list[int]:
        deadline = time.monotonic() + timeout
        codes = []
        for proc in self.procs:
            codes.append(proc.wait(max(1.0, deadline - time.monotonic())))
        return codes

    def log(self, index: int) -> str:
        return (self.out / f"scrapy-{index}.log").read_text()

    def callbacks(self) -> Counter[str]:
        return Counter(str(c["url"]) for c in read_jsonl(self.out / "callbacks.jsonl"))

    def closed(self) -> list[dict[str, object]]:
        return read_jsonl(self.out / "closed.jsonl")

    def crawls(self) -> list[tuple[str, CrawlState]]:
        app = App(self.store_url)
        try:
            return [(c.name, c.state) for c in app.crawls()]
        finally:
            app.close()


@pytest.fixture
def run(tmp_path: Path, store_url: str) -> Iterator[Run]:
    site = CrawlSite(SITE).start()
    out = tmp_path / "out"
    out.mkdir()
    runs = Run(out, write_project(tmp_path), site, store_url, [])
    yield runs
    for proc in runs.procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    site.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The paths Scrapy's own scheduler, in one process, fetches on the site: the page set
    every crawlq run must find."""
    tmp = tmp_path_factory.mktemp("reference")
    out = tmp / "out"
    out.mkdir()
    site = CrawlSite(SITE).start()
    try:
        ref = Run(out, write_project(tmp), site, "sqlite:///unused.db", [])
        ref.start("SCHEDULER=scrapy.core.scheduler.Scheduler")
        assert ref.wait() == [0], ref.log(0)
        return set(site.fetch_counts())
    finally:
        site.close()


def paths(urls: Counter[str], site: CrawlSite) -> Counter[str]:
    return Counter({u.removeprefix(site.origin): n for u, n in urls.items()})


def assert_finished_once(run: Run, processes: int) -> None:
    reasons = [c["reason"] for c in run.closed()]
    assert reasons == ["finished"] * processes, [run.log(i)[-2000:] for i in range(processes)]
    assert run.crawls() == [("site", CrawlState.FINISHED)]


def test_three_processes_share_one_crawl(run: Run, reference: set[str]) -> None:
    for _ in range(3):
        run.start()
    assert run.wait() == [0, 0, 0]
    fetched = run.site.fetch_counts()
    assert set(fetched) == reference
    assert max(fetched.values()) == 1, [p for p, n in fetched.items() if n > 1]
    callbacks = run.callbacks()
    assert max(callbacks.values()) == 1
    assert len(callbacks) == len(reference) - 5  # the 404s reach no callback
    assert_finished_once(run, 3)
    pids = {c["pid"] for c in read_jsonl(run.out / "callbacks.jsonl")}
    assert len(pids) >= 2  # the work was shared


def test_kill_one_process_mid_crawl_loses_nothing(run: Run, reference: set[str]) -> None:
    slow = ('CRAWLQ_HOST_LIMITS={"min_interval": 0.02}', "CONCURRENT_REQUESTS=4")
    run.start(*slow)
    victim = run.start(*slow)
    wait_until(lambda: sum(run.callbacks().values()) >= 30, 30, "30 pages crawled")
    run.procs[victim].send_signal(signal.SIGKILL)
    run.procs[victim].wait(10)
    before = run.callbacks()
    run.start(*slow)
    codes = run.wait()
    assert codes[victim] == -signal.SIGKILL, run.log(victim)[-2000:]
    assert [c for i, c in enumerate(codes) if i != victim] == [0, 0]
    fetched = run.site.fetch_counts()
    assert set(fetched) == reference  # nothing lost
    again = [p for p, n in fetched.items() if n > 1]
    assert len(again) <= 4 + 2  # at most the killed process's leased requests
    assert set(paths(run.callbacks(), run.site)) >= set(paths(before, run.site))
    reasons = [c["reason"] for c in run.closed()]
    assert reasons == ["finished", "finished"]
    assert run.crawls() == [("site", CrawlState.FINISHED)]


def test_five_processes_seed_the_crawl_once(run: Run) -> None:
    for _ in range(5):
        run.start("CLOSESPIDER_PAGECOUNT=0")
    assert run.wait() == [0] * 5
    assert run.site.fetch_counts()["/"] == 1
    assert_finished_once(run, 5)


def test_politeness_holds_across_processes(run: Run) -> None:
    limits = 'CRAWLQ_HOST_LIMITS={"max_running": 1, "min_interval": 0.2}'
    for _ in range(3):
        run.start(limits, "CLOSESPIDER_PAGECOUNT=12")
    assert run.wait(90) == [0, 0, 0]
    log = sorted(run.site.log, key=lambda r: r.started)
    assert len(log) >= 12
    connections = {r.thread for r in log}
    assert len(connections) >= 2  # more than one process fetched
    opened: set[int] = set()
    gaps = []
    for first, second in itertools.pairwise(log):
        assert second.started >= first.finished, "two fetches overlapped"
        gap = second.started - first.started
        gaps.append(gap)
        # the store spaces the claims by 0.2 s exactly; a fetch starts after its claim by
        # the hand-over to Scrapy, a few ms (tens on a loaded machine, and for the first
        # request of a new connection): docs/scrapy.md, "Limits"
        assert gap >= (0.17 if first.thread in opened else 0.14), (first, second)
        opened.add(first.thread)
    assert sorted(gaps)[len(gaps) // 10] >= 0.19  # nine in ten at least


def test_delayed_request_is_fetched_when_due(run: Run) -> None:
    target = run.site.url_for("/p/100000")  # unknown to the site: linked from nowhere
    extra: list[dict[str, object]] = [{"kind": "delayed", "url": target, "delay": 1.5}]
    run.start(extra=extra)
    assert run.wait() == [0]
    events = read_jsonl(run.out / "delayed.jsonl")
    fetched = next(float(e["fetched"]) for e in events if "fetched" in e)  # type: ignore[arg-type]
    app = App(run.store_url)
    try:
        jobs = app.store.job_list(JobFilter(queue="scrapy:site"))
        [job] = [j for j in jobs if target in str(j.args)]
    finally:
        app.close()
    enqueued = next(float(e["enqueued"]) for e in events if "enqueued" in e)  # type: ignore[arg-type]
    # due 1.5 s after it was stored; a claimed job's run_at is when its host let it start,
    # which the politeness gate after the previous page can make a little later (2.01 s
    # once, in a full suite run on a loaded machine)
    assert 1.5 <= job.run_at - enqueued <= 1.5 + 1.0
    assert 0 <= fetched - job.run_at <= 0.5  # not at the engine's 5-second heartbeat
    assert_finished_once(run, 1)


def test_unserialisable_request_is_refused_and_counted(run: Run) -> None:
    run.start(extra=[{"kind": "lambda", "url": run.site.url_for("/p/100001")}])
    assert run.wait() == [0]
    assert "cannot be stored as JSON" in run.log(0)
    [closed] = run.closed()
    assert closed["stats"]["crawlq/unserializable"] == 1  # type: ignore[index]
    assert_finished_once(run, 1)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_cli_pauses_resumes_and_cancels_a_scrapy_crawl(run: Run) -> None:
    slow = ('CRAWLQ_HOST_LIMITS={"min_interval": 0.05}', "CONCURRENT_REQUESTS=2")
    run.start(*slow)
    run.start(*slow)
    wait_until(lambda: sum(run.callbacks().values()) >= 10, 30, "10 pages crawled")

    def crawlq(*args: str) -> str:
        argv = [sys.executable, "-m", "crawlq", "--store", run.store_url, *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True)
        return done.stdout

    assert "site" in crawlq("crawls")
    app = App(run.store_url)
    crawl_id = str(app.crawls()[0].id)
    app.close()
    crawlq("crawl-pause", crawl_id)
    time.sleep(0.5)  # requests in flight finish
    held = len(run.site.log)
    time.sleep(1.0)
    assert len(run.site.log) == held  # no process takes a new request
    assert [p.poll() for p in run.procs] == [None, None]  # and none closes
    assert "paused" in crawlq("crawl-status", crawl_id)
    crawlq("crawl-resume", crawl_id)
    wait_until(lambda: len(run.site.log) > held, 10, "fetching again")
    crawlq("crawl-cancel", crawl_id)
    assert run.wait(30) == [0, 0]
    assert [c["reason"] for c in run.closed()] == ["cancelled", "cancelled"]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_dupefilter_alone_keeps_the_seen_set_across_runs(run: Run, reference: set[str]) -> None:
    alone = (
        "SCHEDULER=scrapy.core.scheduler.Scheduler",
        "DUPEFILTER_CLASS=crawlq.scrapy.DupeFilter",
    )
    run.start(*alone)
    assert run.wait() == [0]
    assert set(run.site.fetch_counts()) == reference
    run.site.reset_log()
    run.start(*alone)  # a second run: every page is in the store's seen set already
    assert run.wait() == [0, 0]
    assert run.site.fetch_counts() == {"/": 1}  # the start URL (dont_filter) only
