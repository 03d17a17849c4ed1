"""A worker that does not crawl does not load the crawler's stack (HTTP client, parsers,
WARC writer, URL canonicalisation) nor the CLI's other commands' dependencies: every
worker registers the crawler's tasks, but their bodies are imported by the first crawl
job (``crawlq.crawler.tasks``)."""

from __future__ import annotations

import subprocess

import pytest

import crawlq
from crawlq.crawler.tasks import CONFIG_META_KEY, install
from tests.integration.conftest import Processes

TASKS = """
    import sys

    import crawlq

    app = crawlq.App()

    @app.task(name="modules")
    def modules(ctx):
        return sorted({name.split(".")[0] for name in sys.modules} | set(sys.modules))
"""

NOT_FOR_PLAIN_JOBS = (
    "httpx",
    "httpcore",
    "h11",
    "selectolax",
    "warcio",
    "w3lib",
    "protego",
    "rich",
    "starlette",
    "uvicorn",
    "crawlq.crawler.pages",
    "crawlq.crawler.fetch",
    "crawlq.crawler.http11",
    "crawlq.cli.crawl",
    "crawlq.cli.web",
)

ONLY_FOR_POOLS = ("httpcore", "h11", "anyio", "crawlq.crawler.pools")
"""What a crawl loads only when a fetch goes through a proxy or over HTTP/2."""

NOT_WITHOUT_SCHEDULES = ("cronsim", "zoneinfo")
"""What only a periodic schedule needs (crawlq.periodic imports them when one is made);
psycopg imports zoneinfo itself, so a PostgreSQL worker has it anyway."""


def modules_loaded(procs: Processes, app: crawlq.App, runtime: str = "thread") -> list[str]:
    """What a burst ``crawlq worker`` had imported when it ran the task ``modules`` (with
    the process runtime: what its child had)."""
    procs.write_module("plain", TASKS)

    @app.task(name="modules")
    def modules(ctx: crawlq.JobContext) -> list[str]: ...

    job_id = modules.schedule().job_id
    worker = subprocess.run(
        procs.argv("worker", "--app", "plain:app", "--burst", "--runtime", runtime),
        cwd=procs.workdir,
        env=procs.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert worker.returncode == 0, worker.stderr
    loaded = app.result(job_id, timeout=10)
    assert isinstance(loaded, list)
    assert "crawlq.crawler.tasks" in loaded, "the crawler's tasks are registered"
    return loaded


def test_a_worker_without_crawl_jobs_does_not_import_the_crawler(procs: Processes) -> None:
    app = crawlq.App(procs.store_url)
    try:
        loaded = modules_loaded(procs, app)
        assert [name for name in NOT_FOR_PLAIN_JOBS if name in loaded] == []
        unneeded = [name for name in NOT_WITHOUT_SCHEDULES if name in loaded]
        assert unneeded == (["zoneinfo"] if "psycopg" in loaded else [])
    finally:
        app.close()


@pytest.mark.parametrize("runtime", ["thread", "process"])
def test_a_worker_started_while_a_crawl_runs_imports_the_page_task_at_once(
    procs: Processes, runtime: str
) -> None:
    """Its pages' fetches do not wait for the import after their claim (politeness is
    counted from the claim); with the process runtime each child imports it at its start,
    before its first job."""
    app = crawlq.App(procs.store_url)
    try:
        page = install(app)
        start = [page.with_options(delay=3600).spec("https://example.com/", 0)]
        app.crawl("later", start, meta={CONFIG_META_KEY: {}})
        loaded = modules_loaded(procs, app, runtime)
        assert "crawlq.crawler.pages" in loaded
        assert "httpx" in loaded
        # httpcore's pools are for HTTP/2 and proxies (crawler.pools): imported by the
        # first fetch that needs one, not by a crawl of HTTP/1.1 pages.
        assert [name for name in ONLY_FOR_POOLS if name in loaded] == []
        assert "warcio" not in loaded  # imported by the first WARC file (--warc)
    finally:
        app.close()


def test_a_crawl_of_the_users_own_tasks_does_not_import_the_crawler(procs: Processes) -> None:
    """Only the crawler's crawls (their meta holds its settings) are preloaded for: 101
    running crawls of a task of the user's own, then one of the crawler's past the first
    page of them, which is found."""
    app = crawlq.App(procs.store_url)
    try:

        @app.task(name="own")
        def own(ctx: crawlq.JobContext) -> None: ...

        for i in range(101):
            app.crawl(f"own-{i}", [own.with_options(delay=3600).spec()])
        loaded = modules_loaded(procs, app)
        assert [name for name in NOT_FOR_PLAIN_JOBS if name in loaded] == []
    finally:
        app.close()
    app = crawlq.App(procs.store_url)  # modules_loaded registers its task once per app
    try:
        page = install(app)
        start = [page.with_options(delay=3600).spec("https://example.com/", 0)]
        app.crawl("crawler", start, meta={CONFIG_META_KEY: {}})
        assert "crawlq.crawler.pages" in modules_loaded(procs, app)
    finally:
        app.close()
