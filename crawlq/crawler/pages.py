"""The page task: fetch one page of a crawl, record it, follow its links.

``install(app)`` registers the task ``crawlq.page`` (queue ``crawl``) on an app; every
``crawlq worker`` has it, so any worker of a store can run any crawl's pages. A page job
is ``page(url, depth, referrer)`` in a crawl whose meta holds its ``CrawlConfig``; its
limit key is the page's host (``hosts.limit_key``), so the store enforces the host's
politeness on every worker together.

One attempt:

1. with ``max_pages`` (see ``_Cap``): a page that starts once the crawl has that many
   pages done is skipped, and the crawl's pending pages are dropped at once;
2. robots.txt (``hosts.RobotsCache``) unless ignored: a disallowed page is recorded with
   ``error`` "robots.txt disallows it" and not fetched; an unavailable file (429, 5xx,
   network) is retried like a network error;
3. the fetch (``fetch.Fetcher``), then with ``render`` the DOM after JavaScript
   (``render.render_page``); 429 and 503 block the host for their Retry-After (on
   every worker) and retry the page then; network errors, deadlines and 5xx retry with
   exponential backoff (1, 2, 4 ... s, at most 60) up to the crawl's ``retries``; other
   4xx are final; refusals, caps and redirect loops are final errors;
4. an HTML page's links that the scope admits become page jobs at depth + 1, each with
   ``seen=`` its URL (so each URL of the crawl is scheduled once, at this job's
   completion) and higher depths at lower priority (breadth first); with ``max_pages``
   only links new to the crawl (``Store.seen_has``), at most as many as it may still
   take;
5. the record (``records.page_record``) goes to the store's results of the crawl, keyed
   by the URL's fingerprint (a page fetched twice after a crash keeps its first record),
   and the body to the WARC file when the crawl has one.

A page whose last attempt failed is recorded and then goes to the dead-letter queue
(``Discard``), so ``dead`` in the crawl's counts is the number of failed pages.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import math
import random
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from datetime import UTC
from typing import TYPE_CHECKING, Any, NoReturn

from crawlq.context import JobContext
from crawlq.crawler.config import PAGE_QUEUE, CrawlConfig
from crawlq.crawler.fetch import Fetcher, FetchResult
from crawlq.crawler.hosts import RobotsCache, RobotsPending, limit_key
from crawlq.crawler.links import extract_links, is_html, page_title
from crawlq.crawler.output import WarcFile, worker_warc_path
from crawlq.crawler.records import ROBOTS_DISALLOWED, page_record, record_text
from crawlq.crawler.render import render_page
from crawlq.exceptions import Discard, Retry, Snooze
from crawlq.fingerprint import canonical_url, fingerprint
from crawlq.jobs import JobSpec, JobState
from crawlq.stores.base import JobFilter
from crawlq.worker.loops import at_loop_close

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.tasks import Task

__all__ = ["PAGE_TASK", "drop_pending", "install", "page_spec", "use_warc"]

PAGE_TASK = "crawlq.page"

#: Errors after which another attempt cannot help.
_FINAL_ERRORS = (
    "refused:",
    "invalid URL",
    "invalid redirect",
    "body over",
    "decoded body over",
    "redirect loop",
    "too many redirects",
    "could not decode",
    "unsupported content-encoding",
)
_RETRY_STATUSES = frozenset({429, 503})
_MAX_BACKOFF = 60.0
_MAX_RETRY_AFTER = 3600.0


def _backoff(attempt: int) -> float:
    return min(_MAX_BACKOFF, 2.0 ** (attempt - 1))


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a Retry-After header value asks for (delta seconds or an HTTP date),
    at most an hour; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), _MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = time.time() if now is None else now
    seconds = when.timestamp() - now
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), _MAX_RETRY_AFTER)


def _charset(content_type: str | None) -> str | None:
    for part in (content_type or "").split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


class _State:
    """What the page jobs of one store share in this process (crawl ids are per store)."""

    def __init__(self) -> None:
        self.configs: OrderedDict[int, CrawlConfig] = OrderedDict()
        self.fetchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Fetcher]] = (
            weakref.WeakKeyDictionary()
        )
        self.robots = RobotsCache()
        self.warcs: dict[str, WarcFile] = {}
        self.warc_paths: dict[int, str] = {}

    async def config(self, app: App, crawl_id: int) -> CrawlConfig:
        config = self.configs.get(crawl_id)
        if config is None:
            crawl = await asyncio.to_thread(app.get_crawl, crawl_id)
            config = CrawlConfig.from_meta(crawl.meta)
            self.configs[crawl_id] = config
            while len(self.configs) > 256:
                self.configs.popitem(last=False)
        return config

    def fetcher(self, config: CrawlConfig) -> Fetcher:
        loop = asyncio.get_running_loop()
        by_config = self.fetchers.setdefault(loop, {})
        key = config.fingerprint()
        fetcher = by_config.get(key)
        if fetcher is None:
            fetcher = by_config[key] = Fetcher(config.fetch_settings)
            at_loop_close(fetcher.aclose)
        return fetcher

    def warc(self, crawl_id: int, config: CrawlConfig) -> WarcFile | None:
        if config.warc is None:
            return None
        own = self.warc_paths.get(crawl_id)  # crawlq crawl checked it: no directory made
        path = own or worker_warc_path(config.warc)
        writer = self.warcs.get(path)
        if writer is None:
            writer = self.warcs[path] = WarcFile(path, make_dirs=own is None)

            async def close() -> None:
                self.warcs.pop(path, None)
                await asyncio.to_thread(writer.close)

            at_loop_close(close)
        return writer


_STATES: weakref.WeakKeyDictionary[Any, _State] = weakref.WeakKeyDictionary()
_STATES_LOCK = threading.Lock()


def _state(app: App) -> _State:
    with _STATES_LOCK:
        state = _STATES.get(app.store)
        if state is None:
            state = _STATES[app.store] = _State()
        return state


def use_warc(app: App, crawl_id: int, path: str) -> None:
    """Write the bodies of ``crawl_id`` fetched in this process to ``path`` itself
    (``crawlq crawl`` does; other workers write ``worker_warc_path(path)``)."""
    _state(app).warc_paths[crawl_id] = path


async def _keep(ctx: JobContext, crawl_id: int, url: str, record: dict[str, Any]) -> None:
    store = ctx.app.store
    await asyncio.to_thread(store.result_add, crawl_id, [(fingerprint(url), record_text(record))])


async def _owns_target(ctx: JobContext, crawl_id: int, url: str, result: FetchResult) -> bool:
    """After redirects: whether this job follows the target's links. It does when the
    target is new to the crawl's seen set (which now holds it, so no other job will
    fetch it), or when this is a retry (the first attempt may have added it)."""
    if canonical_url(result.final_url) == canonical_url(url):
        return True
    new = await asyncio.to_thread(ctx.app.seen_add, crawl_id, [result.final_url])
    return new[0] or ctx.attempt > 1


def _final(error: str) -> bool:
    return error.startswith(_FINAL_ERRORS)


async def crawl_page(
    ctx: JobContext, url: str, depth: int = 0, referrer: str | None = None
) -> None:
    """The ``crawlq.page`` task (see the module docstring). The record goes to the
    crawl's results, not to the job's result (it would be stored twice)."""
    app = ctx.app
    crawl_id = ctx.crawl_id
    if crawl_id is None:
        raise Discard("a crawlq.page job must belong to a crawl: start it with crawlq crawl")
    state = _state(app)
    config = await state.config(app, crawl_id)
    cap = None if config.max_pages is None else _Cap(app, crawl_id, config.max_pages)
    if cap is not None and not await cap.may_start():
        return None
    fetcher = state.fetcher(config)
    last = ctx.attempt >= config.max_attempts

    async def give_up(record: dict[str, Any], reason: str) -> NoReturn:
        """Keep the record of a page that failed for good; it goes to the dead letters."""
        await _keep(ctx, crawl_id, url, record)
        if cap is not None:
            await cap.room()
        raise Discard(reason)

    if config.obey_robots:
        try:
            robots = await state.robots.get(app, fetcher, config, url, ctx.worker_id)
        except RobotsPending:
            raise Snooze(1.0) from None
        if robots.temporary:
            if robots.status is None and robots.error:  # no answer: the host is unreachable
                error = f"{robots.error} (fetching its robots.txt)"
            else:
                error = f"robots.txt unavailable ({robots.status or 'network error'})"
            if not last:
                raise Retry(_backoff(ctx.attempt), reason=error)
            await give_up(page_record(url, depth=depth, referrer=referrer, error=error), error)
        if not robots.allowed(url, config.user_agent):
            record = page_record(url, depth=depth, referrer=referrer, error=ROBOTS_DISALLOWED)
            await _keep(ctx, crawl_id, url, record)
            if cap is not None:
                await cap.room()
            return None

    result = await fetcher.fetch(url)
    if config.render:  # the DOM after JavaScript; its failures are retried as network errors
        result = await render_page(app, config, result, ctx.worker_id)
    status = result.status
    if status in _RETRY_STATUSES and result.error is None:
        wait = retry_after(result.headers.get("retry-after"))
        if wait and ctx.job.limit_key:
            await asyncio.to_thread(ctx.block, wait)
        if not last:
            raise Retry(
                wait if wait is not None else _backoff(ctx.attempt), reason=f"HTTP {status}"
            )
        await give_up(page_record(url, depth=depth, referrer=referrer, result=result), str(status))
    if result.error is not None and not result.truncated and not _final(result.error):
        if not last:
            raise Retry(_backoff(ctx.attempt), reason=result.error)
        await give_up(page_record(url, depth=depth, referrer=referrer, result=result), result.error)
    if result.error is None and status is not None and status >= 500:
        if not last:
            raise Retry(_backoff(ctx.attempt), reason=f"HTTP {status}")
        await give_up(page_record(url, depth=depth, referrer=referrer, result=result), str(status))

    title: str | None = None
    links: list[str] = []
    if result.error is None and status is not None and is_html(result.headers.get("content-type")):
        charset = _charset(result.headers.get("content-type"))
        title = page_title(result.body, encoding=charset)
        links = extract_links(
            result.body, result.final_url, follow_nofollow=config.follow_nofollow, encoding=charset
        )
    record = page_record(
        url, depth=depth, referrer=referrer, result=result, title=title, links_found=len(links)
    )
    warc = state.warc(crawl_id, config)
    if warc is not None and result.status is not None:
        await asyncio.to_thread(warc.write, result)
    if result.error is not None:
        await give_up(record, result.error)
    if links and result.redirects and not await _owns_target(ctx, crawl_id, url, result):
        links = []  # another page job of the crawl fetches the redirect's target itself
    admitted = _admitted(config, links, depth + 1, url)
    if cap is not None:  # only links new to the crawl, as many as it has room for
        admitted = iter(await _unseen(app, crawl_id, admitted, await cap.room()))
    _follow(ctx, admitted, depth + 1, url)
    await _keep(ctx, crawl_id, url, record)
    return None


Admitted = tuple[str, str, bytes]
"""A link a page follows: (URL, limit key, fingerprint)."""


def _admitted(config: CrawlConfig, links: list[str], depth: int, page: str) -> Iterator[Admitted]:
    """The links the scope admits at ``depth``, in page order, each once, without the
    page itself (lazily: a page with 150,000 links may need only its first few)."""
    scope = config.scope_rules
    taken = {fingerprint(page)}
    for link in links:
        if not scope.admits(link, depth):
            continue
        try:
            key = limit_key(link)
        except ValueError:
            continue
        fp = fingerprint(link)
        if fp in taken:
            continue
        taken.add(fp)
        yield link, key, fp


async def _unseen(
    app: App, crawl_id: int, admitted: Iterator[Admitted], room: int
) -> list[Admitted]:
    """The first ``room`` admitted links that the crawl has not seen yet, read from its
    seen set in growing batches (a link seen before would take a place and add nothing,
    and a crawl could then end below ``max_pages``)."""
    picked: list[Admitted] = []
    size = max(2 * room, 64)
    while len(picked) < room:
        batch = list(itertools.islice(admitted, size))
        if not batch:
            break
        known = await asyncio.to_thread(app.store.seen_has, crawl_id, [fp for *_, fp in batch])
        picked.extend(item for item, seen in zip(batch, known, strict=True) if not seen)
        size *= 2
    return picked[:room]


def _follow(ctx: JobContext, admitted: Iterable[Admitted], depth: int, page: str) -> None:
    """Schedule links as page jobs of this crawl, each with ``seen=`` its URL. The specs
    are built here, not with ``ctx.schedule``: the arguments are known JSON (two strings
    and an int), so the generic call checks and encoding are skipped (a page has tens of
    links)."""
    options = ctx.app.get_task(PAGE_TASK).options
    for link, key, fp in admitted:
        spec = JobSpec(
            queue=options.queue,
            task=PAGE_TASK,
            args=[link, depth, page],
            priority=-depth,
            max_attempts=options.max_attempts,
            lease_seconds=options.lease,
            timeout=options.timeout,
            crawl=ctx.crawl_id,
            limit_key=key,
            fingerprint=fp,
        )
        ctx.children.append(spec)


class _Cap:
    """``max_pages`` for one page job, from the crawl's counters in the store.

    The crawl holds at most ``limit`` pages (done, dead, pending and running): a page
    adds no more links than that leaves room for, so the crawl finishes by itself when
    its last page allowed ends, and the page that ends as the last one drops any pending
    page left (pages that ended at the same instant may have queued one too many). A page
    starts only while the pages done and running stay within ``limit``: once ``limit``
    are done it is skipped and the crawl's pending pages are dropped at once; while other
    running pages may still fill the cap it waits a moment (``Snooze``, not an attempt).
    """

    def __init__(self, app: App, crawl_id: int, limit: int) -> None:
        self.app = app
        self.crawl_id = crawl_id
        self.limit = limit

    async def may_start(self) -> bool:
        crawl = await asyncio.to_thread(self.app.get_crawl, self.crawl_id)
        ended = crawl.done + crawl.dead
        if ended >= self.limit:
            await asyncio.to_thread(drop_pending, self.app, self.crawl_id)
            return False
        if ended + crawl.running > self.limit:  # this page is one of the running
            raise Snooze(random.uniform(0.2, 1.0))
        return True

    async def room(self) -> int:
        """How many links this page may add as it ends; 0 when it is the last page the
        cap allows (then the crawl's pending pages are dropped)."""
        crawl = await asyncio.to_thread(self.app.get_crawl, self.crawl_id)
        ended = crawl.done + crawl.dead
        if ended + 1 >= self.limit:
            await asyncio.to_thread(drop_pending, self.app, self.crawl_id)
            return 0
        return max(0, self.limit - (ended + crawl.pending + crawl.running))


def drop_pending(app: App, crawl_id: int) -> int:
    """Cancel every pending page job of the crawl, in batches; how many were cancelled.
    Cancelling the last live jobs finishes the crawl (once, with its ``on_finish``)."""
    dropped = 0
    after = 0
    while True:
        where = JobFilter(queue=PAGE_QUEUE, state=JobState.PENDING, limit=1000, after_id=after)
        batch = app.store.job_list(where)
        if not batch:
            return dropped
        after = batch[-1].id
        ids = [job.id for job in batch if job.crawl_id == crawl_id]
        if ids:
            dropped += len(app.store.job_cancel(ids))


def page_spec(app: App, url: str) -> Any:
    """The job of a start URL (depth 0), for ``app.crawl``."""
    task = install(app)
    return task.spec(url, 0, None, seen=url, limit_key=limit_key(url))


def install(app: App) -> Task[Any, Any]:
    """Register ``crawlq.page`` on ``app`` (once) and return it."""
    if PAGE_TASK in app.tasks:
        return app.tasks[PAGE_TASK]
    return app.task(name=PAGE_TASK, queue=PAGE_QUEUE, max_attempts=10, lease=60.0)(crawl_page)
