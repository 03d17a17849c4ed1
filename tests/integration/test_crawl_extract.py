"""``crawlq crawl`` getting data out of pages: ``--extract`` fields, the ``--parse`` hook,
CSV output and ``crawl-export`` of items, against real sites served on 127.0.0.1."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from crawlq.crawler.records import RECORD_FIELDS, ROBOTS_DISALLOWED
from crawlq.fingerprint import canonical_url
from tests import crawlsite
from tests.crawlsite import CrawlSite, SiteSpec
from tests.integration.conftest import Processes
from tests.integration.test_crawler import by_url, records, run, run_export

crawl_site = crawlsite.crawl_site

FAST = ["--allow-private", "--delay", "0", "--timeout", "5", "--no-progress"]
SMALL = SiteSpec(
    pages=40, links_per_page=3, slow_pages=0, hang=False, bombs=False, redirects=False,
    errors=False, flaky_failures=0, offsite=False, other_schemes=False,
)  # fmt: skip


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_extract_adds_css_and_xpath_fields_to_every_record(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SMALL)
    out = procs.workdir / "pages.jsonl"
    fields = [
        "--extract", "heading=h1::text",
        "--extract", "hrefs[]=ul a::attr(href)",
        "--extract", "top=xpath://h1[@id='top']/text()",
        "--extract", "items=li",
    ]  # fmt: skip
    refused = run(procs, site.url, *FAST, *fields, "-o", str(out))
    assert refused.returncode != 0
    assert "'items' is a field every record has" in refused.stderr
    assert "Traceback" not in refused.stderr
    result = run(procs, site.url, *FAST, *fields[:6], "--extract", "first=li", "-o", str(out))
    assert result.returncode == 0, result.stderr
    found = by_url(records(out))
    expected = site.expected()
    assert set(found) == expected.urls
    parsed = links = 0
    for url, page in expected.pages.items():
        record = found[url]
        assert list(record)[-4:] == ["heading", "hrefs", "top", "first"], url
        if page.parsed and page.outcome == "ok":
            parsed += 1
            assert record["heading"] == record["top"] == page.title, url
            assert isinstance(record["hrefs"], list), url
            links += len(record["hrefs"])
            if record["hrefs"]:
                assert record["first"].startswith("<li><a href="), url
        elif page.outcome == "ok":  # not HTML: not parsed
            assert record["heading"] is record["hrefs"] is record["top"] is None, url
    assert parsed >= 30 and links >= 60
    exported = [json.loads(line) for line in run_export(procs, 1).splitlines()]
    assert by_url(exported) == found


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_csv_output_has_a_column_per_field_and_crawl_export_writes_it_again(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SMALL)
    out = procs.workdir / "pages.csv"
    fields = ["--extract", "heading=h1::text", "--extract", "hrefs[]=a::attr(href)"]
    result = run(procs, site.url, *FAST, *fields, "-o", str(out))
    assert result.returncode == 0, result.stderr
    rows = read_csv(out)
    assert list(rows[0]) == [*RECORD_FIELDS, "heading", "hrefs"]
    assert {canonical_url(r["url"]) for r in rows} == site.expected().urls
    for row in rows:
        if row["status"] == "200" and row["title"]:
            assert row["heading"] == row["title"]
            assert isinstance(json.loads(row["hrefs"]), list)
    again = procs.workdir / "again.csv"
    exported = subprocess.run(
        [*procs.argv("crawl-export"), "1", "-o", str(again)],
        cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f"{len(rows)} pages written" in exported.stderr
    assert again.read_text() == out.read_text()


PARSE = """
    import os
    from crawlq.crawler.items import Parsed

    def parse(page):
        if page.tree is None:
            return None
        yield {"url": page.url, "heading": page.select_one("h1::text"), "pid": os.getpid()}
        if page.depth == 0:
            yield {"url": page.url, "extra": [1, {"a": None}], "first": True}

    def pick(page):
        items = [{"url": page.url, "title": page.fields.get("heading")}]
        return Parsed(items=items, links=page.links[:2] if page.depth == 0 else [])

    failures = {}

    def flaky(page):
        if page.url.endswith("/p/3"):
            raise ZeroDivisionError("no good: " + page.url)
        failures[page.url] = failures.get(page.url, 0) + 1
        if page.url.endswith("/p/5") and failures[page.url] == 1:
            raise ValueError("once")
        return {"url": page.url, "attempt": failures[page.url]}
"""


@pytest.mark.parametrize("store_url", ["postgres"], indirect=True)
def test_parse_hook_items_go_to_the_output_csv_and_export_from_every_worker(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    procs.write_module("myparse", PARSE)
    site = crawl_site(replace(SMALL, pages=200))
    args = [
        site.url,
        *FAST,
        "--delay",
        "0.01",
        "--host-concurrency",
        "4",
        "--parse",
        "myparse:parse",
    ]
    detached = run(procs, *args, "--detach")
    assert detached.returncode == 0, detached.stderr
    workers = [
        procs.crawlq("worker", "--runtime", "asyncio", "--concurrency", "4", log=f"w{i}.log")
        for i in range(2)
    ]
    out = procs.workdir / "items.csv"
    try:
        result = run(procs, *args, "-o", str(out))  # resumes the crawl, works it too
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.wait(30)
    assert result.returncode == 0, result.stderr
    assert "items" in result.stderr
    expected = site.expected()
    html = {url for url, page in expected.pages.items() if page.outcome == "ok" and page.parsed}
    items = [json.loads(line) for line in run_export(procs, 1).splitlines()]
    assert len(items) == len(html) + 1
    assert {canonical_url(i["url"]) for i in items if "heading" in i} == html
    assert all(i["heading"] for i in items if "heading" in i)
    assert len({i["pid"] for i in items if "pid" in i}) >= 2, "every worker ran the hook"
    [extra] = [i for i in items if "extra" in i]
    assert extra["extra"] == [1, {"a": None}] and extra["first"] is True
    rows = read_csv(out)  # rewritten at the end with the keys later items brought
    assert list(rows[0]) == ["url", "heading", "pid", "extra", "first"]
    assert len(rows) == len(items)
    assert [r["extra"] for r in rows if r["extra"]] == ['[1,{"a":null}]']
    pages = records_of(procs, "--pages")
    assert len(pages) == len(expected.urls)
    assert all("items" in p and p["traceback"] is None for p in pages)


def records_of(procs: Processes, *args: str) -> list[dict[str, Any]]:
    result = subprocess.run(
        [*procs.argv("crawl-export"), "1", *args],
        cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_parse_hook_may_choose_the_links_to_follow(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    procs.write_module("myparse", PARSE)
    site = crawl_site(SMALL)
    out = procs.workdir / "items.jsonl"
    args = ["--parse", "myparse:pick", "--extract", "heading=h1::text"]
    result = run(procs, site.url, *FAST, *args, "-o", str(out))
    assert result.returncode == 0, result.stderr
    items = records(out)
    assert len(items) == 3 and all(i["title"] for i in items)
    fetched = [p for p in site.fetch_counts() if p != "/robots.txt"]
    assert len(fetched) == 3


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_errors_in_the_parse_hook_are_retried_then_recorded_with_the_traceback(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    procs.write_module("myparse", PARSE)
    site = crawl_site(SMALL)
    args = ["--parse", "myparse:flaky", "--retries", "2"]
    result = run(procs, site.url, *FAST, *args, "-o", str(procs.workdir / "items.jsonl"))
    assert result.returncode == 0, result.stderr
    pages = {canonical_url(p["url"]): p for p in records_of(procs, "--pages")}
    failed = pages[site.url_for("/p/3")]
    assert failed["error"] == (
        f"parse hook myparse:flaky: ZeroDivisionError: no good: {site.origin}/p/3"
    )
    assert 'raise ZeroDivisionError("no good: " + page.url)' in failed["traceback"]
    assert failed["items"] is None
    assert len(site.requests_for("/p/3")) == 3  # retried like any failure
    again = pages[site.url_for("/p/5")]
    assert again["error"] is None and again["items"] == [{"url": again["url"], "attempt": 2}]
    shown = subprocess.run(
        [*procs.argv("crawl-status"), "1", "--json"],
        cwd=procs.workdir, env=procs.env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    status = json.loads(shown.stdout)
    dead = [p for p in pages.values() if p["error"] and p["error"] != ROBOTS_DISALLOWED]
    assert failed in dead and status["dead"] == len(dead)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_parse_hook_that_cannot_be_imported_is_refused_in_one_line(
    procs: Processes,
) -> None:
    result = run(procs, "http://127.0.0.1:9/", *FAST, "--parse", "nosuchmodule:parse")
    assert result.returncode == 1
    assert "--parse nosuchmodule:parse: no module named 'nosuchmodule'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (procs.workdir / "crawl-1.jsonl").exists()
