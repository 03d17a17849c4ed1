"""The page task: fetch one page of a crawl, record it, follow its links.

``crawlq.crawler.tasks.install(app)`` registers the task ``crawlq.page`` (queue ``crawl``),
whose body is ``crawl_page`` here, on an app; every ``crawlq worker`` has it, so any
worker of a store can run any crawl's pages. A page job is ``page(url, depth,
referrer)`` in a crawl whose meta holds its ``CrawlConfig``; its limit key is the page's
host (``hosts.limit_key``), so the store enforces the host's politeness on every worker
together.

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
   with the job's end (``JobContext.keep_result``): in the transaction that completes
   the page with its links, or fails it, and only if its lease is still valid; the body
   goes to the WARC file when the crawl has one.

An HTML page is parsed once, for its title, its links and the crawl's ``--extract``
fields (``crawlq.crawler.extract``); with a parse hook a 2xx page is handed to it
(``crawlq.crawler.items``: its items go into the record, it may replace the links, and
its failure is retried like a network error). A job whose ``sitemap`` argument is set
fetches a sitemap file instead (``crawlq.crawler.sitemaps``): its pages become page jobs
at depth 0 carrying their ``lastmod``, its sitemaps more sitemap jobs.

With ``revisit_changed`` the fetch carries ``If-None-Match`` / ``If-Modified-Since`` from
the previous crawl's record of the URL, and a 304 is recorded as unchanged with that
record's content and links, not parsed again (``crawlq.crawler.revisit``).

A page whose last attempt failed is recorded and then goes to the dead-letter queue
(``Discard``), so ``dead`` in the crawl's counts is the number of failed pages.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import itertools
import math
import random
import threading
import time
import traceback
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Iterator
from datetime import UTC
from typing import TYPE_CHECKING, Any, NoReturn

from crawlq.context import JobContext
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.extract import Document
from crawlq.crawler.fetch import Fetcher, FetchResult
from crawlq.crawler.fields import with_crawl_fields
from crawlq.crawler.hosts import RobotsCache, RobotsPending, host_delay, limit_key
from crawlq.crawler.items import Page, run_hook
from crawlq.crawler.links import extract_links, is_html, page_title, parse_html
from crawlq.crawler.output import WarcFile, worker_warc_path
from crawlq.crawler.records import ROBOTS_DISALLOWED, page_record, record_text
from crawlq.crawler.render import render_page
from crawlq.crawler.revisit import PREVIOUS_META_KEY, carried_over, conditional_headers, usable
from crawlq.crawler.sitemaps import MAX_LEVEL, read_sitemap
from crawlq.crawler.tasks import PAGE_TASK, install
from crawlq.crawler.throttle import Throttle
from crawlq.exceptions import ConfigurationError, CrawlNotFound, Discard, Retry, Snooze
from crawlq.fingerprint import canonical_url, fingerprint
from crawlq.jobs import JobSpec
from crawlq.stores.base import CrawlStore
from crawlq.worker.loops import at_loop_close

if TYPE_CHECKING:
    from crawlq.app import App

__all__ = ["crawl_page", "drop_pending", "page_spec", "sitemap_spec", "use_warc"]

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
        self.previous: dict[int, int] = {}  # crawl id -> its previous crawl (revisits)
        self.fetchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Fetcher]] = (
            weakref.WeakKeyDictionary()
        )
        self.config_keys: dict[int, tuple[CrawlConfig, str]] = {}  # id -> its fingerprint
        self.robots = RobotsCache()
        self.throttle = Throttle()
        self.warcs: dict[str, WarcFile] = {}
        self.warc_paths: dict[int, str] = {}

    async def config(self, app: App, crawl_id: int) -> CrawlConfig:
        config = self.configs.get(crawl_id)
        if config is None:
            crawl = await asyncio.to_thread(app.get_crawl, crawl_id)
            config = CrawlConfig.from_meta(crawl.meta)
            self.configs[crawl_id] = config
            previous = crawl.meta.get(PREVIOUS_META_KEY)
            if isinstance(previous, int):
                self.previous[crawl_id] = previous
            while len(self.configs) > 256:
                self.previous.pop(self.configs.popitem(last=False)[0], None)
        return config

    async def previous_record(self, app: App, crawl_id: int, url: str) -> dict[str, Any] | None:
        """The previous crawl's record of ``url`` when a conditional request may rest on
        it (``crawlq.crawler.revisit.usable``); None without one."""
        previous = self.previous.get(crawl_id)
        if previous is None:
            return None
        try:
            texts = await asyncio.to_thread(app.store.result_get, previous, [fingerprint(url)])
        except CrawlNotFound:  # deleted since
            return None
        return usable(texts[0])

    def fetcher(self, config: CrawlConfig) -> Fetcher:
        loop = asyncio.get_running_loop()
        by_config = self.fetchers.setdefault(loop, {})
        known = self.config_keys.get(id(config))
        if known is None or known[0] is not config:
            if len(self.config_keys) >= 1024:
                self.config_keys.clear()
            known = self.config_keys[id(config)] = (config, config.fingerprint())
        key = known[1]
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
            info = {
                "isPartOf": f"crawlq crawl {crawl_id}",
                "http-header-user-agent": config.full_user_agent,
                "robots": "obey" if config.obey_robots else "ignore",
                "operator": config.contact,
            }
            writer = self.warcs[path] = WarcFile(path, make_dirs=own is None, info=info)

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


def _keep(
    ctx: JobContext, crawl_id: int, url: str, record: dict[str, Any], config: CrawlConfig
) -> None:
    """The record goes with the job's end: kept in the transaction that completes (or
    fails) the page, only if its lease is still valid (``JobContext.keep_result``)."""
    with_crawl_fields(config, record)
    ctx.keep_result(fingerprint(url), record_text(record), crawl=crawl_id)


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
    ctx: JobContext,
    url: str,
    depth: int = 0,
    referrer: str | None = None,
    lastmod: str | None = None,
    sitemap: int | None = None,
) -> None:
    """The ``crawlq.page`` task (see the module docstring). The record goes to the
    crawl's results, not to the job's result (it would be stored twice). ``lastmod``
    is the page's ``<lastmod>`` in the sitemap that listed it; ``sitemap`` is not None
    when ``url`` is a sitemap file (its nesting level): its entries are followed."""
    app = ctx.app
    crawl_id = ctx.crawl_id
    if crawl_id is None:
        raise Discard("a crawlq.page job must belong to a crawl: start it with crawlq crawl")
    state = _state(app)
    config = await state.config(app, crawl_id)
    cap = None if config.max_pages is None else _Cap(app, crawl_id, config.max_pages)
    if cap is not None and not await cap.may_start():
        return None
    last = ctx.attempt >= config.max_attempts

    async def keep(record: dict[str, Any]) -> None:
        if lastmod is not None:
            record["lastmod"] = lastmod
        if sitemap is not None:
            record["kind"] = "sitemap"
        _keep(ctx, crawl_id, url, record, config)

    async def give_up(record: dict[str, Any], reason: str) -> NoReturn:
        """Keep the record of a page that failed for good; it goes to the dead letters."""
        await keep(record)
        if cap is not None:
            await cap.room()
        raise Discard(reason)

    try:
        fetcher = state.fetcher(config)
    except ConfigurationError as exc:  # the crawl's credential is missing on this worker
        if not last:
            raise Retry(_backoff(ctx.attempt), reason=str(exc)) from None
        await give_up(page_record(url, depth=depth, referrer=referrer, error=str(exc)), str(exc))

    floor = config.delay  # the autothrottle's lowest interval
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
            await keep(record)
            if cap is not None:
                await cap.room()
            return None
        floor = host_delay(config, robots)

    previous = None  # the previous crawl's record, when a conditional request rests on it
    conditional = None
    if config.revisit_changed and sitemap is None:
        previous = await state.previous_record(app, crawl_id, url)
        if previous is not None:
            conditional = (str(previous["final_url"]), conditional_headers(previous))
    result = await fetcher.fetch(url, conditional)
    if config.render:  # the DOM after JavaScript; its failures are retried as network errors
        result = await render_page(app, config, result, ctx.worker_id)
    if config.throttle is not None and ctx.job.limit_key:
        await state.throttle.observe(
            app, ctx.job.limit_key, result, config.throttle,
            floor=floor, max_running=config.host_concurrency,
        )  # fmt: skip
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

    if sitemap is not None:
        record = page_record(url, depth=depth, referrer=referrer, result=result)
        if result.error is not None:
            await give_up(record, result.error)
        if status is not None and status < 400:
            await _sitemap(ctx, crawl_id, config, cap, url, sitemap, result, record, give_up)
        await keep(record)
        return None

    unchanged = previous if status == 304 and result.error is None else None
    if unchanged is not None:  # not parsed again: the page is as it was
        record = page_record(url, depth=depth, referrer=referrer, result=result)
        record = carried_over(record, unchanged, config)
        links = list(unchanged["links"])
    else:
        record, links = await _parsed(ctx, config, url, depth, referrer, result, give_up)
    if config.revisit_changed:  # what the next crawl's conditional requests rest on
        record.setdefault("unchanged", False)
        for name, header in (("etag", "etag"), ("last_modified", "last-modified")):
            record[name] = result.headers.get(header) or record.get(name)
        record["links"] = [link for link in links if config.scope_rules.admits(link, 0)]
    warc = state.warc(crawl_id, config)
    if warc is not None and result.status is not None:
        if unchanged is None:
            await asyncio.to_thread(warc.write, result)
        elif config.rewrite_unchanged:
            revisit_of = (str(unchanged["final_url"]), str(unchanged["fetched_at"]))
            await asyncio.to_thread(warc.write, result, revisit_of)
    if result.error is not None:
        await give_up(record, result.error)
    if links and result.redirects and not await _owns_target(ctx, crawl_id, url, result):
        links = []  # another page job of the crawl fetches the redirect's target itself
    admitted = _admitted(app, crawl_id, config, links, depth + 1, url)
    if cap is not None:  # only links new to the crawl, as many as it has room for
        admitted = iter(await _unseen(app, crawl_id, admitted, await cap.room()))
    _follow(ctx, admitted, depth + 1, url)
    await keep(record)
    return None


async def _parsed(
    ctx: JobContext,
    config: CrawlConfig,
    url: str,
    depth: int,
    referrer: str | None,
    result: FetchResult,
    give_up: Callable[[dict[str, Any], str], Awaitable[NoReturn]],
) -> tuple[dict[str, Any], list[str]]:
    """The record of a fetched page and the links it follows: an HTML page parsed for
    its title, links and ``--extract`` fields, then handed to the parse hook."""
    status = result.status
    last = ctx.attempt >= config.max_attempts
    title: str | None = None
    links: list[str] = []
    fields: dict[str, Any] = {}
    charset = _charset(result.headers.get("content-type"))
    tree = None
    if result.error is None and status is not None and is_html(result.headers.get("content-type")):
        tree = parse_html(result.body, charset)
        title = page_title(tree)
        links = extract_links(tree, result.final_url, follow_nofollow=config.follow_nofollow)
        if config.extractor is not None:
            fields = config.extractor.extract(Document(tree, result.body, charset))
    record = page_record(
        url, depth=depth, referrer=referrer, result=result, title=title, links_found=len(links)
    )
    record.update(fields)
    ok = result.error is None and status is not None and 200 <= status < 300
    if config.parse is not None and ok and status is not None:
        page = Page(
            url=url, final_url=result.final_url, status=status, headers=result.headers,
            body=result.body, content_type=result.content_type, depth=depth,
            referrer=referrer, encoding=charset, tree=tree, links=links, fields=fields,
        )  # fmt: skip
        try:
            parsed = await run_hook(config.parse, page)
        except Exception as exc:
            error = f"parse hook {config.parse}: {type(exc).__name__}: {exc}"
            if not last:
                raise Retry(_backoff(ctx.attempt), reason=error) from exc
            record.update(error=error, traceback=traceback.format_exc())
            await give_up(record, error)
        record["items"] = parsed.items
        if parsed.links is not None:
            links = list(parsed.links)
    return record, links


async def _sitemap(
    ctx: JobContext,
    crawl_id: int,
    config: CrawlConfig,
    cap: _Cap | None,
    url: str,
    level: int,
    result: FetchResult,
    record: dict[str, Any],
    give_up: Callable[[dict[str, Any], str], Awaitable[NoReturn]],
) -> None:
    """Follow what the sitemap ``result`` lists (``crawlq.crawler.sitemaps``): its pages
    at depth 0 (scoped, with their ``<lastmod>``), its sitemaps below ``MAX_LEVEL``
    (not scoped). With ``max_pages`` its pages come first, as many as there is room
    for, and its sitemaps take at most half the room, or one (so an index leaves room
    for the pages of the sitemaps it lists)."""
    found = read_sitemap(result.final_url, result.body, decoded_cap=config.max_decoded_bytes)
    record["links_found"] = found.entries
    if found.error is not None:
        record["error"] = found.error
        await give_up(record, found.error)
    lastmods = {e.url: e.lastmod for e in (*found.pages, *found.sitemaps) if e.lastmod}
    sitemaps: list[Admitted] = []
    for entry in found.sitemaps if level < MAX_LEVEL else ():
        with contextlib.suppress(ValueError):
            sitemaps.append((entry.url, limit_key(entry.url), fingerprint(entry.url)))
    pages = _admitted(ctx.app, crawl_id, config, [e.url for e in found.pages], 0, url)
    if cap is not None:  # pages first; sitemaps take at most half the room
        room = await cap.room()
        picked = await _unseen(ctx.app, crawl_id, pages, room)
        share = min(room - len(picked), max(1, room // 2))
        sitemaps = await _unseen(ctx.app, crawl_id, iter(sitemaps), share)
        pages = iter(picked)
    _follow(ctx, sitemaps, 0, url, lastmods=lastmods, sitemap=level + 1)
    _follow(ctx, pages, 0, url, lastmods=lastmods)


Admitted = tuple[str, str, bytes]
"""A link a page follows: (URL, limit key, fingerprint)."""


def _admitted(
    app: App, crawl_id: int, config: CrawlConfig, links: list[str], depth: int, page: str
) -> Iterator[Admitted]:
    """The links the scope admits at ``depth``, in page order, each once, without the
    page itself and those this process knows the crawl has seen (``Store.seen_known``:
    the store would drop them), lazily (a page with 150,000 links may need only its
    first few)."""
    scope = config.scope_rules
    known = app.store.seen_known
    taken = {fingerprint(page)}
    for link in links:
        if not scope.admits(link, depth):
            continue
        try:
            key = limit_key(link)
        except ValueError:
            continue
        fp = fingerprint(link)
        if fp in taken or known(crawl_id, fp):
            continue
        taken.add(fp)
        yield link, key, fp


async def _unseen(
    app: App, crawl_id: int, admitted: Iterator[Admitted], room: int
) -> list[Admitted]:
    """The first ``room`` admitted links that the crawl has not seen yet, read from its
    seen set in growing batches (a link seen before would take a place and add nothing,
    and a crawl could then end below ``max_pages``)."""
    seen_set: CrawlStore = app.store
    picked: list[Admitted] = []
    size = max(2 * room, 64)
    while len(picked) < room:
        batch = list(itertools.islice(admitted, size))
        if not batch:
            break
        known = await asyncio.to_thread(seen_set.seen_has, crawl_id, [fp for *_, fp in batch])
        picked.extend(item for item, seen in zip(batch, known, strict=True) if not seen)
        size *= 2
    return picked[:room]


def _follow(
    ctx: JobContext,
    admitted: Iterable[Admitted],
    depth: int,
    page: str,
    *,
    lastmods: dict[str, str] | None = None,
    sitemap: int | None = None,
) -> None:
    """Schedule links as page jobs of this crawl, each with ``seen=`` its URL. The specs
    are the task's template (``Task.from_template``: every option of the task) with the
    link's fields set, not ``ctx.schedule``'s: the arguments are known JSON (two strings and an
    int, and from a sitemap its ``lastmod`` and ``sitemap`` level) and the fingerprint is
    at hand, so the generic call checks and encoding are skipped (a page has tens of
    links)."""
    task = ctx.app.get_task(PAGE_TASK)
    for link, key, fp in admitted:
        args: list[Any] = [link, depth, page]
        when = lastmods.get(link) if lastmods else None
        if when is not None or sitemap is not None:
            args += [when, sitemap]
        spec = task.from_template(
            args=args,
            priority=-depth,
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
    """Cancel every pending page of the crawl in one store operation; how many. With
    nothing left running the crawl finishes at once (once, with its ``on_finish``)."""
    return app.store.crawl_drop_pending(crawl_id)


def page_spec(app: App, url: str) -> JobSpec:
    """The job of a start URL (depth 0), for ``app.crawl``."""
    task = install(app)
    return task.with_options(seen=url, limit_key=limit_key(url)).spec(url, 0, None)


def sitemap_spec(app: App, url: str) -> JobSpec:
    """The job of a sitemap given to the crawl (or a robots.txt, for its sitemaps)."""
    task = install(app)
    return task.with_options(seen=url, limit_key=limit_key(url)).spec(url, 0, None, None, 0)
