"""Rendering: a page's HTML run through headless Chromium, for ``crawlq crawl --render``.

The page is fetched as always (``fetch.Fetcher``: address guard, caps, redirects, the
retry rules of ``pages``); a complete 2xx HTML response is then loaded into Debian's
``chromium``, driven by Playwright (``pip install 'crawlq[render]'``, ``apt-get install
chromium``; never a downloaded browser build), and the DOM after JavaScript ran replaces
the body. Title, links, ``sha256`` and the WARC body come from that DOM; status,
headers and ``bytes`` stay those of the server's response.

Chromium never reaches the network itself: every request it makes is intercepted
(``BrowserContext.route``) and either refused or fetched by crawlq's own ``Fetcher`` and
handed back (``route.fulfill``). Its resolver maps every name to nothing and its proxy
is a closed local port (``CHROMIUM_ARGS``), so a request that escaped interception
(a WebSocket, a prefetch) fails. Each request the page makes, in order:

1. the page's own document is served from the response already fetched (no second
   fetch); a navigation of the page elsewhere (a JavaScript redirect) is a request like
   the others;
2. only GET; images, media and fonts are not loaded (the DOM does not need them);
3. scope: the host must be one the crawl's scope admits (``prefix`` counts as ``host``
   here: a page under /docs/ may load /static/app.js) and no ``deny`` pattern may
   match; ``allow`` patterns select pages to follow, not what a page loads;
4. robots.txt of the request's origin, for the crawl's user agent (unless ignored);
5. the address guard, DNS and every redirect included (the fetcher's own rules);
6. at most ``MAX_REQUESTS`` requests and ``max_decoded_bytes`` in all per page.

A refused request fails in the page as a blocked one would in a browser. Requests a page
makes are not counted against the host's politeness limits (as a browser's are not).

The page is done once it has loaded and for ``QUIET_SECONDS`` no request has been in
flight, no ``fetch``/``XMLHttpRequest`` of its scripts is pending (or its handlers
waiting for their turn) and its DOM has not changed; all of it, load included, within
the crawl's ``timeout``. A failure (timeout, browser crash) sets ``error`` to
``"render: ..."``, which ``pages`` retries like a network error.

One browser per process, started on first use in a thread of its own (with its own
event loop, so it outlives the per-job event loops of the thread and process runtimes)
and closed when the process exits. Under ``crawlq worker --runtime process`` each child
process has its own, replaced with the child after ``--max-jobs-per-child`` pages or
above ``--max-memory-per-child`` (the child's memory counts its browser's). Any other
runtime renders too (a page is never refused for the worker that claimed it), with one
browser for the whole worker that is never recycled; a warning says so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import importlib.util
import logging
import multiprocessing
import multiprocessing.util
import os
import shutil
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from crawlq.crawler.fetch import Fetcher, FetchResult
from crawlq.crawler.hosts import RobotsCache, RobotsPending
from crawlq.crawler.links import Scope, is_html
from crawlq.exceptions import ConfigurationError

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.crawler.config import CrawlConfig

__all__ = [
    "CHROMIUM_ARGS",
    "MAX_REQUESTS",
    "QUIET_SECONDS",
    "chromium_path",
    "render_page",
    "render_problem",
]

logger = logging.getLogger("crawlq.crawler")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ENV = "CRAWLQ_CHROMIUM"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    # Chromium itself connects nowhere: every request is fulfilled by crawlq's fetcher.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]
MAX_REQUESTS = 200
"""Requests one rendered page may make (its own document not counted)."""
QUIET_SECONDS = 0.2
"""A loaded page is done once no request has been in flight for this long."""
MAX_PAGES_AT_ONCE = 8
"""Pages one browser renders at the same time (asyncio and thread runtimes)."""

# Runs in every page before its own scripts: counts the page's fetch and XMLHttpRequest
# calls until their handlers had a turn, and notes when the DOM or those last changed.
_WATCH_JS = """
(() => {
  let pending = 0, last = performance.now();
  const touch = () => { last = performance.now(); };
  const done = () => setTimeout(() => { pending--; touch(); }, 0);
  const fetch = window.fetch;
  window.fetch = function (...args) {
    pending++; touch();
    const answer = fetch.apply(this, args);
    answer.then(done, done);
    return answer;
  };
  const send = XMLHttpRequest.prototype.send;
  XMLHttpRequest.prototype.send = function (...args) {
    pending++; touch();
    this.addEventListener('loadend', done, {once: true});
    return send.apply(this, args);
  };
  new MutationObserver(touch).observe(document, {
    subtree: true, childList: true, attributes: true, characterData: true,
  });
  Object.defineProperty(window, '__crawlqQuiet', {
    value: () => [pending, performance.now() - last],
  });
})();
"""
_SKIPPED_TYPES = frozenset({"image", "media", "font"})
_HOP_HEADERS = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"}
)
_CHILD_PREFIX = "crawlq-child-"  # the process runtime's children


def chromium_path() -> str | None:
    """The Chromium binary: ``$CRAWLQ_CHROMIUM``, else Debian's ``/usr/bin/chromium``,
    else ``chromium`` on the PATH; None when there is none."""
    configured = os.environ.get(CHROMIUM_ENV)
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    return shutil.which("chromium")


def render_problem() -> str | None:
    """Why this machine cannot render (one line, with the command that fixes it), or
    None when it can."""
    if importlib.util.find_spec("playwright") is None:
        return "--render needs Playwright: pip install 'crawlq[render]'"
    if chromium_path() is None:
        configured = os.environ.get(CHROMIUM_ENV)
        if configured:
            return f"--render: ${CHROMIUM_ENV} is {configured!r}, which is not an executable"
        return (
            "--render needs Chromium: apt-get install chromium "
            f"(or set ${CHROMIUM_ENV} to a Chromium binary)"
        )
    return None


def _utf8(content_type: str | None) -> str:
    return f"{content_type or 'text/html'}; charset=utf-8"


def _served_headers(headers: dict[str, str]) -> dict[str, str]:
    """A response's headers for the browser: the body is handed over decoded."""
    return {k: v for k, v in headers.items() if k not in _HOP_HEADERS}


def _resource_scope(config: CrawlConfig) -> Scope:
    """What a page may load: the scope's hosts (prefix counts as host) and its denials."""
    mode = "host" if config.scope == "prefix" else config.scope
    return Scope(start_urls=config.start_urls, mode=mode, deny=config.deny)


async def render_page(
    app: App, config: CrawlConfig, result: FetchResult, owner: str
) -> FetchResult:
    """``result`` with the DOM after JavaScript as its body when it is a complete 2xx
    HTML response; any other result unchanged. ``owner`` is the worker's id (robots.txt
    fetch leases)."""
    if result.error is not None or result.status is None or not 200 <= result.status < 300:
        return result
    if not is_html(result.headers.get("content-type")):
        return result
    renderer = _renderer()
    future = renderer.submit(app, config, result, owner)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        future.cancel()
        raise


# -- the browser of this process ------------------------------------------------------------


class _Page:
    """The requests of one page being rendered (the route handler's state)."""

    def __init__(
        self, renderer: _Renderer, app: App, config: CrawlConfig, result: FetchResult, owner: str
    ) -> None:
        self.renderer = renderer
        self.app = app
        self.config = config
        self.result = result
        self.owner = owner
        self.document_served = False
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self.requests = 0
        self.bytes = 0
        self.refused: list[tuple[str, str]] = []

    async def handle(self, route: Any, request: Any) -> None:
        from playwright.async_api import Error as PlaywrightError

        self.in_flight += 1
        self.last_activity = time.monotonic()
        try:
            if not self.document_served and request.is_navigation_request():
                self.document_served = True
                result = self.result
                await route.fulfill(
                    status=result.status, headers=_served_headers(result.headers), body=result.body
                )
                return
            refusal = await self.refusal(request)
            if refusal is not None:
                self.refused.append((request.url, refusal))
                await route.abort("blockedbyclient")
                return
            fetcher = self.renderer.fetcher(self.config)
            fetched = await fetcher.fetch(request.url)
            if fetched.error is not None or fetched.status is None:
                self.refused.append((request.url, fetched.error or "no response"))
                await route.abort(
                    "blockedbyclient" if "refused" in (fetched.error or "") else "failed"
                )
                return
            self.bytes += len(fetched.body)
            await route.fulfill(
                status=fetched.status, headers=_served_headers(fetched.headers), body=fetched.body
            )
        except PlaywrightError:
            pass  # the page was closed meanwhile
        finally:
            self.in_flight -= 1
            self.last_activity = time.monotonic()

    async def refusal(self, request: Any) -> str | None:
        """Why the page may not make this request (the module's rules 2 to 4, 6)."""
        url: str = request.url
        if request.method != "GET":
            return f"method {request.method}: a crawler only sends GET"
        if request.resource_type in _SKIPPED_TYPES:
            return f"{request.resource_type}: not loaded"
        self.requests += 1
        if self.requests > MAX_REQUESTS:
            return f"over {MAX_REQUESTS} requests"
        if self.bytes > self.config.max_decoded_bytes:
            return f"over {self.config.max_decoded_bytes} bytes"
        why = self.renderer.scope(self.config).why_not(url, 0)
        if why is not None:
            return why
        if self.config.obey_robots:
            robots = await self.robots(url)
            if robots is None:
                return "robots.txt unavailable"
            if not robots.allowed(url, self.config.user_agent):
                return "robots.txt disallows it"
        return None

    async def robots(self, url: str) -> Any:
        """The rules of ``url``'s origin (None when unavailable), waiting while another
        process fetches them."""
        cache = self.renderer.robots
        fetcher = self.renderer.fetcher(self.config)
        while True:
            try:
                robots = await cache.get(self.app, fetcher, self.config, url, self.owner)
            except RobotsPending:
                await asyncio.sleep(0.25)
                continue
            return None if robots.temporary else robots

    async def quiet(self, page: Any) -> None:
        """Until no request has been in flight, and neither the page's own requests nor
        its DOM changed, for ``QUIET_SECONDS`` (the page's side from ``_WATCH_JS``)."""
        while True:
            idle = time.monotonic() - self.last_activity
            if self.in_flight == 0 and idle >= QUIET_SECONDS:
                pending, page_idle = await page.evaluate(
                    "() => window.__crawlqQuiet ? window.__crawlqQuiet() : [0, 1e9]"
                )
                if pending == 0 and page_idle >= QUIET_SECONDS * 1000:
                    return
            await asyncio.sleep(0.05)


class _Renderer:
    """One headless Chromium for this process, driven from a thread of its own."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._playwright: Any = None
        self._browser: Any = None
        self._starting: asyncio.Lock | None = None
        self._slots: asyncio.Semaphore | None = None
        self._fetchers: dict[str, Fetcher] = {}
        self._scopes: dict[str, Scope] = {}
        self.robots = RobotsCache()
        self.pages = 0
        self.browsers = 0

    def submit(
        self, app: App, config: CrawlConfig, result: FetchResult, owner: str
    ) -> concurrent.futures.Future[FetchResult]:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="crawlq-renderer", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
                multiprocessing.util.Finalize(None, self.close, exitpriority=10)
            loop = self._loop
        return asyncio.run_coroutine_threadsafe(self._render(app, config, result, owner), loop)

    def fetcher(self, config: CrawlConfig) -> Fetcher:
        key = config.fingerprint()
        fetcher = self._fetchers.get(key)
        if fetcher is None:
            fetcher = self._fetchers[key] = Fetcher(config.fetch_settings)
        return fetcher

    def scope(self, config: CrawlConfig) -> Scope:
        key = config.fingerprint()
        scope = self._scopes.get(key)
        if scope is None:
            scope = self._scopes[key] = _resource_scope(config)
        return scope

    async def _browser_ready(self) -> Any:
        if self._starting is None:
            self._starting = asyncio.Lock()
            self._slots = asyncio.Semaphore(MAX_PAGES_AT_ONCE)
        async with self._starting:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            await self._shutdown_browser()
            problem = render_problem()
            if problem is not None:
                raise ConfigurationError(problem)
            from playwright.async_api import async_playwright

            self._playwright = await async_playwright().start()
            self._browser = await self._playwright.chromium.launch(
                executable_path=chromium_path(),
                headless=True,
                args=CHROMIUM_ARGS,
                handle_sigint=False,
                handle_sigterm=False,
                handle_sighup=False,
            )
            self.browsers += 1
            logger.info("started headless chromium for process %d", os.getpid())
            if self.browsers == 1 and not multiprocessing.current_process().name.startswith(
                _CHILD_PREFIX
            ):
                logger.warning(
                    "rendering pages outside the process runtime: this worker's browser is "
                    "never recycled; run crawlq worker --runtime process "
                    "--max-jobs-per-child N --max-memory-per-child SIZE for that"
                )
            return self._browser

    async def _render(
        self, app: App, config: CrawlConfig, result: FetchResult, owner: str
    ) -> FetchResult:
        from playwright.async_api import Error as PlaywrightError

        started = time.monotonic()
        try:
            async with asyncio.timeout(config.timeout):
                browser = await self._browser_ready()
                assert self._slots is not None
                async with self._slots:
                    rendered = await self._load(browser, app, config, result, owner, started)
        except TimeoutError:
            rendered = dataclasses.replace(
                result, error=f"render: timed out after {config.timeout:g} s"
            )
        except PlaywrightError as exc:
            line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            rendered = dataclasses.replace(result, error=f"render: {line}")
        except ConfigurationError as exc:
            rendered = dataclasses.replace(result, error=str(exc))
        self.pages += 1
        elapsed = round((time.monotonic() - started) * 1000)
        return dataclasses.replace(rendered, elapsed_ms=result.elapsed_ms + elapsed)

    async def _load(
        self,
        browser: Any,
        app: App,
        config: CrawlConfig,
        result: FetchResult,
        owner: str,
        started: float,
    ) -> FetchResult:
        page_state = _Page(self, app, config, result, owner)
        context = await browser.new_context(
            user_agent=config.user_agent, service_workers="block", accept_downloads=False
        )
        try:
            await context.route("**/*", page_state.handle)
            await context.add_init_script(_WATCH_JS)
            page = await context.new_page()
            await page.goto(result.final_url, wait_until="load")
            await page_state.quiet(page)
            html: str = await page.content()
            final: str = page.url
        finally:
            await context.close()
        if page_state.refused:
            logger.debug("%s: refused %s", result.final_url, page_state.refused)
        if urllib.parse.urlsplit(final).scheme not in ("http", "https"):
            return dataclasses.replace(
                result, error="render: the page navigated to a URL it may not load"
            )
        headers = dict(result.headers)
        headers["content-type"] = _utf8(result.content_type)
        redirects = result.redirects
        if final != result.final_url:
            redirects = [*redirects, result.final_url]
        return dataclasses.replace(
            result, final_url=final, headers=headers, body=html.encode(), redirects=redirects
        )

    async def _shutdown_browser(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        for closing in (browser, playwright):
            if closing is None:
                continue
            try:
                await (closing.close() if closing is browser else closing.stop())
            except Exception:
                logger.debug("closing the browser failed", exc_info=True)

    async def _shutdown(self) -> None:
        await self._shutdown_browser()
        for fetcher in self._fetchers.values():
            await fetcher.aclose()
        self._fetchers.clear()

    def close(self) -> None:
        """Close the browser and stop the thread (at process exit)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10.0)
        except Exception:
            logger.debug("closing the renderer failed", exc_info=True)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5.0)


_RENDERER: _Renderer | None = None
_RENDERER_LOCK = threading.Lock()


def _renderer() -> _Renderer:
    global _RENDERER
    with _RENDERER_LOCK:
        if _RENDERER is None:
            _RENDERER = _Renderer()
        return _RENDERER
