"""Proxies for the fetcher: which proxy a URL goes through (its connection pool is
``crawler.pools.proxy_pool``).

A proxy is ``http://``, ``https://`` (TLS to the proxy), ``socks5://`` or ``socks5h://``
(the same here: the proxy resolves the target's name), with optional ``user:password@``
credentials (percent-encoded). ``FetchSettings.proxy`` sends every request through one;
``FetchSettings.proxy_from_env`` takes each URL's proxy from this process's environment
(``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY``, upper or lower case, as
``urllib.request`` reads them).

The address guard is unchanged by a proxy: the fetcher resolves the target's host itself
and checks every address before it sends anything (``resolve_checked``); a refused host
never reaches the proxy. The proxy then connects to the host *by name* (its own DNS
answer may differ from the one checked: a proxy that refuses private destinations itself
closes that gap). The proxy's own address is the operator's choice and is not checked
(a proxy on 127.0.0.1 or the local network is the usual case); the proxy pool connects
to the proxy and nowhere else.

Credentials never leave this module: the pool gets them apart from the URL, and
``display`` (the URL without them) is what errors and records show.
"""

from __future__ import annotations

import importlib.util
import urllib.parse
import urllib.request
from dataclasses import dataclass

from crawlq.exceptions import ConfigurationError

__all__ = ["Proxy", "bypassed", "environment_proxies", "parse_proxy"]

_DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080}


@dataclass(frozen=True)
class Proxy:
    """One proxy: its URL without credentials (``display``) and the credentials."""

    scheme: str
    host: str
    port: int
    auth: tuple[str, str] | None = None

    @property
    def display(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __repr__(self) -> str:
        return f"Proxy({self.display!r}{', with credentials' if self.auth else ''})"


def parse_proxy(url: str, what: str = "proxy") -> Proxy:
    """The ``Proxy`` of ``url``; ConfigurationError naming ``what`` (never showing the
    credentials) when it is not a proxy URL this fetcher can use."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(f"{what} must be a URL like http://host:3128")
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ConfigurationError(f"{what} is not a valid URL (bad port or brackets)") from None
    scheme = parts.scheme.lower()
    shown = f"{scheme}://{parts.hostname}" if parts.hostname else repr(scheme)
    if scheme not in _DEFAULT_PORTS:
        raise ConfigurationError(
            f"{what} {shown}: the scheme must be http, https, socks5 or socks5h "
            "(e.g. http://proxy:3128, socks5://127.0.0.1:1080)"
        )
    if not parts.hostname:
        raise ConfigurationError(f"{what} {shown}: no host")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigurationError(f"{what} {shown}: a proxy URL has no path, query or fragment")
    if scheme.startswith("socks") and importlib.util.find_spec("socksio") is None:
        raise ConfigurationError(
            f"{what} {shown}: SOCKS needs the socksio package: pip install 'crawlq[socks]'"
        )
    auth = None
    if parts.username is not None or parts.password is not None:
        user = urllib.parse.unquote(parts.username or "")
        auth = (user, urllib.parse.unquote(parts.password or ""))
    return Proxy(scheme, parts.hostname, port or _DEFAULT_PORTS[scheme], auth)


def environment_proxies() -> tuple[dict[str, Proxy], str]:
    """The proxies of this process's environment by URL scheme (``http``, ``https``,
    ``all``) and the NO_PROXY value; ConfigurationError naming the variable of a bad one."""
    found = urllib.request.getproxies_environment()
    proxies = {
        scheme: parse_proxy(found[scheme], f"the environment variable {scheme.upper()}_PROXY")
        for scheme in ("http", "https", "all")
        if found.get(scheme)
    }
    return proxies, found.get("no", "")


def bypassed(host: str, no_proxy: str) -> bool:
    """Whether NO_PROXY (``no_proxy``, comma-separated) names ``host``: ``*`` names every
    host; ``example.com``, ``.example.com`` and ``*.example.com`` name it and its
    subdomains; a ``:port`` on an entry is ignored; addresses are compared as written."""
    name = host.strip("[]").lower().rstrip(".")
    for entry in no_proxy.split(","):
        text = entry.strip().lower()
        if text == "*":
            return True
        if text.startswith("["):
            text = text[1 : text.find("]")] if "]" in text else text[1:]
        elif text.count(":") == 1:
            text = text.split(":")[0]
        text = text.removeprefix("*").lstrip(".").rstrip(".")
        if text and (name == text or name.endswith("." + text)):
            return True
    return False
