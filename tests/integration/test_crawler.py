"""``crawlq crawl`` as a user runs it, against the generated site of tests/crawlsite.py.

Every crawl here is a real ``python -m crawlq`` process on a real store; the site's
model (not a crawl) says what must be found, and the site's request log says what was
fetched and when.
"""

from __future__ import annotations

import itertools
import json
import signal
import statistics
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crawlq.crawler.records import ROBOTS_DISALLOWED
from crawlq.fingerprint import canonical_url
from tests import crawlsite
from tests.crawlsite import PRIVATE_SPELLINGS, CrawlSite, ExpectedCrawl, Sentinel, SiteSpec
from tests.integration.conftest import Processes, wait_until

crawl_site = crawlsite.crawl_site

RETRIES = 2
FAST = ["--allow-private", "--delay", "0", "--timeout", "1", "--retries", str(RETRIES)]


def run(procs: Processes, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*procs.argv("crawl"), *args],
        cwd=procs.workdir,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def by_url(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    pages = {canonical_url(r["url"]): r for r in found}
    assert len(pages) == len(found), "a URL was recorded twice"
    return pages


def assert_matches(found: dict[str, dict[str, Any]], expected: ExpectedCrawl) -> None:
    """Every record is what the site's model says for its URL."""
    assert set(found) == expected.urls
    for url, page in expected.pages.items():
        record = found[url]
        assert record["depth"] >= page.depth, url  # a longer path may be met first
        outcome = page.outcome
        if outcome == "robots-disallowed":
            assert record["error"] == ROBOTS_DISALLOWED, url
            continue
        if outcome in ("ok", "not-found", "server-error"):
            assert record["error"] is None, (url, record["error"])
            assert record["status"] == page.status, url
            assert canonical_url(record["final_url"]) == page.final_url, url
            assert record["content_type"] == page.content_type, url
            if page.parsed:
                assert record["title"] == page.title, url
                assert len(record["sha256"]) == 64
            continue
        prefix = {
            "redirect-loop": "redirect loop",
            "too-many-redirects": "too many redirects",
            "timeout": "deadline",
        }.get(outcome, page.error)
        assert prefix is not None, outcome
        assert (record["error"] or "").startswith(prefix), (url, record["error"])


def expected_requests(expected: ExpectedCrawl, retries: int) -> Counter[str]:
    """Server requests: each URL once, plus every retry of what fails every time."""
    counts = expected.requests()
    for page in expected.pages.values():
        if page.outcome in ("server-error", "timeout"):
            for path in page.requested:
                counts[path] += retries
    return counts


def test_a_crawl_finds_exactly_the_site_and_fetches_each_url_once(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SiteSpec(pages=2000))
    out = procs.workdir / "pages.jsonl"
    result = run(
        procs, site.url, *FAST, "--host-concurrency", "8", "--concurrency", "16",
        "-o", str(out), "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "finished" in result.stderr
    expected = site.expected()
    found = by_url(records(out))
    assert_matches(found, expected)
    assert len(found) > 2000
    counts = site.fetch_counts()
    assert counts == expected_requests(expected, RETRIES)
    assert counts["/robots.txt"] == 1
    assert not [path for path in counts if path.startswith("/trap/")]
    user_agents = {r.user_agent for r in site.log}
    assert len(user_agents) == 1 and next(iter(user_agents)).startswith("crawlq/")
    assert_host_blocked_after_retry_after(site)
    exported = run_export(procs, 1)
    assert by_url([json.loads(line) for line in exported.splitlines()]) == found


def assert_host_blocked_after_retry_after(site: CrawlSite) -> None:
    """A 429 or 503 with Retry-After: 1 blocks the host on every worker: no page job
    starts in the second after it (pages already running go on; a margin of 0.2 s on
    each side covers a request reaching the server some ms after its job started)."""
    blocks = [r.finished for r in site.log if r.status in (429, 503)]
    assert blocks
    for end in blocks:
        inside = [
            r.path
            for r in site.log
            if r.path.startswith("/p/") and end + 0.2 < r.started < end + 0.8
        ]
        assert not inside, inside


def run_export(procs: Processes, crawl_id: int) -> str:
    result = subprocess.run(
        [*procs.argv("crawl-export"), str(crawl_id)],
        cwd=procs.workdir,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout


def test_every_private_address_spelling_is_refused_with_no_connection(
    procs: Processes,
) -> None:
    sentinel = Sentinel().start()
    try:
        urls = [u.format(port=sentinel.port) for u in PRIVATE_SPELLINGS]
        assert len(urls) >= 50
        out = procs.workdir / "pages.jsonl"
        result = run(procs, *urls, "--delay", "0", "-o", str(out), "--no-progress")
        assert result.returncode == 3, result.stderr
        assert "no page could be fetched" in result.stderr
        found = records(out)
        assert len(found) == len({canonical_url(u) for u in urls})
        assert all(r["error"].startswith("refused:") for r in found), [
            r for r in found if not r["error"].startswith("refused:")
        ]
        assert sentinel.connections == 0
    finally:
        sentinel.close()


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_politeness_holds_across_two_processes_and_robots_crawl_delay(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    """Two processes work one crawl: never more than --host-concurrency fetches at once,
    starts the robots.txt Crawl-delay apart (longer than --delay). The store spaces the
    job starts; a request reaches the server a few ms to tens of ms after its job starts
    (more for a process's first page, which reads the crawl's settings), so the gaps
    the server sees are allowed 0.1 s of jitter, and their median is the delay."""
    site = crawl_site(  # one request per page: no redirect hops, no retries
        SiteSpec(
            pages=30, links_per_page=3, crawl_delay=0.25, redirects=False, errors=False,
            bombs=False, hang=False, slow_pages=2,
        )
    )  # fmt: skip
    spec = site.model.spec
    assert spec.crawl_delay == 0.25
    args = [
        site.url, "--allow-private", "--timeout", "5", "--retries", "0",
        "--host-concurrency", "2", "--delay", "0.05", "--max-depth", "2", "--no-progress",
    ]  # fmt: skip
    detached = run(procs, *args, "--detach")
    assert detached.returncode == 0, detached.stderr
    helper = procs.crawlq("worker", "--runtime", "asyncio", "--concurrency", "4", log="w.log")
    try:
        result = run(procs, *args, "-o", str(procs.workdir / "p.jsonl"))
        assert result.returncode == 0, result.stderr
        assert "resuming crawl 1" in result.stderr
    finally:
        helper.send_signal(signal.SIGTERM)
        helper.wait(30)
    assert site.fetch_counts()["/robots.txt"] == 1, "robots.txt is shared through the store"
    pages = [r for r in site.log if r.path != "/robots.txt"]
    assert len(pages) >= 10
    starts = sorted(r.started for r in pages)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 0.25 - 0.1, sorted(gaps)[:5]
    assert statistics.median(gaps) >= 0.25 - 0.01, sorted(gaps)
    events = sorted([(r.started, 1) for r in pages] + [(r.finished, -1) for r in pages])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak <= 2


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_an_unavailable_robots_txt_disallows_the_site_until_it_answers(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    """robots.txt answering 500: nothing is fetched but robots.txt itself (Google's rule),
    the start page is retried and recorded with the reason, and the crawl finishes."""
    site = crawl_site(SiteSpec(pages=20, robots_mode="500"))
    out = procs.workdir / "pages.jsonl"
    result = run(procs, site.url, *FAST, "-o", str(out), "--no-progress")
    assert result.returncode == 3, result.stderr
    found = records(out)
    assert [(r["url"], r["error"]) for r in found] == [(site.url, "robots.txt unavailable (500)")]
    assert set(site.fetch_counts()) == {"/robots.txt"}


def wait_for_records(path: Path, n: int, proc: subprocess.Popen[str]) -> None:
    def enough() -> bool:
        assert proc.poll() is None, "the crawl ended before it could be stopped"
        return path.exists() and len(path.read_text().splitlines()) >= n

    wait_until(enough, 120, f"{n} records in {path.name}")


@pytest.mark.parametrize(
    ("store_url", "how"),
    [
        ("sqlite", "SIGKILL"),
        ("sqlite", "SIGINT"),
        ("sqlite", "SIGTERM"),
        ("postgres", "SIGKILL"),
        ("postgres", "SIGINT"),
        ("redis", "SIGKILL"),
        ("redis", "SIGINT"),
    ],
    indirect=["store_url"],
)
def test_stopped_crawl_resumes_with_the_same_command(
    procs: Processes, crawl_site: Callable[..., CrawlSite], how: str
) -> None:
    site = crawl_site(SiteSpec(pages=600, slow_pages=0, hang=False))
    out = procs.workdir / "pages.jsonl"
    args = [
        site.url, *FAST, "--host-concurrency", "4", "--concurrency", "8",
        "-o", str(out), "--no-progress",
    ]  # fmt: skip
    first = procs.spawn([*procs.argv("crawl"), *args], log="first.log")
    wait_for_records(out, 100, first)
    first.send_signal(getattr(signal, how))
    code = first.wait(60)
    log = (procs.workdir / "first.log").read_text()
    if how != "SIGKILL":
        assert code == 130, log
        assert "run the same command again to resume it" in log
    else:
        assert code == -signal.SIGKILL
    started = time.monotonic()
    again = run(procs, *args)
    assert again.returncode == 0, again.stderr
    assert "resuming crawl 1" in again.stderr
    expected = site.expected()
    found = by_url(records(out))
    assert_matches(found, expected)
    counts = site.fetch_counts()
    wanted = expected_requests(expected, RETRIES)
    twice = {p: n for p, n in counts.items() if n > wanted[p]}
    if how != "SIGKILL":
        assert not twice, twice  # graceful: running pages finished or were released
    else:
        assert len(twice) <= 8 and all(n == wanted[p] + 1 for p, n in twice.items()), twice
        # The pages the killed crawl held are fetched again as soon as the new one starts
        # (it sees the old process gone), not after the 30 s a lapsed heartbeat takes.
        again_at = [site.requests_for(p)[-1].started - started for p in twice]
        assert max(again_at, default=0.0) < 5.0, again_at
        assert time.monotonic() - started < 60.0


@pytest.mark.parametrize("store_url", ["postgres", "redis"], indirect=True)
def test_detached_crawl_runs_on_workers_and_finishes_once(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SiteSpec(pages=500, slow_pages=0, hang=False))
    detached = run(procs, site.url, *FAST, "--host-concurrency", "8", "--detach")
    assert detached.returncode == 0, detached.stderr
    crawl_id = int(detached.stdout.split()[0])
    workers = [
        procs.crawlq("worker", "--runtime", "asyncio", "--concurrency", "8", log=f"w{i}.log")
        for i in range(2)
    ]

    def status() -> dict[str, Any]:
        result = subprocess.run(
            [*procs.argv("crawl-status"), str(crawl_id), "--json"],
            cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
        )  # fmt: skip
        data: dict[str, Any] = json.loads(result.stdout)
        return data

    try:
        wait_until(lambda: status()["state"] == "finished", 180, "the crawl to finish")
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(30)
    info = status()
    expected = site.expected()
    assert info["done"] + info["dead"] == len(expected.urls)
    assert info["pending"] == info["running"] == 0
    found = by_url([json.loads(line) for line in run_export(procs, crawl_id).splitlines()])
    assert_matches(found, expected)
    assert site.fetch_counts() == expected_requests(expected, RETRIES)
    logs = [(procs.workdir / f"w{i}.log").read_text() for i in range(2)]
    assert all("done 0," not in log for log in logs), "both workers took pages"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_closed_stdout_stops_the_crawl_like_ctrl_c(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    """`crawlq crawl ... -o - | head -1`: the reader goes away after one record; the crawl
    stops gracefully (no traceback, running pages finished or released, the store still
    open for the worker) and the same command resumes it."""
    site = crawl_site(SiteSpec(pages=600, slow_pages=0, hang=False))
    args = [site.url, *FAST, "--delay", "0.02", "--no-progress"]
    proc = subprocess.Popen(
        [*procs.argv("crawl"), *args, "-o", "-"],
        cwd=procs.workdir, env=procs.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    assert json.loads(proc.stdout.readline())["url"]
    proc.stdout.close()  # `head -1` exits
    code = proc.wait(60)
    log = proc.stderr.read()
    proc.stderr.close()
    assert code == 130, log
    assert "Traceback" not in log and "closed database" not in log, log
    assert "the output was closed" in log and "run the same command again" in log, log
    status = subprocess.run(
        [*procs.argv("crawl-status"), "1", "--json"],
        cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    info = json.loads(status.stdout)
    assert info["state"] == "running" and info["running"] == 0  # released, resumable
    again = run(procs, *args, "-o", str(procs.workdir / "rest.jsonl"))
    assert again.returncode == 0, again.stderr
    assert "resuming crawl 1" in again.stderr
    assert_matches(by_url(records(procs.workdir / "rest.jsonl")), site.expected())


def test_max_pages_fetches_exactly_that_many_and_drops_the_rest_at_once(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    """--max-pages 5 on a 1,170-page site at the default politeness: 5 records, 5 page
    requests, and no queued page skipped one by one (before: 107 pages were claimed at
    the politeness rate only to be skipped, 27.8 s)."""
    site = crawl_site(  # every page answers at once: one request per page
        SiteSpec(
            pages=1170, links_per_page=8, slow_pages=0, hang=False, errors=False,
            redirects=False, bombs=False, flaky_failures=0,
        )
    )  # fmt: skip
    out = procs.workdir / "pages.jsonl"
    args = ["--allow-private", "--max-pages", "5", "--host-concurrency", "4"]
    result = run(procs, site.url, *args, "-o", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    assert len(by_url(records(out))) == 5
    assert sum(n for path, n in site.fetch_counts().items() if path != "/robots.txt") == 5
    status = subprocess.run(
        [*procs.argv("crawl-status"), "1", "--json"],
        cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    info = json.loads(status.stdout)
    assert info["state"] == "finished"
    assert info["done"] + info["dead"] == 5  # no page job ran only to be skipped
    assert info["pending"] == info["running"] == 0 and info["cancelled"] <= 4
