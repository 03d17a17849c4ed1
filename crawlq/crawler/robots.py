"""robots.txt rules: a small wrapper around protego, no fetching and no storage.

One ``Robots`` holds the rules of one origin (scheme, host, port), the file at
``robots_url(url)``. It comes from:

* ``Robots.parse(text, url)`` when the file was fetched (2xx): protego's rules, with
  Google's reading of them (longest match wins, ``Allow`` wins a tie, ``*`` and ``$``
  wildcards, the most specific ``User-agent`` group, matched case-insensitively by
  product token). Only the first 500 KiB of the file count, as at Google;
* ``Robots.unavailable(status)`` when it was not, following Google's documented rules:

  - a 4xx other than 429 (and a 3xx: redirects not resolved): no file, everything is
    allowed;
  - 429, a 5xx, or ``None`` for a network error (DNS, connect, deadline): everything is
    disallowed *for now*, and ``temporary`` is True so the caller fetches the file again
    soon rather than keeping this answer for the usual time to live. (Google then keeps
    using a cached copy, and after 30 days of errors crawls as if there were no rules;
    that is the caller's business, with storage.)

``/robots.txt`` itself is always allowed. Nothing here raises on a file's content.
"""

from __future__ import annotations

import math
import urllib.parse

from protego import Protego

__all__ = ["MAX_ROBOTS_BYTES", "Robots", "robots_url"]

#: Google reads at most this much of a robots.txt file; the rest is ignored.
MAX_ROBOTS_BYTES = 500 * 1024

_DEFAULT_PORTS = {"http": 80, "https": 443}


def robots_url(url: str) -> str:
    """The robots.txt URL for ``url``'s origin: scheme and host lowercased, the default
    port dropped, no user info. ValueError when ``url`` is not http(s) with a host."""
    parts = urllib.parse.urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = parts.hostname
    port = parts.port  # ValueError on an invalid port
    if scheme not in _DEFAULT_PORTS or not host:
        raise ValueError(f"not an http(s) URL with a host: {url!r}")
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    return f"{scheme}://{netloc}/robots.txt"


class Robots:
    """The robots.txt rules of one origin (see the module docstring).

    ``url`` is the robots.txt URL (None when not given); ``status`` the HTTP status it
    was fetched with (None: parsed from text, or a network error for ``unavailable``);
    ``temporary`` is True when the answer stands only until the file can be fetched
    again.
    """

    __slots__ = ("_allow_all", "_rules", "error", "status", "temporary", "url")

    def __init__(
        self,
        url: str | None,
        rules: Protego | None,
        *,
        allow_all: bool = False,
        status: int | None = None,
        temporary: bool = False,
        error: str | None = None,
    ) -> None:
        """Prefer ``parse`` and ``unavailable``; ``rules=None`` allows everything when
        ``allow_all``, else nothing."""
        self.url = None if url is None else robots_url(url)
        self._rules = rules
        self._allow_all = allow_all
        self.status = status
        self.temporary = temporary
        self.error = error

    @classmethod
    def parse(cls, text: str, url: str) -> Robots:
        """The rules in ``text``, the file fetched for ``url``'s origin (any URL on it).
        Unparsable lines are ignored; only the first ``MAX_ROBOTS_BYTES`` count."""
        if len(text) > MAX_ROBOTS_BYTES // 4:
            text = text.encode("utf-8", "replace")[:MAX_ROBOTS_BYTES].decode("utf-8", "ignore")
        try:
            rules = Protego.parse(text)
        except Exception:  # a parser bug must not stop the crawl: treat as no file
            return cls(url, None, allow_all=True)
        return cls(url, rules)

    @classmethod
    def unavailable(
        cls, status: int | None, url: str | None = None, error: str | None = None
    ) -> Robots:
        """The rules when the file could not be had: ``status`` is the HTTP status, or
        None for a network error (``error`` says which); ``url`` (optional) any URL on
        the origin. ValueError for a 1xx or 2xx status (a 2xx file is ``parse``d)."""
        if status is not None and not 300 <= status <= 599:
            raise ValueError(f"status {status} is not a failure: parse the file instead")
        if status is not None and status < 500 and status != 429:
            return cls(url, None, allow_all=True, status=status)
        return cls(url, None, allow_all=False, status=status, temporary=True, error=error)

    @property
    def allows_everything(self) -> bool:
        """True when there are no rules at all (no file)."""
        return self._rules is None and self._allow_all

    def allowed(self, url: str, user_agent: str) -> bool:
        """Whether ``user_agent`` may fetch ``url`` (a URL on this origin: only its path
        and query are read). False for what cannot be parsed."""
        try:
            path = urllib.parse.urlsplit(url).path
        except ValueError:
            return False
        if path == "/robots.txt":
            return True
        if self._rules is None:
            return self._allow_all
        try:
            return bool(self._rules.can_fetch(url, user_agent))
        except Exception:  # protego on a hostile URL: refuse rather than crash
            return False

    @property
    def sitemaps(self) -> list[str]:
        """The file's ``Sitemap:`` URLs, in order (none when there is no file)."""
        if self._rules is None:
            return []
        try:
            return [str(url) for url in self._rules.sitemaps]
        except Exception:  # a parser bug: no sitemaps rather than a crash
            return []

    def crawl_delay(self, user_agent: str) -> float | None:
        """The Crawl-delay for ``user_agent`` in seconds, None when none is given (or it
        is negative or not finite)."""
        if self._rules is None:
            return None
        delay = self._rules.crawl_delay(user_agent)
        if delay is None or not math.isfinite(delay) or delay < 0:
            return None
        return float(delay)

    def __repr__(self) -> str:
        kind = (
            "rules"
            if self._rules is not None
            else ("allow all" if self._allow_all else "disallow all")
        )
        return f"Robots({self.url!r}, {kind}, status={self.status})"
