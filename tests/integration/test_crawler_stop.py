"""Stopping a crawl early: --max-pages and crawl-cancel end ``crawlq crawl`` at once, at
the default politeness, the queued pages dropped in one store operation; and
``crawl-delete`` removes what a crawl left in the store."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests import crawlsite
from tests.crawlsite import CrawlSite, SiteSpec
from tests.integration.conftest import Processes, wait_until
from tests.integration.test_crawler import by_url, records, run

crawl_site = crawlsite.crawl_site

FAST_SITE = SiteSpec(  # every page answers at once: one request per page
    pages=2000, links_per_page=8, slow_pages=0, hang=False, errors=False, redirects=False,
    bombs=False, flaky_failures=0,
)  # fmt: skip


def crawlq(procs: Processes, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        procs.argv(*args), cwd=procs.workdir, env=procs.env(), capture_output=True, text=True,
        timeout=60, check=check,
    )  # fmt: skip


def status(procs: Processes, crawl_id: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(crawlq(procs, "crawl-status", str(crawl_id), "--json").stdout)
    return data


def test_max_pages_5_on_a_2000_page_site_finishes_in_under_2_s_at_the_default_politeness(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    """The default --delay 0.25 spaces the 5 page starts over 1 s; the crawl then ends at
    once: the page that ends as the 5th drops every queued page in one store operation,
    the crawl finishes, the worker stops. From the first request the site sees to the
    exit of the process it takes under 2 s: the 1 s of politeness plus about 0.45 s on
    an idle machine (Python's own start, about 0.4 s, comes before). A loaded machine
    (the suite shares 2 cores with other work) stretches both the page starts and the
    rest, so the test holds the time outside the page starts to 1.5 s (before issue 14:
    27 s of queued links skipped at the politeness rate; before this change: 0.8 s more
    to stop the worker)."""
    site = crawl_site(FAST_SITE)
    out = procs.workdir / "pages.jsonl"
    args = ["--allow-private", "--max-pages", "5", "-o", str(out), "--no-progress"]
    result = run(procs, site.url, *args)
    ended = time.monotonic()
    assert result.returncode == 0, result.stderr
    took = ended - min(r.started for r in site.log)
    pages = sorted(r.started for r in site.log if r.path != "/robots.txt")
    spread = pages[-1] - pages[0]
    assert spread >= 4 * (0.25 - 0.1), "the default politeness holds"
    assert took - spread < 1.5, f"{took:.2f} s from the first request to the exit"
    print(f"--max-pages 5: {took:.2f} s from the first request to the exit")
    assert len(by_url(records(out))) == 5
    assert sum(n for path, n in site.fetch_counts().items() if path != "/robots.txt") == 5
    info = status(procs, 1)
    assert info["state"] == "finished"
    assert info["done"] + info["dead"] == 5, "no page job ran only to be skipped"
    assert info["pending"] == info["running"] == 0
    assert info["cancelled"] <= 4  # links queued by pages ending at the same instant


@pytest.mark.parametrize("store_url", ["sqlite", "redis"], indirect=True)
def test_crawl_cancel_ends_the_running_command_at_once(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(FAST_SITE)
    out = procs.workdir / "pages.jsonl"
    proc = procs.spawn(
        [*procs.argv("crawl"), site.url, "--allow-private", "-o", str(out), "--no-progress"],
        log="crawl.log",
    )
    wait_until(lambda: out.exists() and len(out.read_text().splitlines()) >= 3, 60, "3 pages")
    assert proc.poll() is None
    crawlq(procs, "crawl-cancel", "1")
    cancelled = time.monotonic()  # the crawl is cancelled in the store now
    code = proc.wait(30)
    took = time.monotonic() - cancelled
    log = (procs.workdir / "crawl.log").read_text()
    assert code == 1, log
    assert "was cancelled before it finished" in log
    assert took < 2.0, f"{took:.2f} s from the cancel to the exit"
    info = status(procs, 1)
    assert info["state"] == "cancelled" and info["pending"] == info["running"] == 0
    fetched = sum(n for path, n in site.fetch_counts().items() if path != "/robots.txt")
    assert fetched <= info["done"] + info["dead"] + 2  # pages running at the cancel finish


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # stores: tests/stores
def test_crawl_delete_refuses_an_open_crawl_without_force_and_deletes_everything(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(FAST_SITE)
    base = [site.url, "--allow-private", "--delay", "0", "--no-progress"]
    done = run(procs, *base, "--max-pages", "20", "-o", str(procs.workdir / "a.jsonl"))
    assert done.returncode == 0, done.stderr
    detached = run(procs, *base, "--name", "open one", "--detach")
    assert detached.returncode == 0, detached.stderr
    open_id = int(detached.stdout.split()[0])
    assert status(procs, 1)["seen"] >= 20

    refused = crawlq(procs, "crawl-delete", str(open_id), check=False)
    assert refused.returncode == 1
    assert f"crawl {open_id} is running: cancel it first" in refused.stderr
    assert "--force" in refused.stderr and "Traceback" not in refused.stderr
    assert status(procs, open_id)["state"] == "running"

    deleted = crawlq(procs, "crawl-delete", "1")
    assert "crawl 1 (crawl http" in deleted.stdout and "deleted" in deleted.stdout
    forced = crawlq(procs, "crawl-delete", str(open_id), "--force")
    assert f"crawl {open_id} (open one) deleted" in forced.stdout

    listed = json.loads(crawlq(procs, "crawls", "--json").stdout)
    assert listed == []
    jobs = json.loads(crawlq(procs, "jobs", "--json").stdout)
    assert jobs == []
    again = crawlq(procs, "crawl-delete", "1", check=False)
    assert again.returncode == 1 and "no crawl" in again.stderr.lower(), again.stderr
