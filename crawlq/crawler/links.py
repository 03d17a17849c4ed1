"""Links: what a page links to, which of those the crawl follows, and what gets parsed.

Pure functions, no I/O; nothing here raises on anything a page contains.

``extract_links(html, page_url)`` returns the page's outgoing http(s) links, absolute, in
page order, each page once:

1. the elements are ``a[href]`` and ``area[href]``; those whose ``rel`` has the token
   ``nofollow`` (any case) are skipped unless ``follow_nofollow``;
2. the base is the first ``<base href>`` resolved against ``page_url`` (ignored when the
   result is not an http(s) URL), else ``page_url``;
3. an ``href`` has leading and trailing whitespace and control characters stripped and
   every tab and newline removed (as browsers do); empty and fragment-only (``#...``)
   values are skipped;
4. it is made absolute with ``urllib.parse.urljoin`` and its fragment dropped; anything
   that is not ``http``/``https`` (``javascript:``, ``mailto:``, ``tel:``, ``data:``, ...),
   has no host or a host that cannot be one (an empty label, a space, a control or
   WHATWG-forbidden character, U+FFFD), has an invalid port, is longer than
   ``MAX_URL_LENGTH`` characters or cannot be parsed is skipped;
5. duplicates are recognised by ``crawlq.fingerprint.canonical_url``: the first spelling
   met is the one returned.

``Scope`` decides which links a crawl follows (see its docstring), ``is_html`` which
responses are parsed at all.
"""

from __future__ import annotations

import codecs
import re
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal, TypeAlias, get_args

from selectolax.lexbor import LexborHTMLParser

from crawlq.exceptions import ConfigurationError
from crawlq.fingerprint import canonical_url
from crawlq.payload import check_count

__all__ = [
    "HTML_TYPES",
    "MAX_URL_LENGTH",
    "Scope",
    "ScopeMode",
    "extract_links",
    "is_html",
    "page_title",
    "parse_html",
    "resolve_link",
]

ScopeMode: TypeAlias = Literal["host", "domain", "prefix", "any"]

#: Media types that are parsed for links; every other type is recorded but not parsed.
HTML_TYPES: frozenset[str] = frozenset({"text/html", "application/xhtml+xml"})

#: Longer links (absolute, without fragment) are skipped: a page cannot flood the queue.
MAX_URL_LENGTH = 8192

_MEMO = 32_768  # URLs whose scope verdict a Scope remembers

_SCHEMES = frozenset({"http", "https"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_STRIP = "".join(chr(c) for c in range(0x21))  # C0 controls and space (WHATWG URL)
_REMOVE = str.maketrans("", "", "\t\n\r")
_BAD_HOST_CHARS = frozenset(_STRIP + "#%/:<>?@[\\]^|\x7f\ufffd")


def parse_html(
    html: bytes | str | LexborHTMLParser, encoding: str | None = None
) -> LexborHTMLParser:
    """The parsed document: ``str`` as is; ``bytes`` decoded with ``encoding`` when that
    names a known codec (bad bytes replaced), else with the HTML Standard's detection
    (BOM, ``<meta charset>``, UTF-8 by default). The functions below take it instead of
    the text, so that a page is parsed once."""
    if isinstance(html, LexborHTMLParser):
        return html
    if isinstance(html, bytes):
        if encoding:
            try:
                codec = codecs.lookup(encoding.strip())
            except (LookupError, ValueError):
                pass
            else:
                return LexborHTMLParser(html.decode(codec.name, errors="replace"))
        return LexborHTMLParser(html, encoding=True)
    return LexborHTMLParser(html)


def _absolute(href: str, base: str) -> str | None:
    """``href`` made absolute against ``base`` without its fragment (rule 3 and 4), or
    None when it is skipped."""
    href = href.strip(_STRIP).translate(_REMOVE)
    if not href or href.startswith("#"):
        return None
    if len(href) > MAX_URL_LENGTH:
        return None
    try:
        url, _ = urllib.parse.urldefrag(urllib.parse.urljoin(base, href))
        if len(url) > MAX_URL_LENGTH:
            return None
        parts = urllib.parse.urlsplit(url)
        if parts.scheme.lower() not in _SCHEMES or not _valid_host(parts.hostname):
            return None
        parts.port  # noqa: B018 - raises ValueError on an invalid port
    except ValueError:
        return None
    return url


_PLAIN = re.compile(r"[A-Za-z0-9._~!$&'()*+,=@%/-]+")
"""An href made of path characters only: no scheme, ``;`` parameters, query, fragment,
backslash or space."""


_PLAIN_BASE = re.compile(r"(https?://[A-Za-z0-9.-]+(?::[0-9]+)?/)[A-Za-z0-9._~!$&'()*+,=@%/-]*")
"""A base URL whose directory is a slice of it: lowercase http(s), a host name or IPv4
address with an optional port, and a path of plain characters (the caller checks for
dot and empty segments); group 1 is its origin, ``scheme://host[:port]/``."""
_ORIGINS: dict[str, bool] = {}
"""Whether each plain base's origin passes rule 4 (up to ``_MEMO`` of them)."""


class _Resolver:
    """``_absolute`` against one base, quicker for plain paths (``a/b.html``,
    ``/a/b.html``) without dot or empty segments: those are the base's directory, or its
    origin, plus the href, which is what ``urljoin`` gives them, and the scheme, host and
    port, which rule 4 checks, are the base's. Any other href takes ``_absolute``."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.directory: str | None = None
        self.origin: str | None = None
        plain = _PLAIN_BASE.fullmatch(base)
        if plain is not None and "/." not in base and "//" not in base[plain.end(1) :]:
            # A plain base (a crawled page's URL, usually): its directory and origin are
            # slices of it, and whether its origin passes rule 4 is remembered.
            origin = plain[1]
            valid = _ORIGINS.get(origin)
            if valid is None:
                valid = _absolute("a", origin) is not None
                if len(_ORIGINS) >= _MEMO:
                    _ORIGINS.clear()
                _ORIGINS[origin] = valid
            if valid:
                self.origin, self.directory = origin, base[: base.rindex("/") + 1]
            return
        directory = _absolute("a", base)  # None: the base fails rule 4, so does every href
        if directory is not None and directory.endswith("/a") and "://" in directory:
            self.directory = directory[:-1]  # scheme://netloc/path/
            self.origin = directory[: directory.index("/", directory.index("://") + 3) + 1]

    def __call__(self, href: str) -> str | None:
        plain = href and href[0] != "." and "//" not in href and "/." not in href
        if plain and _PLAIN.fullmatch(href):
            prefix, rest = (self.origin, href[1:]) if href[0] == "/" else (self.directory, href)
            if prefix is not None:
                url = prefix + rest
                return url if len(url) <= MAX_URL_LENGTH else None
        return _absolute(href, self.base)


def resolve_link(href: str, base: str) -> str | None:
    """A link as written on the page at ``base`` made absolute by the module's rules 3
    and 4 (fragment dropped), or None when it is skipped."""
    return _absolute(href, base)


def _valid_host(host: str | None) -> bool:
    """Whether ``host`` (from ``urlsplit``: lowercased, no brackets) can name a host."""
    if not host:
        return False
    if ":" in host:  # IPv6: urlsplit has checked the brackets' content
        return True
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    return all(labels) and _BAD_HOST_CHARS.isdisjoint(host)


def _canonical(url: str) -> str | None:
    """``canonical_url(url)``, or None when it cannot be computed."""
    try:
        return canonical_url(url)
    except (ValueError, TypeError):  # UnicodeError is a ValueError
        return None


def extract_links(
    html: bytes | str | LexborHTMLParser,
    base_url: str,
    *,
    follow_nofollow: bool = False,
    encoding: str | None = None,
) -> list[str]:
    """The page's http(s) links by the module's rules, in page order, each page once.

    ``base_url`` is the page's (final) URL; ``encoding`` is an optional charset hint for
    ``bytes`` (the Content-Type's ``charset``), ignored when it names no known codec.
    """
    tree = parse_html(html, encoding)
    base = base_url
    for node in tree.tags("base"):  # the first with an href
        attributes = node.attributes
        if "href" in attributes:
            declared = _absolute(attributes.get("href") or "", base_url)
            if declared is not None:
                base = declared
            break
    links: list[str] = []
    seen: set[str] = set()
    resolve = _Resolver(base)
    # Elements by tag name, in page order, are a tenth of the CSS engine's cost; a page
    # with image maps takes the selector, which merges <a> and <area> in page order.
    nodes = tree.css("a[href], area[href]") if tree.tags("area") else tree.tags("a")
    for node in nodes:
        attributes = node.attributes
        if "href" not in attributes:
            continue
        if not follow_nofollow and "nofollow" in (attributes.get("rel") or "").lower().split():
            continue
        url = resolve((attributes.get("href") or "").strip(_STRIP).translate(_REMOVE))
        if url is None:
            continue
        key = _canonical(url)
        if key is None or key in seen:
            continue
        seen.add(key)
        links.append(url)
    return links


def page_title(html: bytes | str | LexborHTMLParser, *, encoding: str | None = None) -> str | None:
    """The text of the first HTML ``<title>`` (not one inside ``<svg>`` or ``<math>``),
    whitespace collapsed; None when there is none or it is blank. ``encoding`` as for
    ``extract_links``."""
    for node in parse_html(html, encoding).tags("title"):
        parent = node.parent
        while parent is not None and parent.tag not in ("svg", "math"):
            parent = parent.parent
        if parent is None:
            title = " ".join((node.text(deep=True) or "").split())
            return title or None
    return None


def is_html(content_type: str | None) -> bool:
    """Whether a response with this Content-Type is parsed for links: ``text/html`` or
    ``application/xhtml+xml``, any case, parameters ignored. A missing Content-Type is
    not parsed (no sniffing)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() in HTML_TYPES


@dataclass(frozen=True)
class _Start:
    """What a start URL contributes to each scope mode."""

    host_key: tuple[str, int | None]
    domain: str
    is_ip: bool
    prefix: str


def _host(parts: urllib.parse.SplitResult) -> str:
    """The host, lowercased, without a trailing dot."""
    return (parts.hostname or "").rstrip(".")


def _host_key(parts: urllib.parse.SplitResult) -> tuple[str, int | None]:
    """(host, port), the scheme's default port counted as no port."""
    port = parts.port
    if port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        port = None
    return _host(parts), port


def _is_ip(host: str) -> bool:
    return ":" in host or host.replace(".", "").isdigit()


@dataclass(frozen=True)
class Scope:
    """Which URLs a crawl follows, relative to its start URLs.

    A URL is admitted when it is http(s) with a valid host and port, its depth is at most
    ``max_depth`` (None: unlimited; start URLs have depth 0), it is inside the scope of
    at least one start URL by ``mode``, no ``deny`` pattern matches it, and, when there
    are ``allow`` patterns, one of them matches it. Modes (hosts compared lowercased and
    without a trailing dot):

    * ``host``: the same host and port, the scheme's default port counting as no port
      (so ``http://a/`` and ``https://a/`` are one host; ``a:8001`` and ``a:8002`` are not);
    * ``domain``: the start host with a leading ``www.`` removed (unless only one label
      would be left), or any subdomain of it,
      on any port and scheme. An approximation of the registrable domain with no public
      suffix list: start from ``blog.example.com`` and ``example.com`` is outside; start
      from ``example.com`` (or ``www.example.com``) for the whole site. An IP address
      start admits that address only;
    * ``prefix``: the URL's canonical form starts with the start URL's canonical form up
      to the last ``/`` of its path (scheme included: ``http`` and ``https`` differ);
    * ``any``: every http(s) URL.

    Patterns are Python regular expressions compiled once, searched (``re.search``) in the
    URL's canonical form (``crawlq.fingerprint.canonical_url``: lowercased host, sorted
    query, normalised percent-encoding); hosts and prefixes are compared in it too.
    Invalid settings raise ConfigurationError.
    """

    start_urls: tuple[str, ...]
    mode: ScopeMode = "host"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    max_depth: int | None = None
    _starts: tuple[_Start, ...] = field(init=False, repr=False, compare=False)
    _allow: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _deny: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _memo: dict[str, tuple[str | None, str | None]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        start_urls = _strings("start_urls", self.start_urls)
        if not start_urls:
            raise ConfigurationError("a scope needs at least one start URL")
        if self.mode not in get_args(ScopeMode):
            raise ConfigurationError(
                f"scope mode must be one of {', '.join(get_args(ScopeMode))}, not {self.mode!r}"
            )
        if self.max_depth is not None:
            check_count("max_depth", self.max_depth, 0)
        allow = _strings("allow", self.allow)
        deny = _strings("deny", self.deny)
        object.__setattr__(self, "start_urls", start_urls)
        object.__setattr__(self, "allow", allow)
        object.__setattr__(self, "deny", deny)
        object.__setattr__(self, "_starts", tuple(_start(url) for url in start_urls))
        object.__setattr__(self, "_allow", _compile("allow", allow))
        object.__setattr__(self, "_deny", _compile("deny", deny))

    def admits(self, url: str, depth: int) -> bool:
        """Whether the crawl follows ``url`` found at ``depth``."""
        return self.why_not(url, depth) is None

    def why_not(self, url: str, depth: int) -> str | None:
        """None when ``url`` at ``depth`` is admitted, else the first reason it is not
        (checked in order: URL, depth, mode, deny, allow). Never raises. What does not
        depend on the depth is remembered for the last ``_MEMO`` URLs (a crawl meets the
        same links on many pages)."""
        reasons = self._memo.get(url)
        if reasons is None:
            if len(self._memo) >= _MEMO:
                self._memo.clear()
            reasons = self._memo[url] = self._url_reasons(url)
        before, after = reasons
        if before is not None:
            return before
        if self.max_depth is not None and depth > self.max_depth:
            return f"depth {depth} over max_depth {self.max_depth}"
        return after

    def _url_reasons(self, url: str) -> tuple[str | None, str | None]:
        """What ``why_not`` says of ``url`` before the depth check and after it."""
        canonical = _canonical(url)
        if canonical is None:
            return "malformed URL", None
        try:
            parts = urllib.parse.urlsplit(canonical)
            scheme = parts.scheme.lower()
            if scheme not in _SCHEMES:
                why = f"scheme {scheme!r} is not http or https" if scheme else "not absolute"
                return why, None
            if not _host(parts):
                return "no host", None
            key = _host_key(parts)  # raises ValueError on an invalid port
        except ValueError:
            return "malformed URL", None
        if not any(self._inside(start, key, canonical) for start in self._starts):
            return None, f"outside the {self.mode} scope of the start URLs"
        for pattern in self._deny:
            if pattern.search(canonical):
                return None, f"denied by {pattern.pattern!r}"
        if self._allow and not any(pattern.search(canonical) for pattern in self._allow):
            return None, "matches no allow pattern"
        return None, None

    def _inside(self, start: _Start, key: tuple[str, int | None], canonical: str) -> bool:
        if self.mode == "any":
            return True
        if self.mode == "host":
            return key == start.host_key
        if self.mode == "domain":
            host = key[0]
            return host == start.domain or (not start.is_ip and host.endswith("." + start.domain))
        return canonical.startswith(start.prefix)


def _strings(name: str, value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(f"{name} must be a sequence of strings, not {value!r}")
    return tuple(value)


def _compile(name: str, patterns: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ConfigurationError(f"invalid {name} pattern {pattern!r}: {exc}") from None
    return tuple(compiled)


_HOST_PORT = re.compile(r"[\w.-]+(:\d+)?(/|$)")
"""``127.0.0.1:8000/``, ``localhost:8000``: a URL without its scheme."""


def _start(url: str) -> _Start:
    """A start URL's scope data; ConfigurationError when it is not an http(s) URL."""
    if "://" not in url and _HOST_PORT.match(url.strip()):
        raise ConfigurationError(
            f"invalid start URL {url!r}: no scheme; add http:// or https:// (http://{url.strip()})"
        )
    try:
        canonical = urllib.parse.urlsplit(canonical_url(url.strip()))
        if canonical.scheme not in _SCHEMES or not _host(canonical):
            raise ValueError("not an http(s) URL with a host")
        key = _host_key(canonical)
    except ValueError as exc:
        raise ConfigurationError(f"invalid start URL {url!r}: {exc}") from None
    host = key[0]
    is_ip = _is_ip(host)
    domain = host[4:] if host.startswith("www.") and not is_ip and host.count(".") > 1 else host
    path = canonical.path[: canonical.path.rfind("/") + 1] or "/"
    prefix = f"{canonical.scheme}://{canonical.netloc}{path}"
    return _Start(host_key=key, domain=domain, is_ip=is_ip, prefix=prefix)
