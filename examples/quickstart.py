"""crawlq quickstart: a producer schedules jobs, a worker process runs them, stats print.

Run it from anywhere: ``python examples/quickstart.py``. It "scrapes" the small book
shop in ``examples/site`` (local files, so it needs no network): a listing task finds
book links and schedules one unique job per book; duplicate links are merged by their
key; the missing page fails, is retried and ends in the dead-letter queue.
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
        if link.startswith("index"):
            ctx.schedule(scrape_listing, link, key=link)
        else:
            ctx.schedule(scrape_book, link, key=link)  # unique: a duplicate link merges
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
    result = scrape_listing.schedule("index.html", key="index.html")
    print(f"producer: scheduled scrape_listing as job {result.job_id} ({result.outcome})")
    crawlq_cmd = [sys.executable, "-m", "crawlq"]
    store = ["--store", app.store_url or ""]
    print("worker: crawlq worker --app quickstart:app --burst")
    subprocess.run(
        [*crawlq_cmd, "worker", "--app", "quickstart:app", "--burst", *store],
        cwd=HERE,
        check=True,
    )
    print("\nstats: crawlq stats")
    subprocess.run([*crawlq_cmd, "stats", *store], check=True)
    for job in app.store.job_list(crawlq.stores.base.JobFilter(task="scrape_book")):
        print(
            f"  job {job.id:>3} {job.state:<7} {job.args[0]:<12} -> {job.result or job.dead_reason}"
        )


if __name__ == "__main__":
    main()
