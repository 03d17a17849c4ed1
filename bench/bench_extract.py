"""CPU per page of what the crawler does with a page once fetched (issue 21, items 1 and 9).

    .venv/bin/python bench/bench_extract.py            # 2,000 pages of bench_crawl's site
    .venv/bin/python bench/bench_extract.py -n 300

In one process, over the pages of ``bench_crawl.py``'s site (about 4 KB of HTML, ten links
each), the median of ``--runs`` passes of the CPU time (``time.process_time``) per page:

- ``two parses``: ``page_title(body)`` and ``extract_links(body)`` (crawlq before this
  change: each parsed the page);
- ``one parse``: ``parse_html`` once, title and links from that tree (now);
- ``+ 3 CSS fields``: and ``--extract`` ``h1=h1::text``, ``links[]=a::attr(href)``,
  ``words[]=p ::text``;
- ``+ 1 XPath field``: and ``first=xpath://p[1]//text()`` (a second parse, by lxml);
- ``+ parse hook``: and ``run_hook`` of a plain function returning one item (a thread
  hop per page) instead of the fields.

Not a test: it asserts nothing. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_crawl import build_site

from crawlq.crawler.extract import Document, Extractor
from crawlq.crawler.items import Page, run_hook
from crawlq.crawler.links import extract_links, page_title, parse_html

BASE = "http://127.0.0.1:8000/p/00001.html"
CSS = Extractor(["h1=h1::text", "links[]=a::attr(href)", "words[]=p ::text"])
XPATH = Extractor(["first=xpath://p[1]//text()"])


def item(page: Page) -> dict[str, Any]:
    return {"url": page.url, "title": page.select_one("title::text")}


sys.modules.setdefault("bench_extract", sys.modules[__name__])  # the hook's module name


def two_parses(body: bytes) -> None:
    page_title(body, encoding="utf-8")
    extract_links(body, BASE, encoding="utf-8")


def one_parse(body: bytes) -> Any:
    tree = parse_html(body, "utf-8")
    page_title(tree)
    extract_links(tree, BASE)
    return tree


def css_fields(body: bytes) -> None:
    CSS.extract(Document(one_parse(body), body, "utf-8"))


def xpath_field(body: bytes) -> None:
    tree = one_parse(body)
    CSS.extract(Document(tree, body, "utf-8"))
    XPATH.extract(Document(tree, body, "utf-8"))


def hook(body: bytes) -> None:
    tree = one_parse(body)
    page = Page(
        url=BASE, final_url=BASE, status=200, headers={}, body=body, content_type="text/html",
        depth=1, referrer=None, encoding="utf-8", tree=tree,
    )  # fmt: skip
    LOOP.run_until_complete(run_hook("bench_extract:item", page))


LOOP = asyncio.new_event_loop()


def per_page(step: Callable[[bytes], Any], bodies: list[bytes], runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.process_time()
        for body in bodies:
            step(body)
        samples.append((time.process_time() - started) / len(bodies))
    return statistics.median(samples) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="pages (default 2000)")
    parser.add_argument("--runs", type=int, default=5, help="passes (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        build_site(root, args.n)
        bodies = [f.read_bytes() for f in sorted(root.rglob("*.html"))]
    print(f"{len(bodies)} pages, {sum(map(len, bodies)) / len(bodies) / 1024:.1f} KiB each")
    print("| step | CPU ms per page |\n|---|---|")
    for name, step in (
        ("two parses (before)", two_parses),
        ("one parse (now)", one_parse),
        ("+ 3 CSS fields", css_fields),
        ("+ 1 XPath field", xpath_field),
        ("+ parse hook", hook),
    ):
        print(f"| {name} | {per_page(step, bodies, args.runs):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
