"""``crawlq crawl`` in the foreground: start or resume a crawl, work it, show it, write it.

``CrawlRunner.start()`` finds the open crawl made by the same command (same settings and
name) and resumes it, or creates a new one with the start URLs as its first pages. ``run()``
then works the ``crawl`` queue with an asyncio worker in a thread of this process (and
``processes - 1`` ``crawlq worker`` child processes, to use more cores; with ``render``
a process-runtime worker whose ``processes`` children each run one page at a time in a
browser of their own, recycled as ``render_recycle`` says) while the main thread streams
the crawl's results from the store to the output (JSON Lines or CSV, pages or items:
``crawlq.crawler.exports``; the whole file is rewritten from the store on a resume, so
it never holds a page twice), draws the progress display, and returns an exit code once
the crawl is finished or cancelled. Ctrl-C or SIGTERM stops the worker gracefully (a
second Ctrl-C releases running pages at once); the crawl stays open in the store, so the
same command resumes it, also after the process was killed with SIGKILL (its running
pages come back when the dead process is noticed, within about 30 s).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from crawlq.config import WorkerSettings, store_command
from crawlq.crawler.config import PAGE_QUEUE, CrawlConfig
from crawlq.crawler.exports import CsvFile, Output, open_output, write_all
from crawlq.crawler.output import check_writable
from crawlq.crawler.pages import use_warc
from crawlq.crawler.records import ROBOTS_DISALLOWED
from crawlq.crawler.recurring import open_crawl, start_crawl
from crawlq.crawler.standalone import APP_REF as STANDALONE_APP
from crawlq.crawler.tasks import install, preload
from crawlq.crawls import OPEN_CRAWL_STATES, CrawlInfo, CrawlState
from crawlq.exceptions import ConfigurationError
from crawlq.worker.worker import Worker

if TYPE_CHECKING:
    from crawlq.app import App

__all__ = [
    "EXIT_CANCELLED",
    "EXIT_FINISHED",
    "EXIT_INTERRUPTED",
    "EXIT_NOTHING_FETCHED",
    "CrawlRunner",
    "Tally",
    "crawl_name",
    "iter_results",
]

EXIT_FINISHED = 0
EXIT_CANCELLED = 1
EXIT_NOTHING_FETCHED = 3
EXIT_INTERRUPTED = 130

_POLL = 0.05
"""Seconds between two looks at the crawl and its new records (a finished crawl is seen
within this)."""
_WORKER_POLL = 0.1
"""The worker's longest idle wait: it also bounds how long stopping it takes once the
crawl is finished (``crawlq worker`` waits up to 1 s)."""
_PAGE = 1000


def crawl_name(config: CrawlConfig) -> str:
    """The default name of a crawl: its first start URL (and how many more)."""
    urls = config.start_urls or config.sitemaps
    first = urls[0]
    more = len(urls) - 1
    return f"crawl {first}" + (f" (+{more} more)" if more else "")


def _count(n: int, noun: str) -> str:
    """``1 page``, ``2 pages``."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def iter_results(app: App, crawl_id: int, after: int = 0) -> Iterator[tuple[int, str]]:
    """Every (seq, record) of a crawl after ``after``, in order, a page at a time."""
    while True:
        batch = app.store.result_list(crawl_id, after=after, limit=_PAGE)
        yield from batch
        if len(batch) < _PAGE:
            return
        after = batch[-1][0]


@dataclass
class Tally:
    """Counts of the records seen so far."""

    pages: int = 0
    ok: int = 0
    http_errors: int = 0
    errors: int = 0
    disallowed: int = 0
    items: int = 0
    first_errors: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        record: dict[str, Any] = json.loads(text)
        self.pages += 1
        self.items += len(record.get("items") or ())
        if record.get("error") == ROBOTS_DISALLOWED:
            self.disallowed += 1
        elif record.get("error"):
            self.errors += 1
            if len(self.first_errors) < 3:
                self.first_errors.append(f"{record.get('url')}: {record['error']}")
        elif (record.get("status") or 0) >= 400:
            self.http_errors += 1
        else:
            self.ok += 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _sigterm_interrupts() -> Any:
    """Make SIGTERM stop the crawl like Ctrl-C (main thread only); the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


class CrawlRunner:
    """One ``crawlq crawl`` invocation (see the module docstring)."""

    def __init__(
        self,
        app: App,
        config: CrawlConfig,
        *,
        name: str | None = None,
        output: str | None = None,
        concurrency: int = 16,
        processes: int = 1,
        progress: bool = True,
        new: bool = False,
        console: Console | None = None,
        render_recycle: tuple[int | None, int | None] = (None, None),
        app_ref: str | None = None,
    ) -> None:
        self.app = app
        self.config = config
        self.name = name or crawl_name(config)
        self.output = output
        self.concurrency = concurrency
        if processes < 1:
            raise ConfigurationError(f"processes must be at least 1, not {processes}")
        self.processes = processes
        self.new = new
        self.render_recycle = render_recycle
        self.app_ref = app_ref
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.progress = progress and self.console.is_terminal
        self.resumed = False
        self.tally = Tally()
        self.crawl: CrawlInfo | None = None
        self._cursor = 0
        self._before = 0  # records the crawl had when this run started
        install(app)

    # -- start -------------------------------------------------------------------------

    def _find_open(self) -> CrawlInfo | None:
        return open_crawl(self.app, self.name, self.config.to_meta())

    def start(self) -> CrawlInfo:
        """Resume the open crawl of the same command, or create one (after checking the
        output paths: a path that cannot be written creates nothing)."""
        if self.output is not None:
            check_writable(self.output, "the output file")
        if self.config.warc is not None:
            check_writable(self.config.warc, "the WARC file")
        found = None if self.new else self._find_open()
        if found is not None:
            self.resumed = True
            if found.state == CrawlState.PAUSED:
                self.app.resume_crawl(found.id)
            self.crawl = self.app.get_crawl(found.id)
            return self.crawl
        self.crawl = start_crawl(self.app, self.name, self.config)
        return self.crawl

    # -- run ---------------------------------------------------------------------------

    def run(self) -> int:
        """Work the crawl until it is finished; the exit code."""
        crawl = self.crawl or self.start()
        if self.config.warc is not None:
            use_warc(self.app, crawl.id, self.config.warc)
        worker = self._worker()
        thread = threading.Thread(target=worker.run, name="crawlq-crawl-worker", daemon=True)
        output = (
            open_output(self.output, self.config, items=self.config.parse is not None)
            if self.output is not None
            else None
        )
        self._before = self.app.store.result_count(crawl.id)
        started = time.monotonic()
        thread.start()
        helpers = self._start_helpers()
        previous = _sigterm_interrupts()
        try:
            state = self._follow(crawl.id, output, worker, started)
        except (KeyboardInterrupt, BrokenPipeError) as exc:
            self._stop_helpers(helpers)
            why = "the output was closed" if isinstance(exc, BrokenPipeError) else "stopping"
            self.console.print(
                f"[yellow]{why}: running pages get 10 s to finish "
                "(Ctrl-C again to release them now)[/]"
            )
            worker.stop()
            self._join(worker, thread)
            self._drain(crawl.id, output)
            self._close(crawl.id, output)
            pages = _count(self.tally.pages, "page")
            self.console.print(
                f"interrupted: crawl {crawl.id} has {pages}; run the same command again to "
                "resume it"
            )
            return EXIT_INTERRUPTED
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)
        elapsed = time.monotonic() - started
        worker.stop()
        self._stop_helpers(helpers)
        self._join(worker, thread)
        self._close(crawl.id, output)
        return self._summary(state, elapsed)

    def _close(self, crawl_id: int, output: Output | None) -> None:
        """Close the output; a CSV file whose later items brought new keys is written
        again from the store with every column."""
        if output is None:
            return
        output.close()
        if isinstance(output, CsvFile) and output.new_columns:
            write_all(
                output.path,
                self.config,
                lambda: (text for _, text in iter_results(self.app, crawl_id)),
                items=output.items,
            )

    def _worker(self) -> Worker:
        """This process's worker: asyncio, or with ``render`` the process runtime (one
        page at a time per child, each child with its own browser, recycled after
        ``render_recycle`` = (pages, bytes of memory), children included)."""
        from crawlq.worker.worker import Worker

        render = self.config.render
        pages, memory = self.render_recycle if render else (None, None)
        settings = WorkerSettings(
            queues=(PAGE_QUEUE,),
            concurrency=self.processes if render else self.concurrency,
            runtime="process" if render else "asyncio",
            shutdown_grace=10.0,
            poll_timeout=_WORKER_POLL,
            max_jobs_per_child=pages,
            max_memory_per_child=memory,
        )
        app_ref = (self.app_ref or STANDALONE_APP) if render else None
        if render:
            self.app.setup(preload)  # each child imports the page task before its first page
        return Worker(self.app, settings, app_ref=app_ref)

    def _start_helpers(self) -> list[subprocess.Popen[bytes]]:
        """``processes - 1`` ``crawlq worker`` processes on the same store and queue
        (none with ``render``: the worker's children are the processes)."""
        if self.config.render:
            return []
        argv = [
            sys.executable, "-m", "crawlq", "worker", "--store", self.app.store_url or "",
            "--queue", PAGE_QUEUE, "--runtime", "asyncio",
            "--concurrency", str(self.concurrency), "--log-level", "warning",
        ]  # fmt: skip
        return [subprocess.Popen(argv) for _ in range(self.processes - 1)]

    def _stop_helpers(self, helpers: list[subprocess.Popen[bytes]]) -> None:
        for proc in helpers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in helpers:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def _join(self, worker: Worker, thread: threading.Thread) -> None:
        while thread.is_alive():
            try:
                thread.join(0.2)
            except KeyboardInterrupt:
                worker.stop(now=True)

    def _drain(self, crawl_id: int, output: Output | None) -> None:
        batch = list(iter_results(self.app, crawl_id, self._cursor))
        if batch:
            self._cursor = batch[-1][0]
            for _, text in batch:
                self.tally.add(text)
            if output is not None:
                output.write(text for _, text in batch)

    def _follow(
        self, crawl_id: int, output: Output | None, worker: Worker, started: float
    ) -> CrawlState:
        self._cursor = 0
        live = Live(console=self.console, transient=True, auto_refresh=False)
        if self.progress:
            live.start()
        try:
            while True:
                info = self.app.get_crawl(crawl_id)
                self._drain(crawl_id, output)
                if self.progress:
                    live.update(self._line(info, time.monotonic() - started), refresh=True)
                if info.state not in OPEN_CRAWL_STATES:
                    self._drain(crawl_id, output)
                    return info.state
                time.sleep(_POLL)
        finally:
            if self.progress:
                live.stop()

    def _rate(self, elapsed: float) -> float:
        """Pages recorded since this run started, per second of this run (a resumed
        crawl's earlier pages are not this run's work)."""
        return (self.tally.pages - self._before) / elapsed if elapsed > 0 else 0.0

    def _line(self, info: CrawlInfo, elapsed: float) -> Text:
        rate = self._rate(elapsed)
        text = Text()
        text.append(f"crawl {info.id} ", style="bold")
        text.append(f"{info.state.value}  ")
        text.append(_count(self.tally.pages, "page"), style="green")
        if self._before:
            text.append(f" ({self.tally.pages - self._before:,} in this run)")
        text.append(f"  {info.pending + info.running:,} queued ({info.running} fetching)")
        text.append(f"  {info.dead:,} failed", style="red" if info.dead else "")
        text.append(f"  {rate:,.1f} pages/s  {elapsed:,.0f} s")
        return text

    def _summary(self, state: CrawlState, elapsed: float) -> int:
        crawl = self.crawl
        assert crawl is not None
        tally = self.tally
        verb = "finished" if state == CrawlState.FINISHED else state.value
        this_run = f"{_count(tally.pages - self._before, 'page')} in this run, " * (
            self._before > 0
        )
        self.console.print(
            f"crawl {crawl.id} {verb} in {elapsed:,.1f} s: {_count(tally.pages, 'page')} "
            f"({tally.ok:,} ok, {_count(tally.http_errors, 'HTTP error')}, {tally.errors:,} "
            f"failed, {tally.disallowed:,} disallowed by robots.txt), "
            f"{this_run}{self._rate(elapsed):,.1f} pages/s"
            + (f", {_count(tally.items, 'item')}" if self.config.parse is not None else "")
        )
        where = f"results: {self.output}; " if self.output not in (None, "-") else ""
        again = store_command(f"crawl-export {crawl.id}", self.app.store_url)
        self.console.print(f"{where}{again} writes them again", markup=False)
        if state == CrawlState.CANCELLED:
            self.console.print(f"crawl {crawl.id} was cancelled before it finished")
            return EXIT_CANCELLED
        if tally.pages and tally.ok + tally.http_errors == 0:
            self.console.print("no page could be fetched; the first errors:")
            for line in tally.first_errors:
                self.console.print(f"  {line}", markup=False)
            return EXIT_NOTHING_FETCHED
        return EXIT_FINISHED
