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
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.credentials import (
    AuthType,
    Credential,
    check_env_name,
    cookie_header,
    read_env,
)
from crawlq.crawler.extract import Extractor
from crawlq.crawler.fetch import DEFAULT_USER_AGENT, FetchSettings
from crawlq.crawler.links import Scope, ScopeMode
from crawlq.crawler.proxies import parse_proxy
from crawlq.crawler.tasks import CONFIG_META_KEY, PAGE_QUEUE
from crawlq.crawler.throttle import ThrottleSettings
from crawlq.exceptions import ConfigurationError
from crawlq.limits import Limits
from crawlq.payload import MAX_COUNT, check_count, check_seconds

__all__ = ["CONFIG_META_KEY", "PAGE_QUEUE", "CrawlConfig"]

#: Headers that carry credentials: never in a crawl's settings (see ``credentials``).
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})


def _plain(value: Any) -> Any:
    """Tuples (nested too) as lists, as they come back from JSON."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def _host(url: str) -> str:
    return (urllib.parse.urlsplit(url).hostname or "").rstrip(".")


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
    ``autothrottle`` adapts ``delay`` per host to its response times and errors
    (``crawlq.crawler.throttle``): about ``autothrottle_target`` fetches in flight, from
    ``autothrottle_start`` seconds, at most ``autothrottle_max`` (``delay`` and a
    Crawl-delay stay the floor).
    ``obey_robots`` (robots.txt kept in the store for ``robots_ttl`` seconds).

    Fetching: ``user_agent``, ``timeout`` (a whole fetch), ``max_bytes`` (body as
    received), ``max_decoded_bytes``, ``max_redirects``, ``http2``; ``retries`` for
    network errors, 429 and 5xx (with backoff); ``allow_private`` and ``allow_hosts``
    (host names or networks) open the addresses the guard refuses.
    ``warc`` is a WARC file (gzip) the bodies are written to, None for none.

    What a crawl gets out of pages: ``extract`` (``NAME=QUERY`` fields added to each
    record, ``crawlq.crawler.extract``), ``parse`` (``module:function``, a user function
    run on each page, ``crawlq.crawler.items``), ``sitemaps`` (sitemap, sitemap index or
    robots.txt URLs whose pages are crawled, ``crawlq.crawler.sitemaps``; with sitemaps
    the start URLs may be empty, and the sitemaps' own URLs anchor the scope).

    Request options: ``headers`` ((name, value) pairs sent with every request),
    ``cookies`` ((name, value) pairs) and the credential ``auth`` (basic, bearer or
    cookie) read by each worker from the environment variable ``auth_env`` or the file
    ``auth_file`` (see ``crawler.credentials``: the settings hold only where it is);
    cookies and the credential go only to the hosts of the start URLs. ``contact`` (a
    URL or an e-mail address) is added to the User-Agent as ``(+URL)``.

    Proxy (see ``crawler.proxies``): ``proxy`` (a URL without credentials: the settings
    are not secret), ``proxy_env`` (the name of an environment variable that holds the
    proxy URL, credentials allowed, read by each worker), or ``proxy_from_env`` (each
    worker's HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY); at most one of them.

    Rendering: ``render`` loads each HTML page into headless Chromium and takes the DOM
    after JavaScript (``crawlq.crawler.render``); every request the page makes is held
    to the scope's hosts, robots.txt and the address guard.

    Revisits (``crawlq.crawler.revisit``): ``revisit_changed`` sends conditional requests
    built from the previous crawl of the same name and settings and records a 304 as
    unchanged (its links followed from the previous record); ``rewrite_unchanged`` writes
    a WARC revisit record for each unchanged page.
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
    # -- extraction, parse hook, sitemaps (crawlq.crawler.extract, items, sitemaps) --
    extract: tuple[str, ...] = ()
    parse: str | None = None
    sitemaps: tuple[str, ...] = ()
    _extractor: Extractor | None = field(init=False, repr=False, compare=False)
    # -- request options: headers, cookies, auth, contact --
    headers: tuple[tuple[str, str], ...] = ()
    cookies: tuple[tuple[str, str], ...] = ()
    auth: AuthType | None = None
    auth_env: str | None = None
    auth_file: str | None = None
    contact: str | None = None
    proxy: str | None = None
    proxy_env: str | None = None
    proxy_from_env: bool = False
    # -- adaptive politeness (crawlq.crawler.throttle) --
    autothrottle: bool = False
    autothrottle_target: float = 1.0
    autothrottle_start: float = 5.0
    autothrottle_max: float = 60.0
    # -- rendering (crawlq.crawler.render) --
    render: bool = False
    # -- revisiting only what changed (crawlq.crawler.revisit) --
    revisit_changed: bool = False
    rewrite_unchanged: bool = False
    _scope: Scope = field(init=False, repr=False, compare=False)
    _fetch: FetchSettings = field(init=False, repr=False, compare=False)
    _throttle: ThrottleSettings | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("start_urls", "allow", "deny", "allow_hosts", "extract", "sitemaps"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigurationError(f"{name} must be a list of strings, not {value!r}")
            object.__setattr__(self, name, tuple(value))
        if not self.start_urls and not self.sitemaps:
            raise ConfigurationError("a crawl needs at least one start URL or sitemap")
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
        for name in (
            "follow_nofollow",
            "obey_robots",
            "allow_private",
            "http2",
            "autothrottle",
            "render",
            "revisit_changed",
            "rewrite_unchanged",
        ):
            if not isinstance(getattr(self, name), bool):
                raise ConfigurationError(f"{name} must be true or false")
        if self.warc is not None and (not isinstance(self.warc, str) or not self.warc):
            raise ConfigurationError(f"warc must be a file name, not {self.warc!r}")
        if self.rewrite_unchanged and not (self.revisit_changed and self.warc is not None):
            raise ConfigurationError(
                "--rewrite-unchanged writes unchanged pages to the WARC file: it needs "
                "--revisit-changed and --warc PATH"
            )
        self._check_data_options()
        self._check_request_options()
        scope = Scope(
            start_urls=self.start_urls or self.sitemaps,
            mode=self.scope,
            allow=self.allow,
            deny=self.deny,
            max_depth=self.max_depth,
        )
        fetch = FetchSettings(
            user_agent=self.full_user_agent,
            deadline=check_seconds("timeout", self.timeout),
            max_body_bytes=self.max_bytes,
            max_decoded_bytes=self.max_decoded_bytes,
            max_redirects=self.max_redirects,
            http2=self.http2,
            policy=AddressPolicy(allow_private=self.allow_private, allow=self.allow_hosts),
            extra_headers=self.headers,
            credential_hosts=frozenset(_host(url) for url in self.start_urls),
        )
        object.__setattr__(self, "_scope", scope)
        object.__setattr__(self, "_fetch", fetch)
        object.__setattr__(self, "_throttle", self._throttle_settings())

    def _throttle_settings(self) -> ThrottleSettings | None:
        throttle = ThrottleSettings(
            target=self.autothrottle_target,
            start=self.autothrottle_start,
            max_interval=self.autothrottle_max,
        )
        if not self.autothrottle:
            return None
        if throttle.max_interval < self.delay:
            raise ConfigurationError(
                f"autothrottle_max ({throttle.max_interval:g} s) is below delay "
                f"({self.delay:g} s): raise the maximum or lower the delay"
            )
        return throttle

    def _check_data_options(self) -> None:
        """Check and compile ``extract``, ``parse`` and ``sitemaps``."""
        extractor = Extractor(self.extract) if self.extract else None
        object.__setattr__(self, "_extractor", extractor)
        if self.parse is not None:
            module, _, function = (
                self.parse.partition(":") if isinstance(self.parse, str) else ("", "", "")
            )
            if not module.strip() or not function.strip():
                raise ConfigurationError(
                    f"parse must be module:function (e.g. myparse:parse), not {self.parse!r}"
                )
        for url in self.sitemaps:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
                raise ConfigurationError(
                    f"invalid sitemap URL {url!r}: give an http:// or https:// URL"
                )

    @property
    def extractor(self) -> Extractor | None:
        """The ``extract`` fields, compiled; None when there are none."""
        return self._extractor

    @property
    def scope_rules(self) -> Scope:
        """The ``Scope`` that decides which links are followed."""
        return self._scope

    def _check_request_options(self) -> None:
        for name in ("headers", "cookies"):
            pairs = getattr(self, name)
            if isinstance(pairs, str) or not all(
                isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p)
                for p in pairs
            ):
                raise ConfigurationError(f"{name} must be a list of (name, value) pairs")
            object.__setattr__(self, name, tuple((str(n), str(v)) for n, v in pairs))
        for header, _ in self.headers:
            if header.lower() in _SECRET_HEADERS:
                raise ConfigurationError(
                    f"--header {header}: credentials are never kept in a crawl's settings; "
                    "use --auth basic|bearer|cookie with --auth-env NAME or --auth-file PATH "
                    "(and --cookie NAME=VALUE for cookies that are not secret)"
                )
        cookie_header(self.cookies)  # checks them
        if self.auth is not None:
            Credential(self.auth, self.auth_env, self.auth_file)
        elif self.auth_env is not None or self.auth_file is not None:
            raise ConfigurationError(
                "--auth-env and --auth-file need --auth basic, bearer or cookie"
            )
        self._check_proxy()
        if self.contact is not None:
            if not isinstance(self.contact, str) or not self.contact.strip():
                raise ConfigurationError(
                    f"contact must be a URL or an e-mail address, not {self.contact!r}"
                )
            if any(c in self.contact for c in "()") or any(c.isspace() for c in self.contact):
                raise ConfigurationError(
                    f"--contact {self.contact!r}: give a URL or an e-mail address without "
                    "spaces or parentheses"
                )

    def _check_proxy(self) -> None:
        if not isinstance(self.proxy_from_env, bool):
            raise ConfigurationError("proxy_from_env must be true or false")
        given = [self.proxy is not None, self.proxy_env is not None, self.proxy_from_env]
        if sum(given) > 1:
            raise ConfigurationError(
                "give one of --proxy URL, --proxy-env NAME or --proxy-from-env, not several"
            )
        if self.proxy_env is not None:
            check_env_name(self.proxy_env, "--proxy-env")
        if self.proxy is not None:
            if parse_proxy(self.proxy, "--proxy").auth is not None:
                raise ConfigurationError(
                    "--proxy: a proxy URL with credentials would be kept in the crawl's "
                    "settings; put the whole URL in an environment variable and give "
                    "--proxy-env NAME (each worker reads it)"
                )

    @property
    def proxy_url(self) -> str | None:
        """The proxy URL, with ``proxy_env`` read now (ConfigurationError naming the
        variable when it is missing or not a proxy URL; never its value)."""
        if self.proxy_env is None:
            return self.proxy
        url = read_env(self.proxy_env, "--proxy-env")
        parse_proxy(url, f"the environment variable {self.proxy_env} (--proxy-env)")
        return url

    @property
    def full_user_agent(self) -> str:
        """The User-Agent sent: ``user_agent``, and ``(+contact)`` when there is one."""
        if self.contact is None:
            return self.user_agent
        contact = self.contact
        if "@" in contact and "://" not in contact and not contact.startswith("mailto:"):
            contact = f"mailto:{contact}"
        return f"{self.user_agent} (+{contact})"

    @property
    def credential(self) -> Credential | None:
        """Where the crawl's credential is, None without one (nothing is read)."""
        if self.auth is None:
            return None
        return Credential(self.auth, self.auth_env, self.auth_file)

    @property
    def fetch_settings(self) -> FetchSettings:
        """The fetcher's settings (caps, deadline, address policy, headers, proxy) with
        the cookies, the credential and the proxy of ``proxy_env``, read now
        (ConfigurationError naming where one is missing)."""
        fetch = self._fetch
        if self.proxy is not None or self.proxy_env is not None or self.proxy_from_env:
            fetch = dataclasses.replace(
                fetch, proxy=self.proxy_url, proxy_from_env=self.proxy_from_env
            )
        credential = self.credential
        secret = credential.header() if credential is not None else None
        extra = secret[1] if secret is not None and secret[0] == "Cookie" else None
        pairs: list[tuple[str, str]] = []
        if secret is not None and secret[0] != "Cookie":
            pairs.append(secret)
        cookies = cookie_header(self.cookies, extra)
        if cookies is not None:
            pairs.append(("Cookie", cookies))
        if not pairs:
            return fetch
        return dataclasses.replace(fetch, credentials=tuple(pairs))

    @property
    def throttle(self) -> ThrottleSettings | None:
        """The autothrottle's settings; None when it is off."""
        return self._throttle

    @property
    def limits(self) -> Limits:
        """The limits each host's key takes when this crawl is the first to use it (with
        the autothrottle, its start interval)."""
        throttle = self._throttle
        interval = self.delay if throttle is None else throttle.start_interval(self.delay)
        return Limits(max_running=self.host_concurrency, min_interval=interval)

    @property
    def max_attempts(self) -> int:
        return self.retries + 1

    def to_meta(self) -> dict[str, Any]:
        """The settings as plain JSON data, for the crawl's meta."""
        data: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.init:
                data[f.name] = _plain(getattr(self, f.name))
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


def stored_settings(meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """A crawl's settings as this release writes them (``CrawlConfig.to_meta``): the
    settings an earlier release stored lack the fields added since, which take their
    defaults, so the same command still finds its crawl after an upgrade. None for a
    crawl without valid crawler settings."""
    try:
        settings: dict[str, Any] = CrawlConfig.from_meta(meta).to_meta()[CONFIG_META_KEY]
    except (ConfigurationError, TypeError, ValueError):
        return None
    return settings
