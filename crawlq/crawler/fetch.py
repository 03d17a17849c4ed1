"""The fetcher: one page over HTTP(S), with deadlines, caps and the address guard.

``async with Fetcher(settings) as fetcher: result = await fetcher.fetch(url)`` never
raises for anything the network or the page does: every failure is a ``FetchResult`` with
``error`` set (``"refused: ..."`` for the address guard and for schemes other than http
and https, ``"deadline: ..."`` when the total deadline passed, ``"body over N bytes"`` /
``"decoded body over N bytes"`` with ``truncated`` when a cap stopped the read). Only
programming errors (and cancellation) propagate.

Rules, for the first request and for every redirect hop:

* only ``http`` and ``https``; anything else is refused before any connection;
* the host is checked with ``resolve_checked`` (address guard, DNS included) before any
  connection, a name in a thread on every hop (DNS is asked again each time), an IP
  literal at once and remembered for the fetcher's life; a refused hop makes 0
  connections;
* redirects (301, 302, 303, 307, 308 with a Location) are followed by hand, always as GET,
  each one counted against ``max_redirects``; a URL seen before in the chain is a loop;
* ``asyncio.timeout(deadline)`` wraps the whole fetch, DNS and redirects included;
* the body is read as a stream of wire bytes, decoded here (gzip, deflate, br) with a
  bounded output per step, so ``max_body_bytes`` (wire) and ``max_decoded_bytes``
  (decoded) stop the read as soon as they are passed: a compression bomb costs at most
  the cap plus one step (256 KiB) of memory.

Pinning: the connection goes to an address that was checked. httpx builds the requests'
headers (once per origin and extra headers, kept). A direct HTTP/1.1 request goes to
``crawler.http11.DirectPool`` (requests written from those bytes, responses read by its
own parser, over asyncio streams), which connects only to the addresses pinned below for
its (host, port), with the same rules; a proxied request, or any with ``http2=True``,
goes through httpcore: ``crawler.pools`` (imported by the first fetch that needs it)
hands them to an httpcore pool whose network backend, ``PinnedBackend``, is written
against the public httpcore API (``AsyncConnectionPool(network_backend=...)``, no private
httpx attributes). Its ``connect_tcp`` ignores DNS entirely: it looks up the (host, port)
that httpcore asks for in a ``ContextVar`` map that ``fetch`` fills with the addresses
``resolve_checked`` returned for that hop, and connects to those IP literals (in
resolver order, the next one on a connect error). httpcore still uses the URL host for
the Host header and as TLS SNI and certificate name, so virtual hosting and HTTPS
verification work unchanged. Why this is robust:

* it fails closed: a (host, port) with no pin in the current context, or a Unix socket,
  is refused with a connect error, so a connection can never fall back to the resolver
  (and a client used outside ``fetch`` cannot connect at all);
* the map lives in a ``ContextVar``: each asyncio task has its own, and httpcore opens a
  connection inside the task that sent the request, so concurrent fetches cannot see or
  remove each other's pins;
* pooled keep-alive connections are keyed by origin and were all opened to addresses
  checked under this fetcher's one policy, so reusing them never reaches an address the
  policy refuses; a later DNS answer (rebinding) is checked again before any new
  connection;
* the client ignores proxy environment variables (``trust_env=False``); a proxy is used
  only when the settings name one (``proxy``, or ``proxy_from_env``), through a pool of
  its own that connects to the proxy alone, after the target's host was checked here
  like any other (``crawler.proxies`` says what that does and does not cover).

``bytes`` counts the final response's body as received (after transfer decoding, before
content decoding); ``redirects`` lists the URLs whose redirect was followed, in order;
``final_url``, ``status`` and ``headers`` describe the last response received (or the
last URL tried when none was).
"""

from __future__ import annotations

import asyncio
import http
import importlib.util
import ssl
import time
import urllib.parse
import zlib
from collections.abc import (
    Iterable,
    Iterator,
    Mapping,
)
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Protocol

import brotli  # type: ignore[import-untyped]
import httpx

from crawlq.crawler.addresses import (
    AddressPolicy,
    IPAddress,
    check_header_value,
    parse_host,
    resolve_checked,
)
from crawlq.crawler.http11 import DirectPool, Response, request_head, unpinned
from crawlq.crawler.proxies import Proxy, bypassed, environment_proxies, parse_proxy
from crawlq.exceptions import AddressRefused, ConfigurationError
from crawlq.payload import check_count, check_seconds
from crawlq.version import __version__

if TYPE_CHECKING:
    from crawlq.crawler.pools import PoolTransport

__all__ = ["DEFAULT_USER_AGENT", "FetchResult", "FetchSettings", "Fetcher"]

DEFAULT_USER_AGENT = f"crawlq/{__version__}"

_SCHEMES = {"http": 80, "https": 443}
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_STEP = 256 * 1024  # the most a decoder may produce in one step
_LITERALS = 1024  # IP literals whose check a fetcher remembers
_PREPARED = 1024  # origins (with extra headers) whose request headers a fetcher keeps
# brotli >= 1.2 can bound its output; an older one is not offered to servers at all.
_BROTLI_BOUNDED = hasattr(brotli.Decompressor, "can_accept_more_data")
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "user-agent",
        "accept-encoding",
        "content-length",
        "transfer-encoding",
        "connection",
        "te",
        "upgrade",
        "authorization",
        "proxy-authorization",
        "cookie",
    }
)

_Pins = Mapping[tuple[str, int], tuple[IPAddress, ...]]
_PINS: ContextVar[_Pins] = ContextVar("crawlq_fetch_pins", default=MappingProxyType({}))


# --- settings --------------------------------------------------------------------------


@dataclass(frozen=True)
class FetchSettings:
    """How the fetcher fetches; every field is checked, errors raise ConfigurationError.

    ``deadline`` bounds a whole fetch (DNS, connects, redirects, body) in seconds;
    ``connect_timeout`` bounds one TCP/TLS connect. ``max_body_bytes`` caps the body
    as received, ``max_decoded_bytes`` after gzip/deflate/br decoding. ``extra_headers``
    are (name, value) pairs (a mapping is accepted too), checked for CR/LF and control
    characters; Host, User-Agent, Accept-Encoding and framing headers are set by the
    fetcher and refused here, and so are Authorization, Proxy-Authorization and Cookie:
    they go in ``credentials``. ``http2`` needs the ``h2`` package.

    ``credentials`` are (name, value) headers (Authorization, Cookie) sent only to the
    hosts named in ``credential_hosts`` (host names, any port or scheme), on every hop,
    and dropped on a redirect to any other host; they are left out of ``repr``.

    ``proxy`` (a URL, credentials allowed, left out of ``repr``) sends every request
    through that proxy; ``proxy_from_env`` takes each URL's proxy from the environment
    (see ``crawler.proxies``, which also says how the address guard works with one).
    """

    user_agent: str = DEFAULT_USER_AGENT
    deadline: float = 30.0
    connect_timeout: float = 10.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_decoded_bytes: int = 50 * 1024 * 1024
    max_redirects: int = 10
    max_connections: int = 100
    max_keepalive_connections: int = 20
    extra_headers: tuple[tuple[str, str], ...] = ()
    http2: bool = False
    policy: AddressPolicy = field(default_factory=AddressPolicy)
    credentials: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    credential_hosts: frozenset[str] = frozenset()
    proxy: str | None = field(default=None, repr=False)
    proxy_from_env: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.user_agent, str) or not self.user_agent.strip():
            raise ConfigurationError(
                f"user_agent must be a non-empty string, not {self.user_agent!r}"
            )
        check_header_value("User-Agent", self.user_agent)
        object.__setattr__(self, "deadline", check_seconds("deadline", self.deadline))
        object.__setattr__(
            self, "connect_timeout", check_seconds("connect_timeout", self.connect_timeout)
        )
        check_count("max_body_bytes", self.max_body_bytes, 1)
        check_count("max_decoded_bytes", self.max_decoded_bytes, 1)
        check_count("max_redirects", self.max_redirects, 0)
        check_count("max_connections", self.max_connections, 1)
        check_count("max_keepalive_connections", self.max_keepalive_connections, 0)
        headers = _header_pairs("extra_headers", self.extra_headers)
        for name, _ in headers:
            if name.lower() in _RESERVED_HEADERS:
                raise ConfigurationError(f"header {name!r} is set by the fetcher, not by settings")
        object.__setattr__(self, "extra_headers", headers)
        object.__setattr__(
            self, "credentials", _header_pairs("credentials", self.credentials, secret=True)
        )
        hosts = self.credential_hosts
        if isinstance(hosts, str) or not all(isinstance(h, str) for h in hosts):
            raise ConfigurationError(f"credential_hosts must be host names, not {hosts!r}")
        object.__setattr__(self, "credential_hosts", frozenset(h.lower() for h in hosts))
        if not isinstance(self.proxy_from_env, bool):
            raise ConfigurationError(
                f"proxy_from_env must be True or False, not {self.proxy_from_env!r}"
            )
        if self.proxy is not None:
            parse_proxy(self.proxy)  # checks it
            if self.proxy_from_env:
                raise ConfigurationError("give a proxy or proxy_from_env=True, not both")
        if not isinstance(self.http2, bool):
            raise ConfigurationError(f"http2 must be True or False, not {self.http2!r}")
        if self.http2 and importlib.util.find_spec("h2") is None:
            raise ConfigurationError("http2=True needs the h2 package: pip install 'crawlq[http2]'")
        if not isinstance(self.policy, AddressPolicy):
            raise ConfigurationError(f"policy must be an AddressPolicy, not {self.policy!r}")


def _header_pairs(what: str, raw: object, *, secret: bool = False) -> tuple[tuple[str, str], ...]:
    """Checked (name, value) pairs from pairs or a mapping; a secret value is never shown."""
    pairs: Iterable[object]
    if isinstance(raw, Mapping):
        pairs = list(raw.items())
    elif isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
        shown = "a string" if secret else repr(raw)
        raise ConfigurationError(f"{what} must be (name, value) pairs, not {shown}")
    else:
        pairs = list(raw)
    headers: list[tuple[str, str]] = []
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            shown = "an item" if secret else repr(pair)
            raise ConfigurationError(f"{what}: {shown} is not a (name, value) pair")
        name, value = pair
        check_header_value(name, value)
        headers.append((name, value))
    return tuple(headers)


@dataclass(frozen=True)
class FetchResult:
    """One fetch. ``error`` is None only for a complete response (any status code).

    ``status``/``headers``/``content_type`` describe the response at ``final_url``
    (None/empty when none arrived); ``headers`` has lower-case names, repeated ones
    joined with ", "; ``content_type`` is the lower-case media type without parameters.
    ``body`` is decoded; ``truncated`` says a cap stopped it (``error`` names the cap).
    ``bytes`` is the body as received; ``redirects`` the URLs whose redirect was
    followed; ``elapsed_ms`` covers the whole fetch. The body is left out of ``repr``.
    ``reason`` and ``http_version`` are the last response's status line (the server's
    reason phrase, or the standard one when it sent none); ``request_headers`` are the
    headers of the last request sent, without ``credentials`` (for the WARC).
    """

    url: str
    final_url: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    body: bytes = field(default=b"", repr=False)
    truncated: bool = False
    elapsed_ms: int = 0
    redirects: list[str] = field(default_factory=list)
    bytes: int = 0
    error: str | None = None
    reason: str = ""
    http_version: str = "HTTP/1.1"
    request_headers: tuple[tuple[str, str], ...] = ()


# --- pinned connections ------------------------------------------------------------------


def _pinned(host: str, port: int) -> tuple[IPAddress, ...]:
    """The checked addresses pinned for (host, port) in this context (none: refused)."""
    return tuple(_PINS.get().get((host, port), ()))


class _Unconnected(httpx.AsyncBaseTransport):
    """The fetcher's httpx client's transport: the client builds request headers and
    never connects (``Fetcher.fetch`` sends through the pools, to pinned addresses)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(unpinned(request.url.host, request.url.port), request=request)


# --- bounded decoding --------------------------------------------------------------------


class _Decoder(Protocol):
    def feed(self, data: bytes) -> Iterator[bytes]: ...


class _ZlibDecoder:
    """gzip (concatenated members too) or deflate (zlib-wrapped or raw), in bounded steps."""

    def __init__(self, encoding: str) -> None:
        self._gzip = encoding in ("gzip", "x-gzip")
        self._started = False
        self._object = zlib.decompressobj(31 if self._gzip else 15)

    def feed(self, data: bytes) -> Iterator[bytes]:
        pending = data
        while True:
            try:
                out = self._object.decompress(pending, _STEP)
            except zlib.error:
                if self._gzip or self._started:
                    raise
                self._object = zlib.decompressobj(-15)  # raw deflate, as some servers send
                out = self._object.decompress(pending, _STEP)
            self._started = True
            if out:
                yield out
            pending = self._object.unconsumed_tail
            if self._object.eof and self._gzip and self._object.unused_data:
                pending = self._object.unused_data
                self._object = zlib.decompressobj(31)
                continue
            if not pending and len(out) < _STEP:
                return


class _BrotliDecoder:
    def __init__(self) -> None:
        self._object = brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        out = self._object.process(data, output_buffer_limit=_STEP)
        if out:
            yield out
        while not self._object.can_accept_more_data():
            out = self._object.process(b"", output_buffer_limit=_STEP)
            if out:
                yield out


def _decoders(content_encoding: str) -> list[_Decoder]:
    """Decoders in the order to apply them; raises ValueError for an unknown coding."""
    decoders: list[_Decoder] = []
    for token in reversed([t.strip().lower() for t in content_encoding.split(",")]):
        if token in ("", "identity"):
            continue
        if token in ("gzip", "x-gzip", "deflate"):
            decoders.append(_ZlibDecoder(token))
        elif token == "br" and _BROTLI_BOUNDED:
            decoders.append(_BrotliDecoder())
        else:
            raise ValueError(f"unsupported content-encoding {token!r}")
    return decoders


def _decode(decoders: list[_Decoder], data: bytes) -> Iterator[bytes]:
    if not decoders:
        if data:
            yield data
        return
    first, rest = decoders[0], decoders[1:]
    for piece in first.feed(data):
        yield from _decode(rest, piece)


# --- the fetcher ---------------------------------------------------------------------------


@dataclass
class _State:
    final_url: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None
    body: list[bytes] = field(default_factory=list)
    truncated: bool = False
    redirects: list[str] = field(default_factory=list)
    wire: int = 0
    error: str | None = None
    reason: str = ""
    http_version: str = "HTTP/1.1"
    request_headers: tuple[tuple[str, str], ...] = ()
    conditional: tuple[str, tuple[tuple[str, str], ...]] | None = None


@dataclass(frozen=True)
class Prepared:
    """A request's headers as the client builds them: raw, as the direct pool writes
    them (``http11.request_head``), the request's extensions (timeouts), and as shown in
    results (without credentials)."""

    raw: list[tuple[bytes, bytes]]
    head: bytes
    extensions: dict[str, object]
    shown: tuple[tuple[str, str], ...]


def _headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Response headers by lower-case name, repeated ones joined with ", "; decoded as
    httpx decodes them: ASCII, else UTF-8, else Latin-1, for all of them alike."""
    for encoding in ("ascii", "utf-8"):
        try:
            pairs = [(name.decode(encoding), value.decode(encoding)) for name, value in raw]
            break
        except UnicodeDecodeError:
            continue
    else:
        pairs = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in raw]
    merged: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return merged


def _phrase(status: int) -> str:
    """The standard reason phrase of ``status`` ("Unknown" for a code without one)."""
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _describe(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if _caused_by(exc, ConnectionRefusedError):  # httpx says "All connection attempts failed"
        text = "connection refused: nothing accepts connections on that host and port"
    return f"{type(exc).__name__}: {text}"


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``kind`` is in the chain of causes and contexts of ``exc``."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


class Fetcher:
    """Fetches pages with one httpx.AsyncClient; use as ``async with Fetcher(settings)``.

    ``fetch`` may run concurrently from many tasks; the client's connection limits apply
    to all of them together.
    """

    def __init__(self, settings: FetchSettings | None = None) -> None:
        self.settings = settings or FetchSettings()
        encodings = "gzip, deflate, br" if _BROTLI_BOUNDED else "gzip, deflate"
        self._tls: ssl.SSLContext | None = None  # made by the first TLS connection
        # Direct HTTP/1.1 requests skip httpcore (crawler.http11): fewer layers per page.
        # HTTP/2 and proxies go through httpcore's pools (crawler.pools), made when needed.
        self._direct: DirectPool | None = None
        self._pinned_pool: PoolTransport | None = None
        if not self.settings.http2:
            self._direct = DirectPool(
                addresses=_pinned,
                ssl_context=self._tls_context,
                max_connections=self.settings.max_connections,
                max_keepalive=self.settings.max_keepalive_connections,
                connect_timeout=self.settings.connect_timeout,
            )
        self._proxy = None if self.settings.proxy is None else parse_proxy(self.settings.proxy)
        self._env_proxies: dict[str, Proxy] = {}
        self._no_proxy = ""
        if self.settings.proxy_from_env:
            self._env_proxies, self._no_proxy = environment_proxies()
        self._proxied: dict[Proxy, PoolTransport] = {}
        self._literals: dict[tuple[str, int], tuple[IPAddress, ...] | str] = {}
        self._requests: dict[
            tuple[bytes, bytes, int | None, tuple[tuple[str, str], ...]], Prepared
        ] = {}
        # The client builds the requests' headers (``_prepared``) and sends nothing.
        self._client = httpx.AsyncClient(
            transport=_Unconnected(),
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(self.settings.deadline, connect=self.settings.connect_timeout),
            headers=[
                ("User-Agent", self.settings.user_agent),
                ("Accept-Encoding", encodings),
                *self.settings.extra_headers,
            ],
        )

    async def __aenter__(self) -> Fetcher:
        await self._client.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._client.__aexit__(exc_type, exc, traceback)
        await self._close_pools()

    async def aclose(self) -> None:
        """Close the connection pools."""
        await self._client.aclose()
        await self._close_pools()

    async def _close_pools(self) -> None:
        if self._direct is not None:
            await self._direct.aclose()
        pools = [*self._proxied.values(), *filter(None, [self._pinned_pool])]
        self._proxied, self._pinned_pool = {}, None
        for transport in pools:
            await transport.aclose()

    def _tls_context(self) -> ssl.SSLContext:
        """The fetcher's TLS context, made on first use: loading the CA certificates
        costs tens of milliseconds, which a crawl of http:// pages never pays."""
        if self._tls is None:
            self._tls = httpx.create_ssl_context()
        return self._tls

    def _route(self, url: httpx.URL) -> tuple[DirectPool | PoolTransport, Proxy | None]:
        """The transport for ``url``: through its proxy, if it has one, else direct."""
        proxy = self._proxy
        if proxy is None and self._env_proxies:
            if not bypassed(url.host, self._no_proxy):
                proxy = self._env_proxies.get(url.scheme) or self._env_proxies.get("all")
        if proxy is None and self._direct is not None:
            return self._direct, None
        from crawlq.crawler.pools import PoolTransport  # HTTP/2 and proxies only

        if proxy is None:
            if self._pinned_pool is None:
                tls = self._tls_context()
                self._pinned_pool = PoolTransport.pinned(self.settings, tls, _pinned)
            return self._pinned_pool, None
        transport = self._proxied.get(proxy)
        if transport is None:
            transport = PoolTransport.through(proxy, self.settings, self._tls_context())
            self._proxied[proxy] = transport
        return transport, proxy

    async def fetch(
        self, url: str, conditional: tuple[str, tuple[tuple[str, str], ...]] | None = None
    ) -> FetchResult:
        """GET ``url`` under the settings' rules; network and page failures set ``error``.
        ``conditional`` is (URL, headers): headers sent only with the request to that URL
        (``If-None-Match`` to where the previous crawl's redirects ended)."""
        started = time.monotonic()
        state = _State(final_url=url, conditional=conditional)
        token = _PINS.set({})
        try:
            async with asyncio.timeout(self.settings.deadline):
                await self._follow(url, state)
        except TimeoutError:
            state.error = f"deadline: fetch took over {self.settings.deadline:g} s"
        finally:
            _PINS.reset(token)
        return FetchResult(
            url=url,
            final_url=state.final_url,
            status=state.status,
            headers=state.headers,
            content_type=state.content_type,
            body=b"".join(state.body),
            truncated=state.truncated,
            elapsed_ms=round((time.monotonic() - started) * 1000),
            redirects=state.redirects,
            bytes=state.wire,
            error=state.error,
            reason=state.reason,
            http_version=state.http_version,
            request_headers=state.request_headers,
        )

    async def _check(self, url: httpx.URL) -> str | None:
        """Pin the checked addresses of ``url``'s host; the refusal or error, if any."""
        if url.scheme not in _SCHEMES:
            return f"refused: scheme {url.scheme!r} is not http or https"
        raw_host = url.raw_host.decode("ascii")
        if not raw_host:
            return "invalid URL: no host"
        port = url.port or _SCHEMES[url.scheme]
        checked = self._literals.get((raw_host, port))
        if checked is None:
            try:
                if parse_host(raw_host) is not None:  # no DNS: checked here, and remembered
                    checked = self._literal(raw_host, port)
                else:  # DNS, in a thread, every time (a later answer may differ)
                    checked = tuple(
                        await asyncio.to_thread(
                            resolve_checked, raw_host, port, self.settings.policy
                        )
                    )
            except AddressRefused as exc:
                return f"refused: {exc}"
            except OSError as exc:
                return f"dns: {raw_host}: {exc}"
        if isinstance(checked, str):
            return checked
        pins = dict(_PINS.get())
        pins[(raw_host, port)] = checked
        _PINS.set(pins)
        return None

    def _literal(self, raw_host: str, port: int) -> tuple[IPAddress, ...] | str:
        """The checked address of the IP literal ``raw_host`` (or the refusal), kept for
        the fetcher's life: its policy is fixed and a literal needs no DNS."""
        try:
            checked: tuple[IPAddress, ...] | str = tuple(
                resolve_checked(raw_host, port, self.settings.policy)
            )
        except AddressRefused as exc:
            checked = f"refused: {exc}"
        if len(self._literals) >= _LITERALS:
            self._literals.clear()
        self._literals[(raw_host, port)] = checked
        return checked

    def _literal_refusal(self, url: str) -> str | None:
        """For a URL httpx rejects: "refused: ..." when its host is a refused IP literal."""
        try:
            host = urllib.parse.urlsplit(url).hostname
            if host is None or parse_host(host) is None:
                return None
            resolve_checked(host, 80, self.settings.policy)  # a literal: no DNS
        except AddressRefused as exc:
            return f"refused: {exc}"
        except (TypeError, ValueError):
            return None
        return None

    async def _follow(self, url: str, state: _State) -> None:
        try:
            current = httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            state.error = self._literal_refusal(url) or f"invalid URL: {exc}"
            return
        text = str(current)
        seen = {str(current.copy_with(fragment=None)) if "#" in text else text}
        while True:
            refusal = await self._check(current)
            if refusal is not None:
                state.error = refusal
                return
            state.final_url = str(current)
            state.status, state.headers, state.content_type = None, {}, None
            transport, proxy = self._route(current)
            try:
                location = await self._request(transport, current, state)
            except httpx.HTTPError as exc:
                state.error = _describe(exc)
                if proxy is not None:
                    state.error = f"{state.error} (through the proxy {proxy.display})"
                return
            if location is None:
                return
            try:
                target = current.join(location).copy_with(fragment=None)
            except (httpx.InvalidURL, TypeError, ValueError) as exc:
                state.error = f"invalid redirect location {location!r}: {exc}"
                return
            if str(target) in seen:
                state.error = f"redirect loop: {target} was already fetched"
                return
            if len(state.redirects) >= self.settings.max_redirects:
                state.error = f"too many redirects (over {self.settings.max_redirects})"
                return
            if target.scheme not in _SCHEMES:
                state.error = f"refused: redirect to scheme {target.scheme!r} ({target})"
                return
            seen.add(str(target))
            state.redirects.append(str(current))
            current = target

    async def _request(
        self, transport: DirectPool | PoolTransport, url: httpx.URL, state: _State
    ) -> str | None:
        """Send one GET; read the body into ``state``; the Location to follow, if any.
        The request's headers are the client's (``build_request``: its headers, in its
        order), made once per origin and extra headers and kept; the request goes to the
        direct pool or to the transport's httpcore pool, without httpx's request and
        response objects (fewer layers per page)."""
        settings = self.settings
        secret = settings.credentials and url.host.lower().rstrip(".") in settings.credential_hosts
        extra = list(settings.credentials) if secret else []
        if state.conditional is not None and state.conditional[0] == str(url):
            extra += state.conditional[1]
        prepared = self._prepared(url, tuple(extra), secret=bool(secret))
        # Not client.send: httpx builds a redirect request for every 3xx even with
        # follow_redirects=False, and raises InvalidURL on odd Locations.
        if isinstance(transport, DirectPool):
            response = await transport.get(
                url.raw_scheme, url.raw_host, url.port, url.raw_path, prepared.head
            )
        else:
            response = await transport.get(url, prepared)
        state.request_headers = prepared.shown
        try:
            status = state.status = response.status
            state.reason = response.reason.decode("ascii", errors="ignore") or _phrase(status)
            state.http_version = response.http_version.decode("ascii", errors="ignore")
            headers = state.headers = _headers(response.headers)
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            state.content_type = media or None
            location = headers.get("location")
            if status in _REDIRECTS and location:
                return location
            await self._read_body(response, state)
            return None
        finally:
            await response.aclose()

    def _prepared(
        self, url: httpx.URL, extra: tuple[tuple[str, str], ...], *, secret: bool
    ) -> Prepared:
        """The request headers for ``url``'s origin with ``extra``, as the client builds
        them (kept for the last ``_PREPARED`` origins and extras)."""
        key = (url.raw_scheme, url.raw_host, url.port, extra)
        prepared = self._requests.get(key)
        if prepared is None:
            request = self._client.build_request("GET", url, headers=list(extra) or None)
            secrets = {name.lower() for name, _ in self.settings.credentials} if secret else set()
            shown = tuple(
                (name, value)
                for name, value in request.headers.multi_items()
                if name.lower() not in secrets
            )
            raw = list(request.headers.raw)
            prepared = Prepared(raw, request_head(raw), dict(request.extensions), shown)
            if len(self._requests) >= _PREPARED:
                self._requests.clear()
            self._requests[key] = prepared
        return prepared

    async def _read_body(self, response: Response, state: _State) -> None:
        settings = self.settings
        try:
            decoders = _decoders(state.headers.get("content-encoding", ""))
        except ValueError as exc:
            decoders, state.error = [], str(exc)  # kept as received
        decoded = 0
        async for chunk in response.stream:
            state.wire += len(chunk)
            room = settings.max_body_bytes - (state.wire - len(chunk))
            over_wire = len(chunk) > room
            try:
                for piece in _decode(decoders, chunk[:room] if over_wire else chunk):
                    if len(piece) > settings.max_decoded_bytes - decoded:
                        state.body.append(piece[: settings.max_decoded_bytes - decoded])
                        state.truncated = True
                        state.error = f"decoded body over {settings.max_decoded_bytes} bytes"
                        return
                    decoded += len(piece)
                    state.body.append(piece)
            except (zlib.error, brotli.error) as exc:
                state.error = f"could not decode the body: {exc}"
                return
            if over_wire:
                state.truncated = True
                state.error = f"body over {settings.max_body_bytes} bytes"
                return
