"""A crawl's settings: what ``crawlq crawl`` was told, kept in the crawl's meta.

Every worker that runs a page of the crawl, on any machine, reads the same settings from
the store (``CrawlConfig.from_meta(crawl.meta)``), so a crawl behaves the same whether
it runs in the ``crawlq crawl`` process or on a fleet of ``crawlq worker`` processes.
Invalid settings raise ``ConfigurationError`` saying which and why.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.fetch import DEFAULT_USER_AGENT, FetchSettings
from crawlq.crawler.links import Scope, ScopeMode
from crawlq.exceptions import ConfigurationError
from crawlq.limits import Limits
from crawlq.payload import MAX_COUNT, check_count, check_seconds

__all__ = ["CONFIG_META_KEY", "PAGE_QUEUE", "CrawlConfig"]

#: The key of the settings in the crawl's meta.
CONFIG_META_KEY = "crawler"

#: The queue of page jobs.
PAGE_QUEUE = "crawl"


@dataclass(frozen=True, kw_only=True)
class CrawlConfig:
    """How one crawl fetches, follows and behaves towards sites.

    Scope: ``start_urls``, ``scope`` (host, domain, prefix, any), ``allow``/``deny``
    regular expressions, ``max_depth`` (None: unlimited), ``follow_nofollow``, and
    ``max_pages`` (None: unlimited): the crawl records that many pages and fetches no
    other; a page adds only the links the crawl still has room for, and the crawl's
    queued pages are dropped once the cap is reached (``crawlq.crawler.pages._Cap``).

    Politeness, per host (``host:port``, the limit key of the host's pages):
    ``host_concurrency`` fetches at a time and ``delay`` seconds between two starts, on
    every worker together; a robots.txt ``Crawl-delay`` above ``delay`` wins.
    ``obey_robots`` (robots.txt kept in the store for ``robots_ttl`` seconds).

    Fetching: ``user_agent``, ``timeout`` (a whole fetch), ``max_bytes`` (body as
    received), ``max_decoded_bytes``, ``max_redirects``, ``http2``; ``retries`` for
    network errors, 429 and 5xx (with backoff); ``allow_private`` and ``allow_hosts``
    (host names or networks) open the addresses the guard refuses.
    ``warc`` is a WARC file (gzip) the bodies are written to, None for none.

    Rendering: ``render`` loads each HTML page into headless Chromium and takes the DOM
    after JavaScript (``crawlq.crawler.render``); every request the page makes is held
    to the scope's hosts, robots.txt and the address guard.
    """

    start_urls: tuple[str, ...]
    scope: ScopeMode = "host"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    max_depth: int | None = None
    max_pages: int | None = None
    follow_nofollow: bool = False
    host_concurrency: int = 2
    delay: float = 0.25
    obey_robots: bool = True
    robots_ttl: float = 24 * 3600.0
    user_agent: str = DEFAULT_USER_AGENT
    timeout: float = 30.0
    max_bytes: int = 10 * 1024 * 1024
    max_decoded_bytes: int = 50 * 1024 * 1024
    max_redirects: int = 10
    http2: bool = False
    retries: int = 2
    allow_private: bool = False
    allow_hosts: tuple[str, ...] = ()
    warc: str | None = None
    render: bool = False
    _scope: Scope = field(init=False, repr=False, compare=False)
    _fetch: FetchSettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("start_urls", "allow", "deny", "allow_hosts"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigurationError(f"{name} must be a list of strings, not {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not self.start_urls:
            raise ConfigurationError("a crawl needs at least one start URL")
        if self.scope not in get_args(ScopeMode):
            raise ConfigurationError(
                f"scope must be one of {', '.join(get_args(ScopeMode))}, not {self.scope!r}"
            )
        if self.max_pages is not None:
            check_count("max_pages", self.max_pages, 1)
        check_count("host_concurrency", self.host_concurrency, 1, MAX_COUNT)
        object.__setattr__(self, "delay", check_seconds("delay", self.delay, zero=True))
        object.__setattr__(self, "robots_ttl", check_seconds("robots_ttl", self.robots_ttl))
        check_count("retries", self.retries, 0)
        for name in ("follow_nofollow", "obey_robots", "allow_private", "http2", "render"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be true or false")
        if self.warc is not None and (not isinstance(self.warc, str) or not self.warc):
            raise ConfigurationError(f"warc must be a file name, not {self.warc!r}")
        scope = Scope(
            start_urls=self.start_urls,
            mode=self.scope,
            allow=self.allow,
            deny=self.deny,
            max_depth=self.max_depth,
        )
        fetch = FetchSettings(
            user_agent=self.user_agent,
            deadline=check_seconds("timeout", self.timeout),
            max_body_bytes=self.max_bytes,
            max_decoded_bytes=self.max_decoded_bytes,
            max_redirects=self.max_redirects,
            http2=self.http2,
            policy=AddressPolicy(allow_private=self.allow_private, allow=self.allow_hosts),
        )
        object.__setattr__(self, "_scope", scope)
        object.__setattr__(self, "_fetch", fetch)

    @property
    def scope_rules(self) -> Scope:
        """The ``Scope`` that decides which links are followed."""
        return self._scope

    @property
    def fetch_settings(self) -> FetchSettings:
        """The fetcher's settings (caps, deadline, address policy)."""
        return self._fetch

    @property
    def limits(self) -> Limits:
        """The limits each host's key takes when this crawl is the first to use it."""
        return Limits(max_running=self.host_concurrency, min_interval=self.delay)

    @property
    def max_attempts(self) -> int:
        return self.retries + 1

    def to_meta(self) -> dict[str, Any]:
        """The settings as plain JSON data, for the crawl's meta."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.init:
                value = getattr(self, f.name)
                data[f.name] = list(value) if isinstance(value, tuple) else value
        return {CONFIG_META_KEY: data}

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> CrawlConfig:
        """The settings kept by ``to_meta``; ConfigurationError when there are none
        (a crawl not made by ``crawlq crawl``) or they do not validate."""
        data = meta.get(CONFIG_META_KEY)
        if not isinstance(data, Mapping):
            raise ConfigurationError(
                "this crawl has no crawler settings: it was not started by `crawlq crawl`"
            )
        known = {f.name for f in dataclasses.fields(cls) if f.init}
        unknown = set(data) - known
        if unknown:
            raise ConfigurationError(
                f"unknown crawler settings {sorted(unknown)}: a newer crawlq made this crawl"
            )
        return cls(**data)

    def fingerprint(self) -> str:
        """A short hash of the settings: the same command gives the same value."""
        text = json.dumps(self.to_meta(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]
