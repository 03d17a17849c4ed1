"""``crawlq crawl`` getting data out of pages: ``--extract`` fields, the ``--parse`` hook,
CSV output and ``crawl-export`` of items, against real sites served on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

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
