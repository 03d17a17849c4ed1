"""A real browser (Debian's headless chromium, driven by Playwright) on the dashboard of a
live SQLite store while a worker drains jobs: counts change without a reload, a dead job
is requeued by a click and rescheduled, a crawl is paused and resumed from its page."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crawlq.crawls import CrawlState
from crawlq.jobs import JobState
from tests import servers

pytest.importorskip("playwright", reason="pip install playwright (the dev extra has it)")

_spec = importlib.util.spec_from_file_location(
    "web_screenshots", Path(__file__).parents[2] / "docs" / "web_screenshots.py"
)
assert _spec is not None and _spec.loader is not None
shots: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shots)


@pytest.fixture
def browser() -> Iterator[Any]:
    if shots.chromium_path() is None:
        servers.unavailable("chromium", "apt-get install chromium (.ci/run does)")
    with shots.browser() as b:
        yield b


def _wait(predicate: Any, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_dashboard_live(browser: Any, tmp_path: Path) -> None:
    app = shots.demo_app(tmp_path / "live.db")
    made = shots.fill(app, jobs=300)
    with shots.serve(app) as url:
        page = browser.new_page(viewport={"width": 390, "height": 800})  # a phone
        page.goto(url)
        done = page.locator('[data-count="done"]')
        page.wait_for_selector("#status:has-text('updated')")
        before = int(done.inner_text())
        with shots.worker(app):
            page.wait_for_function(
                f"Number(document.querySelector('[data-count=\"done\"]').textContent) > {before}",
                timeout=20_000,
            )
        assert page.evaluate("performance.getEntriesByType('navigation').length") == 1  # no reload

        dead = made["dead"][0]
        page.goto(url + "#/dead")
        page.locator(f'button[data-requeue="{dead}"]').click()
        _wait(lambda: app.store.job_get(dead).state is JobState.PENDING)
        page.wait_for_selector(f'button[data-requeue="{dead}"]', state="detached")

        # the requeued job (pending, due now) is moved an hour on, then back to now in bulk
        page.on("dialog", lambda dialog: dialog.accept("3600"))
        page.goto(url + f"#/jobs/{dead}")
        page.locator(f'button[data-reschedule-at="{dead}"]').click()
        _wait(lambda: app.store.job_get(dead).run_at > app.store.now() + 3000)
        queue = app.store.job_get(dead).queue
        page.goto(url + f"#/jobs?queue={queue}&state=pending")
        page.locator("button[data-reschedule-all]").click()
        _wait(lambda: app.store.job_get(dead).run_at <= app.store.now())

        crawl = made["crawl"]
        page.goto(url + f"#/crawls/{crawl}")
        page.locator('button[data-crawl="pause"]').click()
        _wait(lambda: app.get_crawl(crawl).state is CrawlState.PAUSED)
        page.locator('button[data-crawl="resume"]').click()
        _wait(lambda: app.get_crawl(crawl).state is CrawlState.RUNNING)
        page.wait_for_selector('button[data-crawl="pause"]')
        assert page.locator("#crawl-state").inner_text() == "running"
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.reload()
        page.wait_for_selector("#status:has-text('updated')")
        assert errors == []
    app.close()
