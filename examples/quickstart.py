"""crawlq quickstart: a producer schedules jobs, a worker process runs them, stats print.

Run it from anywhere: ``python examples/quickstart.py``. It "scrapes" the small book
shop in ``examples/site`` (local files, so it needs no network) as a crawl: a listing
task finds book links and schedules a job per link with ``seen=`` the link, so each
page is scraped once per crawl even when several pages link to it (a ``key`` would only
merge a link with a job that is still pending or running); the missing page fails, is
retried and ends in the dead-letter queue.
The jobs live in ``quickstart.db`` next to this file.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import crawlq

HERE = Path(__file__).resolve().parent
SITE = HERE / "site"

app = crawlq.App(f"sqlite:///{HERE / 'quickstart.db'}")


class _Page(HTMLParser):
    """Collects the links and the title of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        self._in_title = False


def fetch(name: str) -> _Page:
    page = _Page()
    page.feed((SITE / name).read_text())  # FileNotFoundError for a missing page
    return page


@app.task(name="scrape_listing", max_attempts=2)
def scrape_listing(ctx: crawlq.JobContext, name: str) -> int:
    page = fetch(name)
    for link in page.links:
        task = scrape_listing if link.startswith("index") else scrape_book
        # once per crawl: a link seen before adds nothing
        ctx.schedule(task.with_options(seen=link), link)
    return len(page.links)


@app.task(name="scrape_book", max_attempts=3)
def scrape_book(ctx: crawlq.JobContext, name: str) -> dict[str, str]:
    ctx.log.info("scraping %s (attempt %d)", name, ctx.attempt)
    try:
        page = fetch(name)
    except FileNotFoundError:
        # A real scraper would back off (the default); here the retry is immediate so
        # that the burst worker sees every attempt before it exits.
        raise crawlq.Retry(delay=0, reason=f"{name} is missing") from None
    return {"page": name, "title": page.title}


def main() -> None:
    start = scrape_listing.with_options(seen="index.html").spec("index.html")
    crawl = app.crawl("bookshop", [start])
    print(f"producer: started crawl {crawl.id} with scrape_listing('index.html')")
    crawlq_cmd = [sys.executable, "-m", "crawlq"]
    store = ["--store", app.store_url or ""]
    print(f"worker: crawlq worker --app quickstart:app --burst --store {app.store_url}")
    subprocess.run(
        [*crawlq_cmd, "worker", "--app", "quickstart:app", "--burst", *store],
        cwd=HERE,
        check=True,
    )
    print(f"\nstats: crawlq stats --store {app.store_url}")
    subprocess.run([*crawlq_cmd, "stats", *store], check=True)
    info = app.get_crawl(crawl.id)
    print(f"crawl {crawl.id} {info.state}: {info.done} done, {info.dead} dead, {info.seen} seen")
    for job in app.store.job_list(crawlq.stores.base.JobFilter(task="scrape_book")):
        if job.crawl_id != crawl.id:
            continue  # an earlier run's crawl
        print(
            f"  job {job.id:>3} {job.state:<7} {job.args[0]:<12} -> {job.result or job.dead_reason}"
        )


if __name__ == "__main__":
    main()
