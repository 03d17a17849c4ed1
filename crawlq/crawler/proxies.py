"""Proxies for the fetcher: which proxy a URL goes through, and its connection pool.

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

import contextlib
import importlib.util
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterable
from contextvars import ContextVar
from dataclasses import dataclass

import httpcore

from crawlq.exceptions import ConfigurationError

__all__ = [
    "Proxy",
    "RestrictedBackend",
    "bypassed",
    "closing_failed_connects",
    "environment_proxies",
    "parse_proxy",
    "proxy_pool",
]

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


_OPENED: ContextVar[list[httpcore.AsyncNetworkStream] | None] = ContextVar(
    "crawlq_proxy_streams", default=None
)


@contextlib.asynccontextmanager
async def closing_failed_connects() -> AsyncIterator[None]:
    """Close the proxy connections opened inside the block when it raises: httpcore
    1.0's SOCKS5 connection leaves its socket open when the proxy refuses the
    handshake (bad credentials, unreachable target)."""
    opened: list[httpcore.AsyncNetworkStream] = []
    token = _OPENED.set(opened)
    try:
        yield
    except BaseException:
        for stream in opened:
            with contextlib.suppress(Exception):
                await stream.aclose()
        raise
    finally:
        _OPENED.reset(token)


class RestrictedBackend(httpcore.AsyncNetworkBackend):
    """A network backend over ``inner`` that never uses Unix sockets; subclasses decide
    which TCP connections it makes (``connect_tcp``)."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("refused: the fetcher does not use Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _OnlyTo(RestrictedBackend):
    """A network backend that connects to one (host, port), the proxy, and refuses the
    rest: a proxied pool never opens a connection of its own to a target."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, host: str, port: int) -> None:
        super().__init__(inner)
        self._host, self._port = host, port

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if (host.strip("[]").lower(), port) != (self._host.lower(), self._port):
            raise httpcore.ConnectError("refused: a proxied pool connects only to its proxy")
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        opened = _OPENED.get()
        if opened is not None:
            opened.append(stream)
        return stream


def proxy_pool(
    proxy: Proxy,
    *,
    ssl_context: ssl.SSLContext,
    max_connections: int,
    max_keepalive_connections: int,
    http2: bool,
) -> httpcore.AsyncConnectionPool:
    """The httpcore pool that sends requests through ``proxy`` (HTTP forwarding for http
    targets, CONNECT for https ones; SOCKS5 for both)."""
    host = f"[{proxy.host}]" if ":" in proxy.host else proxy.host
    scheme = "socks5" if proxy.scheme.startswith("socks") else proxy.scheme
    url = f"{scheme}://{host}:{proxy.port}"
    backend = _OnlyTo(httpcore.AnyIOBackend(), proxy.host, proxy.port)
    common = {
        "ssl_context": ssl_context,
        "max_connections": max_connections,
        "max_keepalive_connections": max_keepalive_connections,
        "keepalive_expiry": 5.0,
        "http1": True,
        "http2": http2,
        "network_backend": backend,
    }
    if scheme == "socks5":
        return httpcore.AsyncSOCKSProxy(proxy_url=url, proxy_auth=proxy.auth, **common)  # type: ignore[arg-type]
    return httpcore.AsyncHTTPProxy(proxy_url=url, proxy_auth=proxy.auth, **common)  # type: ignore[arg-type]
