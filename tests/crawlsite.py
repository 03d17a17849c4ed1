"""A generated web site for crawler tests, served on 127.0.0.1, with its own model.

``with CrawlSite(SiteSpec(pages=500)) as site:`` starts a threaded HTTP/1.1 server
(keep-alive, Content-Length on every response, a daemon thread per connection) on a random
port; ``site.url`` is the start URL ``http://127.0.0.1:PORT/``. The same data (a dict of
``Resource`` built once from the ``SiteSpec`` by a seeded ``random.Random``) drives both
the server and the model, so ``site.expected(...)`` (the URLs a crawl from ``/`` must
record, with the depth and outcome of each) cannot disagree with what is served.
``tests/unit/test_crawlsite.py`` proves it by crawling the site with the real fetcher.

Using it:

* ``site.expected(scope="host", follow_nofollow=False, obey_robots=True, max_depth=None,
  user_agent=DEFAULT_USER_AGENT, max_redirects=10)`` -> ``ExpectedCrawl``: ``.pages``
  (canonical URL -> ``PageExpectation``: depth, outcome, status, final_url, redirects,
  content_type, parsed, title, transient statuses, retry_after, error prefix, requested
  paths), ``.urls`` (all recorded), ``.fetched`` (all but robots-refused),
  ``.by_outcome(o)``, ``.outcomes()``, ``.depths()``, ``.requests()`` (the server paths a
  crawl requests when it fetches each URL once and retries transient failures just
  enough; a crawler that retries ``/error/500`` adds its attempts there).
  ``site.expected_pages(...)`` and the module's ``expected_pages(spec, origin, ...)`` give
  ``.fetched`` alone. Scope and robots decisions are made by crawlq's own ``Scope`` and
  ``Robots`` (the model evaluates ``spec.robots_text()`` for ``user_agent``);
* ``site.url``, ``site.origin`` (no slash), ``site.port``, ``site.url_for(path)``;
  ``site.log`` (``RequestRecord``: method, path, raw_path, started, finished, status,
  headers, user_agent), ``site.fetch_counts()``, ``site.requests_for(path)``,
  ``site.reset_log()``, ``site.reset()`` (log and flaky counters);
  ``site.robots_mode = "404" | "500" | "hang" | "ok"`` switches robots.txt at run time;
* error, flaky and unknown-path responses are HTML without links (crawlq parses the
  HTML of any status, so they add nothing);
  off-site URLs are ``unreachable`` whatever ``obey_robots`` says (their robots.txt
  cannot be fetched either); ``timeout`` assumes a crawler deadline under
  ``hang_seconds``; ``too-big`` assumes the fetcher's default caps (10 MiB wire, 50 MiB
  decoded) or smaller;
* ``Sentinel`` counts TCP connections; ``PRIVATE_SPELLINGS`` (all refused by the default
  ``AddressPolicy``) and ``LOOPBACK_SPELLINGS`` (those that reach a sentinel when private
  addresses are allowed) hold ``{port}`` for its port; ``crawl_site`` is a pytest factory
  fixture.

Vocabulary:

* URLs in the model are canonical (``crawlq.fingerprint.canonical_url``); server-side
  paths (``fetch_counts``, ``requests_for``, ``Resource.path``) are the canonical path and
  query, so ``/p/%35``, ``/p/5?`` and ``/p/./5`` are all counted as ``/p/5`` and
  ``/q?b=2&a=1`` as ``/q?a=1&b=2`` (``RequestRecord.raw_path`` keeps what was sent);
* depth: link hops from the start URL (depth 0), shortest over the links followed; a
  redirect does not add depth: links on a redirect's final page are at the depth of the
  redirecting URL plus one, resolved against the *final* URL;
* a redirect is recorded under the URL that was linked (the job), with ``final_url`` the
  page it ended on; that final page is a page of its own only if it is also linked
  directly (``/redirect/dup`` ends on ``/p/1``, which is also fetched as itself: the
  server then sees ``/p/1`` twice, once per job).

Pages (all reachable from ``/`` but ``/trap/...``; ``N`` = ``SiteSpec.pages``):

* ``/`` and ``/p/{n}`` (1 <= n <= N): HTML, ``<title>Page n</title>`` (``Home`` for
  ``/``). Page ``i`` (home = 0) links to ``i*2+1`` and ``i*2+2`` (a tree) plus
  ``links_per_page`` random pages (cycles). Each link uses one spelling of the same URL
  (``SPELLINGS``), all equal under ``canonical_url``: root-relative ``/p/5``, relative
  ``p/5`` (from ``/``) or ``5`` (from ``/p/n``), ``./``, ``/p/../p/5`` or ``../p/5``,
  absolute, absolute with the scheme and host upper-cased (``HTTP://127.0.0.1:PORT``; an
  IP has no case, with ``host="localhost"`` it is ``LOCALHOST``), ``#top`` fragment,
  percent-encoded digit ``/p/%35``, empty query ``/p/5?``, surrounding whitespace and
  newline;
* ``/q?a={k}&b={k+10}``: linked as ``a&b`` from ``/`` and as ``b&a`` (absolute) from
  ``/p/{k+1}``: one page;
* ``/nofollow/{k}``: linked only with ``rel=nofollow`` (from ``/`` and one random page);
  each links normally to ``/nofollow-child/{k}``. Found only with ``follow_nofollow``;
* ``/base/{k}``: ``<base href>`` to ``/base-target/{k}/`` (root-relative for even k,
  absolute for odd k) and a relative link ``leaf`` -> ``/base-target/{k}/leaf``;
  ``/badbase`` has ``<base href="javascript:...">`` (ignored) and ``badbase-leaf`` ->
  ``/badbase-leaf``;
* ``/xhtml``: ``application/xhtml+xml`` (parsed), links to ``/xhtml-child``; ``/map``:
  an ``<area href>`` to ``/area-target``;
* ignored links on ``/``: ``mailto:``, ``javascript:``, ``tel:``, ``data:``, ``ftp:``,
  ``file:``, ``#top``, empty href, ``<img src>``/``<link href>`` to ``/trap/...``;
  off-site ``http://other.invalid/``, ``https://www.other.invalid/page``,
  ``http://offsite.invalid:PORT/p/1`` (outside the ``host`` scope; with ``scope="any"``
  they are ``unreachable``: ``.invalid`` never resolves);
* ``/redirect/{code}/1`` -> ``/redirect/{code}/2`` -> ``/landing/{code}/`` for 301, 302,
  307, 308 (two hops, relative then absolute Location); the landing page links
  relatively to ``child`` -> ``/landing/{code}/child``; ``/redirect/dup`` -> 301 ->
  ``/p/1``; ``/loop/a`` -> ``/loop/b`` -> ``/loop/a`` (``redirect-loop``);
  ``/redirect/long/0`` -> ... -> ``/redirect/long/{long_redirect_hops}`` (a page):
  ``too-many-redirects`` when the hops exceed ``max_redirects`` (default 10);
* ``/missing/{k}``: 404 (``not-found``), linked from ``/`` and random pages;
  ``/error/500``: always 500 (``server-error``); ``/flaky/500``: 500 the first
  ``flaky_failures`` times, then 200; ``/flaky/429``: 429 + ``Retry-After: 1`` the first
  time, then 200; ``/flaky/503``: 503 + ``Retry-After: 1`` the first time, then 200
  (counters per path, ``reset()`` clears them); these three are ``ok`` with ``transient``
  statuses;
* ``/slow/{k}``: sleeps ``slow_seconds`` then 200 (``ok``); ``/hang``: sleeps
  ``hang_seconds`` (120 s, over the fetcher's default 30 s deadline; aborted at
  close): ``timeout``;
* ``/huge``: ``huge_bytes`` (20 MB) of HTML streamed with its Content-Length
  (``too-big``, error ``body over ...`` under the default 10 MiB cap);
  ``/bomb/gzip`` (1 GiB of zeros, ~1 MB on the wire) and ``/bomb/br`` (1 GiB, ~2 KB):
  ``too-big`` (``decoded body over ...``);
* ``/files/doc.pdf`` (``application/pdf``), ``/files/image.png`` (``image/png``),
  ``/files/notes.txt`` (``text/plain`` full of link-like text): ``ok``, not parsed; the
  ``/trap/...`` pages they mention are served (200) but never linked from HTML, so a
  crawl must not fetch them;
* ``/private/{k}`` (linked from ``/``, each links to ``/secret/{k}``) and
  ``/private/public/page``: the default robots.txt is ``User-agent: *``,
  ``Disallow: /private/``, ``Allow: /private/public/`` (+ ``Crawl-delay`` when set), so
  with ``obey_robots`` the private pages are ``robots-disallowed`` (not fetched, their
  links unknown) and the public one is ``ok``. ``robots_mode`` ``"404"`` (no rules),
  ``"500"`` or ``"hang"`` (every page ``robots-unavailable``: see ``Robots.unavailable``).
"""

from __future__ import annotations

import contextlib
import functools
import html
import http.server
import random
import socket
import sys
import threading
import time
import urllib.parse
import zlib
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType, TracebackType
from typing import Literal, TypeAlias

import brotli  # type: ignore[import-untyped]
import pytest

from crawlq.crawler.fetch import DEFAULT_USER_AGENT
from crawlq.crawler.links import Scope, ScopeMode
from crawlq.crawler.robots import Robots
from crawlq.fingerprint import canonical_url

__all__ = [
    "LOOPBACK_SPELLINGS",
    "PRIVATE_SPELLINGS",
    "SPELLINGS",
    "CrawlSite",
    "ExpectedCrawl",
    "Link",
    "Outcome",
    "PageExpectation",
    "RequestRecord",
    "Resource",
    "Sentinel",
    "SiteModel",
    "SiteSpec",
    "brotli_bomb",
    "crawl_site",
    "expected_pages",
    "gzip_bomb",
]

MIB = 1024 * 1024

RobotsMode: TypeAlias = Literal["ok", "404", "500", "hang"]
Kind: TypeAlias = Literal[
    "page", "redirect", "status", "flaky", "slow", "hang", "huge", "gzip-bomb", "br-bomb", "file"
]
#: What a crawl records for a URL:
#: ok            a 2xx response (after the ``transient`` failures, if any);
#: not-found     404;  server-error: 500 on every attempt;
#: redirect-loop / too-many-redirects: the fetcher's redirect errors;
#: too-big       ``body over N bytes`` (wire) or ``decoded body over N bytes`` (bombs);
#: timeout       no response before any sane deadline (``/hang``);
#: unreachable   an off-site ``.invalid`` host (DNS fails), only with scope ``any``;
#: robots-disallowed / robots-unavailable: not fetched (robots.txt rules / failure).
Outcome: TypeAlias = Literal[
    "ok",
    "not-found",
    "server-error",
    "redirect-loop",
    "too-many-redirects",
    "too-big",
    "timeout",
    "unreachable",
    "robots-disallowed",
    "robots-unavailable",
]
NOT_FETCHED: frozenset[str] = frozenset({"robots-disallowed", "robots-unavailable"})

#: Link spellings of ``/p/{n}``; every one is the same URL under ``canonical_url``.
#: ``{origin}``/``{ORIGIN}`` are replaced by the origin and its upper-cased form; ``{rel}``
#: is the page's own directory-relative form (``p/5`` from ``/``, ``5`` from ``/p/n``).
SPELLINGS: Mapping[str, str] = MappingProxyType(
    {
        "root": "/p/{n}",
        "relative": "{rel}",
        "dot": "./{rel}",
        "dotdot": "/p/../p/{n}",
        "absolute": "{origin}/p/{n}",
        "upper": "{ORIGIN}/p/{n}",
        "fragment": "/p/{n}#top",
        "percent": "/p/{pct}",
        "empty-query": "/p/{n}?",
        "whitespace": "\n  /p/{n} \t",
    }
)

_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


# --- bombs -------------------------------------------------------------------------------


@functools.cache
def gzip_bomb() -> bytes:
    """1 GiB of zeros as one gzip member of about 1 MB, built from a repeated block."""
    zeros = bytes(MIB)
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert compressor.compress(zeros) + compressor.flush(zlib.Z_FULL_FLUSH) == block
    tail = compressor.flush()[:-8]  # final empty block; the trailer is written below
    crc = zlib.crc32(zeros)
    for _ in range(1023):
        crc = zlib.crc32(zeros, crc)
    trailer = crc.to_bytes(4, "little") + (1024 * MIB % 2**32).to_bytes(4, "little")
    return head + block * 1023 + tail + trailer


_BOMB_LOCK = threading.Lock()


@functools.cache
def _brotli_bomb() -> bytes:
    compressor = brotli.Compressor(quality=5)
    zeros = bytes(MIB)
    parts = [compressor.process(zeros) for _ in range(1024)]
    parts.append(compressor.finish())
    return b"".join(parts)


def brotli_bomb() -> bytes:
    """1 GiB of zeros, brotli-compressed (streamed, bounded memory) to about 2 KB."""
    with _BOMB_LOCK:  # built once, not by 50 threads at a time
        return _brotli_bomb()


# --- the model -----------------------------------------------------------------------------


@dataclass(frozen=True)
class SiteSpec:
    """The knobs of a generated site; 0 or False turns a feature off."""

    pages: int = 2000
    links_per_page: int = 4
    seed: int = 1
    host: str = "127.0.0.1"  # the host in site.url; the server always binds 127.0.0.1
    query_pages: int = 3
    nofollow_pages: int = 3
    base_pages: int = 2
    not_found_pages: int = 5
    private_pages: int = 2
    slow_pages: int = 3
    slow_seconds: float = 0.3
    hang: bool = True
    hang_seconds: float = 120.0  # over the fetcher's default 30 s deadline
    huge_bytes: int = 20_000_000
    bombs: bool = True
    files: bool = True
    redirects: bool = True
    long_redirect_hops: int = 12
    errors: bool = True
    flaky_failures: int = 2
    offsite: bool = True
    other_schemes: bool = True
    robots_txt: str | None = None  # None: the default rules (module docstring)
    crawl_delay: float | None = None
    robots_mode: RobotsMode = "ok"

    def robots_text(self) -> str:
        """The robots.txt served in ``robots_mode`` ``"ok"``."""
        if self.robots_txt is not None:
            return self.robots_txt
        text = "User-agent: *\nDisallow: /private/\nAllow: /private/public/\n"
        if self.crawl_delay is not None:
            text += f"Crawl-delay: {self.crawl_delay:g}\n"
        return text


@dataclass(frozen=True)
class Link:
    """One ``<a href>`` (or ``<area href>`` when ``area``) on a page, ``href`` as written
    (with ``{origin}``/``{ORIGIN}``/``{port}`` placeholders)."""

    href: str
    nofollow: bool = False
    spelling: str = "plain"  # a SPELLINGS name for links to /p/{n}
    area: bool = False


@dataclass(frozen=True)
class Resource:
    """One served path (canonical path and query) and how it is answered."""

    path: str
    kind: Kind
    title: str | None = None
    links: tuple[Link, ...] = ()
    base_href: str | None = None
    status: int = 200
    location: str | None = None  # for redirects; may hold {origin}
    content_type: str = "text/html; charset=utf-8"
    body: str | None = None  # for files; may hold {origin}
    failures: tuple[int, ...] = ()  # statuses served before the first 200 (flaky)
    retry_after: str | None = None
    extra: str = ""  # raw HTML appended to a page's body (ignored links)


@dataclass(frozen=True)
class PageExpectation:
    """What a crawl records for one URL (canonical); see ``Outcome``."""

    url: str
    depth: int
    outcome: Outcome
    kind: Kind | None  # None for off-site URLs
    status: int | None  # the final status (after transient failures); None: no response
    final_url: str | None  # canonical; differs from url after redirects
    redirects: tuple[str, ...] = ()  # canonical URLs whose redirect was followed
    content_type: str | None = None  # media type, lower case, no parameters
    parsed: bool = False  # an HTML page whose links are followed
    title: str | None = None
    transient: tuple[int, ...] = ()  # statuses served before success (retry needed)
    retry_after: float | None = None
    error: str | None = None  # the expected FetchResult.error prefix
    requested: tuple[str, ...] = ()  # server paths one fetch requests, in order

    @property
    def fetched(self) -> bool:
        return self.outcome not in NOT_FETCHED


@dataclass(frozen=True)
class ExpectedCrawl:
    """The model's answer for one crawl setting."""

    start_url: str
    pages: Mapping[str, PageExpectation]

    @property
    def urls(self) -> frozenset[str]:
        """Every URL the crawl records (robots-refused ones included)."""
        return frozenset(self.pages)

    @property
    def fetched(self) -> frozenset[str]:
        """The URLs the crawl must fetch (all but the robots-refused ones)."""
        return frozenset(u for u, p in self.pages.items() if p.fetched)

    def by_outcome(self, outcome: Outcome) -> frozenset[str]:
        return frozenset(u for u, p in self.pages.items() if p.outcome == outcome)

    def outcomes(self) -> Counter[str]:
        return Counter(p.outcome for p in self.pages.values())

    def depths(self) -> dict[str, int]:
        return {u: p.depth for u, p in self.pages.items()}

    def requests(self, *, robots: bool = True) -> Counter[str]:
        """Server paths and how often a crawl requests them when it fetches each URL once
        and retries transient failures exactly as often as needed (plus ``/robots.txt``
        once when ``robots``). Redirect hops count; ``/redirect/dup`` adds one to
        ``/p/1``."""
        counts: Counter[str] = Counter()
        for page in self.pages.values():
            if page.fetched:
                for path in page.requested:
                    counts[path] += 1
                if page.transient and page.requested:
                    counts[page.requested[-1]] += len(page.transient)
        if robots:
            counts["/robots.txt"] += 1
        return counts


def _key(target: str) -> str:
    """The canonical path and query of a request target (origin-form or absolute)."""
    try:
        if target.startswith("/"):
            canonical = canonical_url("http://h" + target)
            return canonical[len("http://h") :]
        parts = urllib.parse.urlsplit(canonical_url(target))
        return parts.path + (f"?{parts.query}" if parts.query else "")
    except (ValueError, TypeError):
        return target


def _path_of(url: str) -> str:
    """The canonical path and query of an absolute URL."""
    parts = urllib.parse.urlsplit(canonical_url(url))
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _media(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _resolve(href: str, base: str) -> str | None:
    """``href`` against ``base`` as ``extract_links`` does: absolute, no fragment, http(s)."""
    href = href.strip("".join(chr(c) for c in range(0x21))).translate(
        str.maketrans("", "", "\t\n\r")
    )
    if not href or href.startswith("#"):
        return None
    url, _ = urllib.parse.urldefrag(urllib.parse.urljoin(base, href))
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return url


class SiteModel:
    """The site's resources, built deterministically from a ``SiteSpec``."""

    def __init__(self, spec: SiteSpec) -> None:
        self.spec = spec
        self.resources: dict[str, Resource] = {}
        self._build()

    # building

    def _add(self, resource: Resource) -> None:
        path = _key(resource.path)
        assert path not in self.resources, path
        self.resources[path] = replace(resource, path=path)

    def _page_href(self, n: int, spelling: str, from_home: bool) -> str:
        rel = f"p/{n}" if from_home else str(n)
        href = SPELLINGS[spelling]
        if spelling == "dotdot" and not from_home:
            href = "../p/{n}"
        digits = str(n)
        pct = f"%{ord(digits[0]):02X}{digits[1:]}"
        return href.replace("{rel}", rel).replace("{n}", digits).replace("{pct}", pct)

    def _build(self) -> None:
        spec = self.spec
        rng = random.Random(spec.seed)
        names = list(SPELLINGS)
        pages = spec.pages
        links: dict[int, list[Link]] = {i: [] for i in range(pages + 1)}  # 0 is home
        extra_home: list[Link] = []

        def page_link(source: int, target: int, spelling: str | None = None) -> Link:
            chosen = spelling or rng.choice(names)
            return Link(self._page_href(target, chosen, source == 0), spelling=chosen)

        for i in range(pages + 1):
            for child in (i * 2 + 1, i * 2 + 2):
                if child <= pages:
                    links[i].append(page_link(i, child))
            if i and pages > 1:
                for _ in range(spec.links_per_page):
                    target = rng.randint(1, pages)
                    if target != i:
                        links[i].append(page_link(i, target))
        if pages:
            # every spelling at least once, from home and from a page
            for name in names:
                links[0].append(page_link(0, rng.randint(1, pages), name))
                source = rng.randint(1, pages)
                links[source].append(page_link(source, rng.randint(1, pages), name))

        def random_page() -> int:
            return rng.randint(1, pages) if pages else 0

        for k in range(spec.query_pages):
            path = f"/q?a={k}&b={k + 10}"
            self._add(Resource(path, "page", title=f"Query {k}"))
            extra_home.append(Link(path, spelling="query-ab"))
            source = min(k + 1, pages)
            links[source].append(Link(f"{{origin}}/q?b={k + 10}&a={k}", spelling="query-ba"))
        for k in range(spec.nofollow_pages):
            self._add(
                Resource(
                    f"/nofollow/{k}",
                    "page",
                    title=f"Nofollow {k}",
                    links=(Link(f"/nofollow-child/{k}"),),
                )
            )
            self._add(Resource(f"/nofollow-child/{k}", "page", title=f"Nofollow child {k}"))
            extra_home.append(Link(f"/nofollow/{k}", nofollow=True))
            links[random_page()].append(Link(f"/nofollow/{k}", nofollow=True))
        if pages:
            links[0].append(Link("/p/1", nofollow=True))  # nofollow to a reachable page
        if spec.base_pages:
            for k in range(spec.base_pages):
                base = f"/base-target/{k}/" if k % 2 == 0 else f"{{origin}}/base-target/{k}/"
                self._add(
                    Resource(
                        f"/base/{k}",
                        "page",
                        title=f"Base {k}",
                        base_href=base,
                        links=(Link("leaf"), Link("/")),
                    )
                )
                self._add(Resource(f"/base-target/{k}/leaf", "page", title=f"Base leaf {k}"))
                extra_home.append(Link(f"/base/{k}"))
            self._add(
                Resource(
                    "/badbase",
                    "page",
                    title="Bad base",
                    base_href="javascript:alert(1)",
                    links=(Link("badbase-leaf"),),
                )
            )
            self._add(Resource("/badbase-leaf", "page", title="Bad base leaf"))
            extra_home.append(Link("/badbase"))
        self._add(
            Resource(
                "/xhtml",
                "page",
                title="XHTML",
                content_type="application/xhtml+xml",
                links=(Link("/xhtml-child"),),
            )
        )
        self._add(Resource("/xhtml-child", "page", title="XHTML child"))
        self._add(Resource("/map", "page", title="Map", links=(Link("/area-target", area=True),)))
        self._add(Resource("/area-target", "page", title="Area target"))
        extra_home += [Link("/xhtml"), Link("/map")]
        if spec.other_schemes:
            for href in (
                "mailto:someone@example.com",
                "javascript:void(0)",
                "tel:+15550100",
                "data:text/html,<a href=/trap/data>x</a>",
                "ftp://127.0.0.1/file",
                "file:///etc/passwd",
                "#top",
                "",
            ):
                extra_home.append(Link(href, spelling="ignored"))
        if spec.offsite:
            for href in (
                "http://other.invalid/",
                "https://www.other.invalid/page",
                "http://offsite.invalid:{port}/p/1",
            ):
                extra_home.append(Link(href, spelling="offsite"))
        if spec.redirects:
            for code in (301, 302, 307, 308):
                self._add(
                    Resource(
                        f"/redirect/{code}/1",
                        "redirect",
                        status=code,
                        location=f"/redirect/{code}/2",
                    )
                )
                self._add(
                    Resource(
                        f"/redirect/{code}/2",
                        "redirect",
                        status=code,
                        location=f"{{origin}}/landing/{code}/",
                    )
                )
                self._add(
                    Resource(
                        f"/landing/{code}/",
                        "page",
                        title=f"Landing {code}",
                        links=(Link("child"),),
                    )
                )
                self._add(Resource(f"/landing/{code}/child", "page", title=f"Child {code}"))
                extra_home.append(Link(f"/redirect/{code}/1"))
            if pages:
                self._add(Resource("/redirect/dup", "redirect", status=301, location="/p/1"))
                extra_home.append(Link("/redirect/dup"))
            self._add(Resource("/loop/a", "redirect", status=302, location="/loop/b"))
            self._add(Resource("/loop/b", "redirect", status=302, location="/loop/a"))
            extra_home.append(Link("/loop/a"))
            hops = spec.long_redirect_hops
            for i in range(hops):
                self._add(
                    Resource(
                        f"/redirect/long/{i}",
                        "redirect",
                        status=302,
                        location=f"/redirect/long/{i + 1}",
                    )
                )
            self._add(Resource(f"/redirect/long/{hops}", "page", title="Long redirect end"))
            extra_home.append(Link("/redirect/long/0"))
        for k in range(spec.not_found_pages):
            self._add(Resource(f"/missing/{k}", "status", status=404))
            extra_home.append(Link(f"/missing/{k}"))
            links[random_page()].append(Link(f"/missing/{k}"))
        if spec.errors:
            self._add(Resource("/error/500", "status", status=500))
            failures = (500,) * spec.flaky_failures
            self._add(Resource("/flaky/500", "flaky", title="Flaky 500", failures=failures))
            self._add(
                Resource("/flaky/429", "flaky", title="Flaky 429", failures=(429,), retry_after="1")
            )
            self._add(
                Resource("/flaky/503", "flaky", title="Flaky 503", failures=(503,), retry_after="1")
            )
            for path in ("/error/500", "/flaky/500", "/flaky/429", "/flaky/503"):
                extra_home.append(Link(path))
        for k in range(spec.slow_pages):
            self._add(Resource(f"/slow/{k}", "slow", title=f"Slow {k}"))
            links[random_page()].append(Link(f"/slow/{k}"))
        if spec.hang:
            self._add(Resource("/hang", "hang", title="Hang"))
            extra_home.append(Link("/hang"))
        if spec.huge_bytes:
            self._add(Resource("/huge", "huge", title="Huge"))
            extra_home.append(Link("/huge"))
        if spec.bombs:
            self._add(Resource("/bomb/gzip", "gzip-bomb"))
            self._add(Resource("/bomb/br", "br-bomb"))
            extra_home += [Link("/bomb/gzip"), Link("/bomb/br")]
        if spec.files:
            self._add(
                Resource(
                    "/files/doc.pdf",
                    "file",
                    content_type="application/pdf",
                    body="%PDF-1.4\n1 0 obj << /Type /Annot /A << /URI ({origin}/trap/pdf) >> >>"
                    '\nendobj\n<a href="/trap/pdf-a">x</a>\n%%EOF\n',
                )
            )
            self._add(Resource("/files/image.png", "file", content_type="image/png"))
            self._add(
                Resource(
                    "/files/notes.txt",
                    "file",
                    content_type="text/plain; charset=utf-8",
                    body='Not HTML: <a href="/trap/text-a">x</a> <a href="{origin}/trap/text">'
                    "y</a>\nhttp://127.0.0.1/trap/text-bare /trap/text-path\n",
                )
            )
            for name in ("pdf", "pdf-a", "text-a", "text", "text-bare", "text-path"):
                self._add(Resource(f"/trap/{name}", "page", title=f"Trap {name}"))
            for path in ("/files/doc.pdf", "/files/image.png", "/files/notes.txt"):
                extra_home.append(Link(path))
        for name in ("img", "css", "data"):
            self._add(Resource(f"/trap/{name}", "page", title=f"Trap {name}"))
        for k in range(spec.private_pages):
            self._add(
                Resource(
                    f"/private/{k}",
                    "page",
                    title=f"Private {k}",
                    links=(Link(f"/secret/{k}"),),
                )
            )
            self._add(Resource(f"/secret/{k}", "page", title=f"Secret {k}"))
            extra_home.append(Link(f"/private/{k}"))
        if spec.private_pages:
            self._add(Resource("/private/public/page", "page", title="Public under private"))
            extra_home.append(Link("/private/public/page"))
        self._add(
            Resource(
                "/",
                "page",
                title="Home",
                links=(*links[0], *extra_home),
                extra='<img src="/trap/img"><link rel="stylesheet" href="/trap/css">',
            )
        )
        for i in range(1, pages + 1):
            self._add(Resource(f"/p/{i}", "page", title=f"Page {i}", links=tuple(links[i])))

    # serving

    @staticmethod
    def fill(template: str, origin: str, port: int) -> str:
        """``template`` with ``{origin}``, ``{ORIGIN}`` and ``{port}`` filled in."""
        upper = origin.upper()
        return (
            template.replace("{origin}", origin)
            .replace("{ORIGIN}", upper)
            .replace("{port}", str(port))
        )

    def render(self, resource: Resource, origin: str, port: int) -> bytes:
        """The HTML of a page resource."""
        title = html.escape(resource.title or "")
        head = f"<title>{title}</title>"
        if resource.base_href is not None:
            base = html.escape(self.fill(resource.base_href, origin, port))
            head += f'<base href="{base}">'
        items = []
        for link in resource.links:
            href = html.escape(self.fill(link.href, origin, port), quote=True)
            rel = ' rel="NoFollow noopener"' if link.nofollow else ""
            if link.area:
                items.append(
                    f'<map name="m"><area shape="rect" coords="0,0,1,1" href="{href}"{rel}></map>'
                )
            else:
                items.append(f'<li><a href="{href}"{rel}>{html.escape(link.spelling)}</a></li>')
        body = (
            f"<!DOCTYPE html>\n<html><head><meta charset=utf-8>{head}</head>"
            f'<body><h1 id="top">{title}</h1><ul>\n' + "\n".join(items) + "\n</ul>"
            f"{resource.extra}</body></html>\n"
        )
        return body.encode()

    def file_body(self, resource: Resource, origin: str, port: int) -> bytes:
        if resource.content_type == "image/png":
            return _PNG
        return self.fill(resource.body or "", origin, port).encode()

    # expectations

    def robots(self, origin: str, mode: RobotsMode | None = None) -> Robots:
        """The robots.txt rules a crawler gets from the site in ``mode``."""
        mode = mode or self.spec.robots_mode
        url = origin + "/robots.txt"
        if mode == "ok":
            return Robots.parse(self.spec.robots_text(), url)
        return Robots.unavailable(None if mode == "hang" else int(mode), url)

    def expected(
        self,
        origin: str,
        *,
        scope: ScopeMode = "host",
        follow_nofollow: bool = False,
        obey_robots: bool = True,
        max_depth: int | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        robots_mode: RobotsMode | None = None,
        max_redirects: int = 10,
    ) -> ExpectedCrawl:
        """What a crawl from ``origin + "/"`` records: a BFS over the model's links."""
        start = canonical_url(origin + "/")
        site_netloc = urllib.parse.urlsplit(start).netloc
        port = urllib.parse.urlsplit(start).port or 80
        scoper = Scope(start_urls=(start,), mode=scope, max_depth=max_depth)
        rules = self.robots(origin, robots_mode) if obey_robots else None
        pages: dict[str, PageExpectation] = {}
        queue: deque[tuple[str, int]] = deque([(start, 0)])
        seen = {start}
        while queue:
            url, depth = queue.popleft()
            expectation, page = self._expect(
                url, depth, origin, port, site_netloc, rules, user_agent, max_redirects
            )
            pages[url] = expectation
            if page is None or not expectation.parsed or expectation.final_url is None:
                continue
            for target in self.links_of(page, expectation.final_url, origin, port, follow_nofollow):
                canonical = canonical_url(target)
                if canonical in seen or not scoper.admits(canonical, depth + 1):
                    continue
                seen.add(canonical)
                queue.append((canonical, depth + 1))
        return ExpectedCrawl(start, MappingProxyType(pages))

    def links_of(
        self, page: Resource, page_url: str, origin: str, port: int, follow_nofollow: bool
    ) -> list[str]:
        """The absolute links of ``page`` served at ``page_url``, as extract_links sees them."""
        base = page_url
        if page.base_href is not None:
            declared = _resolve(self.fill(page.base_href, origin, port), page_url)
            if declared is not None:
                base = declared
        found = []
        for link in page.links:
            if link.nofollow and not follow_nofollow:
                continue
            url = _resolve(self.fill(link.href, origin, port), base)
            if url is not None:
                found.append(url)
        return found

    def _expect(
        self,
        url: str,
        depth: int,
        origin: str,
        port: int,
        site_netloc: str,
        rules: Robots | None,
        user_agent: str,
        max_redirects: int,
    ) -> tuple[PageExpectation, Resource | None]:
        parts = urllib.parse.urlsplit(url)
        if parts.netloc != site_netloc or parts.scheme != "http":
            outcome: Outcome = "unreachable"
            return PageExpectation(url, depth, outcome, None, None, None, error="dns"), None
        if rules is not None and not rules.allowed(url, user_agent):
            outcome = "robots-unavailable" if rules.temporary else "robots-disallowed"
            return PageExpectation(url, depth, outcome, None, None, None), None
        current = url
        chain = [url]
        redirects: list[str] = []
        while True:
            path = _path_of(current)
            resource = self.resources.get(path) or Resource(path, "status", status=404)
            requested = tuple(_path_of(u) for u in chain)
            if resource.kind != "redirect":
                break
            target = canonical_url(
                urllib.parse.urljoin(current, self.fill(resource.location or "", origin, port))
            )
            if target in chain:
                return PageExpectation(
                    url,
                    depth,
                    "redirect-loop",
                    "redirect",
                    resource.status,
                    current,
                    tuple(redirects),
                    error="redirect loop",
                    requested=requested,
                ), None
            if len(redirects) >= max_redirects:
                return PageExpectation(
                    url,
                    depth,
                    "too-many-redirects",
                    "redirect",
                    resource.status,
                    current,
                    tuple(redirects),
                    error="too many redirects",
                    requested=requested,
                ), None
            redirects.append(current)
            chain.append(target)
            current = target
        media = _media(resource.content_type)
        kind = resource.kind
        base = PageExpectation(
            url,
            depth,
            "ok",
            kind,
            200,
            current,
            tuple(redirects),
            content_type=media,
            requested=requested,
        )
        if kind == "status":
            outcome = "not-found" if resource.status == 404 else "server-error"
            return replace(base, outcome=outcome, status=resource.status), None
        if kind == "hang":
            return replace(base, outcome="timeout", status=None, error="deadline"), None
        if kind in ("huge", "gzip-bomb", "br-bomb"):
            error = "body over" if kind == "huge" else "decoded body over"
            return replace(base, outcome="too-big", error=error), None
        parsed = kind != "file" and media in ("text/html", "application/xhtml+xml")
        return replace(
            base,
            parsed=parsed,
            title=resource.title if parsed else None,
            transient=resource.failures,
            retry_after=float(resource.retry_after) if resource.retry_after else None,
        ), resource


def expected_pages(
    spec: SiteSpec,
    origin: str,
    *,
    scope: ScopeMode = "host",
    follow_nofollow: bool = False,
    obey_robots: bool = True,
    max_depth: int | None = None,
) -> frozenset[str]:
    """The canonical URLs a crawl from ``origin + "/"`` must fetch (robots-refused ones
    excluded); ``SiteModel(spec).expected(...)`` has the depth and outcome of each."""
    return (
        SiteModel(spec)
        .expected(
            origin,
            scope=scope,
            follow_nofollow=follow_nofollow,
            obey_robots=obey_robots,
            max_depth=max_depth,
        )
        .fetched
    )


# --- the server ----------------------------------------------------------------------------


@dataclass
class RequestRecord:
    """One request as the server saw it (times from ``time.monotonic()``)."""

    method: str
    path: str  # canonical path and query
    raw_path: str  # the request target as sent
    started: float
    headers: dict[str, str]  # lower-case names, repeated ones joined with ", "
    finished: float | None = None  # when the response was written (or aborted)
    status: int | None = None  # None: no response (aborted)
    thread: int = field(default_factory=threading.get_ident)

    @property
    def user_agent(self) -> str | None:
        return self.headers.get("user-agent")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server.site._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.server.site._track(self.connection, False)

    def do_GET(self) -> None:
        self.server.site._handle(self, "GET")

    def do_HEAD(self) -> None:
        self.server.site._handle(self, "HEAD")


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256

    def __init__(self, site: CrawlSite) -> None:
        self.site = site
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client going away is normal
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class CrawlSite:
    """The generated site, served on 127.0.0.1 (see the module docstring)."""

    def __init__(self, spec: SiteSpec | None = None) -> None:
        self.spec = spec or SiteSpec()
        self.model = SiteModel(self.spec)
        self.robots_mode: RobotsMode = self.spec.robots_mode  # may be changed per test
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._log: list[RequestRecord] = []
        self._hits: Counter[str] = Counter()
        self._connections: set[socket.socket] = set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # lifecycle

    def start(self) -> CrawlSite:
        if self.spec.bombs:  # built once per process (about 1 s), not during a crawl
            gzip_bomb()
            brotli_bomb()
        server = _Server(self)
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving: sleeping requests are aborted, open connections shut down."""
        self.closing.set()
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> CrawlSite:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # addresses

    @property
    def origin(self) -> str:
        """``http://HOST:PORT`` (no trailing slash)."""
        return f"http://{self.spec.host}:{self.port}"

    @property
    def url(self) -> str:
        """The start URL, ``http://HOST:PORT/``."""
        return self.origin + "/"

    def url_for(self, path: str) -> str:
        """The canonical absolute URL of a site path."""
        return canonical_url(self.origin + path)

    # model

    def expected(
        self,
        *,
        scope: ScopeMode = "host",
        follow_nofollow: bool = False,
        obey_robots: bool = True,
        max_depth: int | None = None,
        user_agent: str = DEFAULT_USER_AGENT,
        max_redirects: int = 10,
    ) -> ExpectedCrawl:
        """``SiteModel.expected`` for this server (its port and current robots_mode)."""
        return self.model.expected(
            self.origin,
            scope=scope,
            follow_nofollow=follow_nofollow,
            obey_robots=obey_robots,
            max_depth=max_depth,
            user_agent=user_agent,
            robots_mode=self.robots_mode,
            max_redirects=max_redirects,
        )

    def expected_pages(
        self,
        *,
        scope: ScopeMode = "host",
        follow_nofollow: bool = False,
        obey_robots: bool = True,
        max_depth: int | None = None,
    ) -> frozenset[str]:
        """The canonical URLs a crawl from ``url`` must fetch with these settings."""
        return self.expected(
            scope=scope,
            follow_nofollow=follow_nofollow,
            obey_robots=obey_robots,
            max_depth=max_depth,
        ).fetched

    # the request log

    @property
    def log(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._log)

    def fetch_counts(self) -> Counter[str]:
        """Requests per canonical path (and query)."""
        with self._lock:
            return Counter(record.path for record in self._log)

    def requests_for(self, path: str) -> list[RequestRecord]:
        """The requests for ``path`` (any spelling; compared canonically), in order."""
        key = _key(path)
        with self._lock:
            return [record for record in self._log if record.path == key]

    def reset_log(self) -> None:
        with self._lock:
            self._log.clear()

    def reset(self) -> None:
        """Clear the log and the per-path counters of the flaky pages."""
        with self._lock:
            self._log.clear()
            self._hits.clear()

    # serving

    def _track(self, connection: socket.socket, add: bool) -> None:
        with self._lock:
            if add:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def _handle(self, handler: _Handler, method: str) -> None:
        headers: dict[str, str] = {}
        for name, value in handler.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        path = _key(handler.path)
        record = RequestRecord(method, path, handler.path, time.monotonic(), headers)
        with self._lock:
            self._log.append(record)
            previous = self._hits[path]
            self._hits[path] += 1
        try:
            self._respond(handler, record, previous, method == "HEAD")
        except OSError:
            handler.close_connection = True
        finally:
            record.finished = time.monotonic()

    def _send(
        self,
        handler: _Handler,
        record: RequestRecord,
        status: int,
        body: bytes,
        head: bool,
        content_type: str = "text/html; charset=utf-8",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        if not head:
            handler.wfile.write(body)
        handler.wfile.flush()
        record.status = status

    def _abort(self, handler: _Handler) -> None:
        handler.close_connection = True

    def _respond(self, handler: _Handler, record: RequestRecord, previous: int, head: bool) -> None:
        spec, origin, port = self.spec, self.origin, self.port
        path = record.path
        if path == "/robots.txt":
            mode = self.robots_mode
            if mode == "hang":
                if not self.closing.wait(spec.hang_seconds):
                    self._send(handler, record, 500, b"", head)
                else:
                    self._abort(handler)
                return
            if mode == "ok":
                body = spec.robots_text().encode()
                self._send(handler, record, 200, body, head, "text/plain; charset=utf-8")
            else:
                self._send(handler, record, int(mode), b"robots unavailable\n", head, "text/plain")
            return
        resource = self.model.resources.get(path)
        if resource is None:
            self._send(handler, record, 404, b"<title>Not found</title>not found\n", head)
            return
        kind = resource.kind
        if kind == "redirect":
            location = self.model.fill(resource.location or "", origin, port)
            self._send(handler, record, resource.status, b"", head, headers={"Location": location})
        elif kind == "status":
            body = f"<title>{resource.status}</title>error {resource.status}\n".encode()
            self._send(handler, record, resource.status, body, head)
        elif kind == "flaky" and previous < len(resource.failures):
            status = resource.failures[previous]
            extra = {"Retry-After": resource.retry_after} if resource.retry_after else {}
            body = f"<title>{status}</title>try again\n".encode()
            self._send(handler, record, status, body, head, headers=extra)
        elif kind in ("page", "flaky", "slow"):
            if kind == "slow" and self.closing.wait(spec.slow_seconds):
                self._abort(handler)
                return
            body = self.model.render(resource, origin, port)
            self._send(handler, record, 200, body, head, resource.content_type)
        elif kind == "file":
            body = self.model.file_body(resource, origin, port)
            self._send(handler, record, 200, body, head, resource.content_type)
        elif kind == "hang":
            if self.closing.wait(spec.hang_seconds):
                self._abort(handler)
                return
            body = self.model.render(resource, origin, port)
            self._send(handler, record, 200, body, head)
        elif kind == "huge":
            self._huge(handler, record, head)
        else:
            bomb = gzip_bomb() if kind == "gzip-bomb" else brotli_bomb()
            encoding = {"Content-Encoding": "gzip" if kind == "gzip-bomb" else "br"}
            self._send(handler, record, 200, bomb, head, headers=encoding)

    def _huge(self, handler: _Handler, record: RequestRecord, head: bool) -> None:
        size = self.spec.huge_bytes
        handler.send_response(200)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        record.status = 200
        if head:
            return
        chunk = b"<p>" + b"x" * (64 * 1024 - 8) + b"</p>\n"
        sent = 0
        while sent < size:
            if self.closing.is_set():
                self._abort(handler)
                return
            piece = chunk[: size - sent]
            handler.wfile.write(piece)
            sent += len(piece)
        handler.wfile.flush()


@pytest.fixture
def crawl_site() -> Iterator[Callable[..., CrawlSite]]:
    """A factory: ``crawl_site(SiteSpec(...))`` or ``crawl_site(pages=100)``; every site
    started is closed after the test."""
    sites: list[CrawlSite] = []

    def make(spec: SiteSpec | None = None, **knobs: object) -> CrawlSite:
        if spec is None:
            spec = SiteSpec(**knobs)  # type: ignore[arg-type]
        elif knobs:
            spec = replace(spec, **knobs)  # type: ignore[arg-type]
        site = CrawlSite(spec).start()
        sites.append(site)
        return site

    yield make
    for site in sites:
        site.close()


# --- the sentinel and private address spellings ------------------------------------------


class Sentinel:
    """A TCP listener on 127.0.0.1 (and ``[::1]`` on the same port when it can) that
    counts the connections it accepts and closes them at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._closing = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self.port = 0

    @property
    def connections(self) -> int:
        with self._lock:
            return self._count

    def start(self) -> Sentinel:
        listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = listener.getsockname()[1]
        self._sockets.append(listener)
        with contextlib.suppress(OSError):
            six = socket.create_server(
                ("::1", self.port), family=socket.AF_INET6, backlog=128, dualstack_ipv6=False
            )
            self._sockets.append(six)
        for sock in self._sockets:
            sock.settimeout(0.05)
            thread = threading.Thread(target=self._accept, args=(sock,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def _accept(self, sock: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                connection, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self._count += 1
            connection.close()

    def reset(self) -> None:
        with self._lock:
            self._count = 0

    def close(self) -> None:
        self._closing.set()
        for thread in self._threads:
            thread.join(2)
        for sock in self._sockets:
            sock.close()

    def __enter__(self) -> Sentinel:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


#: Loopback spellings that reach a ``Sentinel`` on its port when the policy allows private
#: addresses (``AddressPolicy(allow_private=True)``) and are refused by default.
LOOPBACK_SPELLINGS: list[str] = [
    "http://127.0.0.1:{port}/",
    "http://127.1:{port}/",
    "http://127.0.1:{port}/",
    "http://2130706433:{port}/",
    "http://0x7f000001:{port}/",
    "http://0x7f.1:{port}/",
    "http://0x7f.0.0.1:{port}/",
    "http://017700000001:{port}/",
    "http://127.0.0.1.:{port}/",
    "http://0.0.0.0:{port}/",
    "http://0:{port}/",
    "http://localhost:{port}/",
    "http://LocalHost:{port}/page?x=1",
    "http://[::1]:{port}/",
    "http://[0:0:0:0:0:0:0:1]:{port}/",
    "http://[::ffff:127.0.0.1]:{port}/",
    "http://[::ffff:7f00:1]:{port}/",
    "http://example.com@127.0.0.1:{port}/",
    "http://user:pass@127.1:{port}/",
    "http://127.0.0.1:{port}/#@example.com",
    "http://127.0.0.1:{port}/?next=http://example.com/",
]

#: Private, loopback, link-local, multicast, reserved and metadata targets in many
#: spellings (``{port}``: the sentinel's port): the default address policy refuses each
#: before any connection. ``LOOPBACK_SPELLINGS`` are among them.
PRIVATE_SPELLINGS: list[str] = [
    *LOOPBACK_SPELLINGS,
    "http://127.0.0.2:{port}/",
    "http://0177.0.0.1:{port}/",  # httpx refuses these two spellings as URLs
    "http://127.000.000.001:{port}/",
    "http://127.255.255.254:{port}/",
    "http://10.0.0.1:{port}/",
    "http://10.1:{port}/",
    "http://012.0.0.1:{port}/",
    "http://167772161:{port}/",
    "http://172.16.0.1:{port}/",
    "http://172.31.255.255:{port}/",
    "http://192.168.0.1:{port}/",
    "http://192.168.1:{port}/",
    "http://0xc0.0xa8.1.1:{port}/",
    "http://3232235777:{port}/",
    "http://100.64.0.1:{port}/",
    "http://100.127.255.254:{port}/",
    "http://169.254.1.1:{port}/",
    "http://169.254.169.254:{port}/latest/meta-data/",
    "http://169.254.169.254/latest/meta-data/",
    "http://0xa9fea9fe:{port}/",
    "http://2852039166:{port}/",
    "http://169.254.170.2:{port}/v2/credentials",
    "http://100.100.100.200:{port}/",
    "http://[fd00:ec2::254]:{port}/",
    "http://[::ffff:169.254.169.254]:{port}/",
    "http://metadata.google.internal:{port}/computeMetadata/v1/",
    "http://224.0.0.1:{port}/",
    "http://239.255.255.250:{port}/",
    "http://255.255.255.255:{port}/",
    "http://240.0.0.1:{port}/",
    "http://0.1.2.3:{port}/",
    "http://[::]:{port}/",
    "http://[fe80::1]:{port}/",
    "http://[fd00::1]:{port}/",
    "http://[fc00::1]:{port}/",
    "http://[ff02::1]:{port}/",
    "http://[::ffff:10.0.0.1]:{port}/",
    "http://[::ffff:192.168.0.1]:{port}/",
    "http://[64:ff9b::127.0.0.1]:{port}/",
    "http://[2002:7f00:1::]:{port}/",
    "https://127.0.0.1:{port}/",
    "https://[::1]:{port}/",
    "http://192.0.2.1:{port}/",
]
