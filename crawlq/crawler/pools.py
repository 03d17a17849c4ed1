"""httpcore's connection pools, for what the direct HTTP/1.1 path does not do: HTTP/2
(``FetchSettings.http2``) and proxies.

A fetcher imports this module when it first needs one of its pools, so a crawl over
plain HTTP/1.1 never loads httpcore (nor h11, anyio and socksio under it):
``crawler.http11`` sends its requests.

* ``PoolTransport.pinned``: an httpcore pool whose network backend (``PinnedBackend``)
  connects only to the checked addresses that the fetcher pinned for (host, port) in
  the current context (``crawler.fetch`` says why that is robust);
* ``PoolTransport.through``: a proxy's pool (``proxy_pool``), whose backend connects to
  the proxy and nowhere else (``crawler.proxies`` says what a proxy changes and what it
  does not).

Both are written against httpcore's public API (``AsyncConnectionPool(network_backend=
...)``, ``AsyncHTTPProxy``, ``AsyncSOCKSProxy``); their errors are raised as httpx's,
as the direct path raises them.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

from crawlq.crawler.http11 import Addresses, Response, readable, unpinned

if TYPE_CHECKING:
    from crawlq.crawler.fetch import FetchSettings, Prepared
    from crawlq.crawler.proxies import Proxy

__all__ = ["PinnedBackend", "PoolTransport", "RestrictedBackend", "proxy_pool"]


# --- backends ----------------------------------------------------------------------------


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


class PinnedBackend(RestrictedBackend):
    """Connects only to the checked addresses pinned for (host, port) in this context:
    ``addresses(host, port)``, the direct pool's own rule (none: refused)."""

    def __init__(self, inner: httpcore.AsyncNetworkBackend, addresses: Addresses) -> None:
        super().__init__(inner)
        self._addresses = addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self._addresses(host, port)
        if not addresses:
            raise httpcore.ConnectError(unpinned(host, port))
        failure: Exception | None = None
        for address in addresses:
            try:
                stream = await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
                return _Stream(stream)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure


class _Stream(httpcore.AsyncNetworkStream):
    """A connection of the pinned pool: ``inner`` with its raw socket looked up once.
    httpcore asks whether each idle connection of the pool is readable (closed by the
    server) at every request the pool assigns; the backend's stream looks the socket up
    again through its attributes each time."""

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket: socket.socket | None = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return readable(self._socket)
        return self._inner.get_extra_info(info)


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


# --- the transport -----------------------------------------------------------------------


_ERRORS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
    (httpcore.ProxyError, httpx.ProxyError),
)


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    """Re-raise httpcore errors as the matching httpx errors (most specific first)."""
    try:
        yield
    except Exception as exc:
        for source, target in _ERRORS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


class PoolTransport:
    """GET requests over an httpcore pool: the pinned one, or a proxy's."""

    def __init__(self, pool: httpcore.AsyncConnectionPool) -> None:
        self._pool = pool

    @classmethod
    def pinned(
        cls, settings: FetchSettings, ssl_context: ssl.SSLContext, addresses: Addresses
    ) -> PoolTransport:
        return cls(
            httpcore.AsyncConnectionPool(
                ssl_context=ssl_context,
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_keepalive_connections,
                keepalive_expiry=5.0,
                http1=True,
                http2=settings.http2,
                network_backend=PinnedBackend(httpcore.AnyIOBackend(), addresses),
            )
        )

    @classmethod
    def through(
        cls, proxy: Proxy, settings: FetchSettings, ssl_context: ssl.SSLContext
    ) -> PoolTransport:
        return cls(
            proxy_pool(
                proxy,
                ssl_context=ssl_context,
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_keepalive_connections,
                http2=settings.http2,
            )
        )

    async def get(self, url: httpx.URL, prepared: Prepared) -> Response:
        """GET ``url`` with the prepared headers, the response in ``http11.Response``'s
        shape (the body's httpcore errors raised as httpx's)."""
        request = httpcore.Request(
            method=b"GET",
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=prepared.raw,
            extensions=prepared.extensions,
        )
        with _httpx_errors():
            async with closing_failed_connects():
                response = await self._pool.handle_async_request(request)
        assert isinstance(response.stream, AsyncIterable)
        stream: AsyncIterable[bytes] = response.stream

        async def body() -> AsyncGenerator[bytes, None]:
            with _httpx_errors():
                async for part in stream:
                    yield part

        async def close() -> None:
            with _httpx_errors():
                await response.aclose()

        return Response(
            response.status,
            response.extensions.get("reason_phrase", b""),
            response.extensions.get("http_version", b"HTTP/1.1"),
            response.headers,
            body(),
            close,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
