"""The fetcher's direct HTTP/1.1 connections: h11 over asyncio streams.

``DirectPool.send(request)`` takes the ``httpcore.Request`` the fetcher builds and
returns an ``httpcore.Response`` whose stream reads the body as it arrives, like an
httpcore pool does, with less work per request: no anyio cancel scopes, locks or events,
no ``sniffio`` look-ups, one connection object of our own. The fetcher uses it for its
direct requests over HTTP/1.1; a proxy, or ``http2=True``, goes through an httpcore pool.

The rules of the pinned httpcore pool it replaces hold here:

* a connection goes only to the addresses that ``addresses(host, port)`` gives (the
  fetcher's checked pins for this task), in order, the next one on a connect error; none
  is a refusal, so a connection never falls back to DNS;
* TLS uses the given context, with the URL host as SNI and certificate name;
* keep-alive connections are kept per origin (scheme, host, port), at most
  ``max_keepalive`` of them in all (the one idle the longest goes first), each for
  ``keepalive_expiry`` seconds, and one that the server closed is dropped before reuse; at most
  ``max_connections`` requests are in flight at once (the next one waits);
* a connect takes at most ``connect_timeout`` seconds; every other bound is the
  fetcher's deadline around the whole fetch;
* the debug log has each connect (address, port) and each response's status line,
  never a header (credentials travel in headers);
* errors are httpx's: ``ConnectError``/``ConnectTimeout`` (with the OS error as cause),
  ``ReadError``/``WriteError``, ``RemoteProtocolError``.

A connection goes back to the pool only once its response was read to the end and both
sides may go on (h11's states); a response closed early, a cancelled read or an error
closes it.
"""

from __future__ import annotations

import asyncio
import logging
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable, Sequence

import h11
import httpcore
import httpx

__all__ = ["DirectPool", "open_stream", "readable"]

logger = logging.getLogger(__name__)

_READ = 64 * 1024
_MAX_HEAD = 100 * 1024  # the largest response head h11 accepts (httpcore's figure)

Origin = tuple[bytes, bytes, int]
Addresses = Callable[[str, int], Sequence[object]]


async def open_stream(
    address: str, port: int, ssl_context: ssl.SSLContext | None, server_hostname: str | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """One TCP (and TLS) connection to ``address`` (an IP literal): every connection of
    the pool is opened here."""
    return await asyncio.open_connection(
        address, port, ssl=ssl_context, server_hostname=server_hostname, limit=_READ
    )


def readable(sock: socket.socket | None) -> bool:
    """Whether ``sock`` has data or EOF waiting (or is gone): an idle keep-alive
    connection that is readable was closed by the server (or broke the protocol). The
    check httpcore makes before it reuses a connection (``is_socket_readable``)."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([fd], [], [], 0)[0])
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class _Connection:
    __slots__ = ("idle_since", "origin", "protocol", "reader", "socket", "writer")

    def __init__(
        self, origin: Origin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.socket: socket.socket | None = writer.get_extra_info("socket")
        self.protocol = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self.idle_since = 0.0

    def close(self) -> None:
        self.writer.close()

    def gone(self) -> bool:
        """Whether the server closed this idle connection: EOF or an error the event loop
        has seen, or data or EOF waiting on the socket that it has not read yet."""
        reader = self.reader
        if reader.at_eof() or reader.exception() is not None or self.writer.is_closing():
            return True
        return readable(self.socket)

    async def receive(self) -> h11.Event:
        """The next h11 event, reading from the socket as needed."""
        protocol = self.protocol
        while True:
            try:
                event = protocol.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if isinstance(event, h11.Event):
                return event
            if event is h11.PAUSED:  # the response already ended: not asked by this module
                raise httpx.RemoteProtocolError("no more events on this connection")
            try:
                data = await self.reader.read(_READ)
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
            if not data and protocol.their_state is h11.SEND_RESPONSE:
                raise httpx.RemoteProtocolError("server disconnected without sending a response")
            try:
                protocol.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc


class _Body:
    """The body of one response: an async iterable of chunks; ``aclose`` hands the
    connection back to the pool when the body was read to the end, else closes it."""

    def __init__(self, pool: DirectPool, connection: _Connection) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        assert connection is not None, "the body was closed"
        while True:
            event = await connection.receive()
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise httpx.RemoteProtocolError(
                    "server disconnected before the end of the body"
                    if isinstance(event, h11.ConnectionClosed)
                    else f"unexpected {type(event).__name__} in the body"
                )

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.release(connection)


class DirectPool:
    """HTTP/1.1 keep-alive connections to checked addresses (see the module docstring)."""

    def __init__(
        self,
        *,
        addresses: Addresses,
        ssl_context: ssl.SSLContext,
        max_connections: int,
        max_keepalive: int,
        connect_timeout: float,
        keepalive_expiry: float = 5.0,
    ) -> None:
        self._addresses = addresses
        self._ssl = ssl_context
        self._slots = asyncio.Semaphore(max_connections)
        self._max_connections = max_connections
        self._busy = 0
        self._max_keepalive = max_keepalive
        self._connect_timeout = connect_timeout
        self._expiry = keepalive_expiry
        self._idle: dict[Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._closed = False

    async def send(self, request: httpcore.Request) -> httpcore.Response:
        """Send ``request`` (a GET without a body) and read the response head."""
        url = request.url
        origin: Origin = (url.scheme, url.host, url.port or (443 if url.scheme == b"https" else 80))
        await self._slots.acquire()
        self._busy += 1
        connection: _Connection | None = None
        try:
            connection = self._idle_connection(origin)
            if connection is None:
                self._make_room()
                connection = await self._connect(origin)
            event = await self._exchange(connection, request)
        except BaseException:
            if connection is not None:
                connection.close()
            self._done()
            raise
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "%s %s://%s:%d%s: HTTP/%s %d", request.method.decode(), *(
                    part.decode("ascii", "replace") for part in origin[:2]
                ), origin[2], url.target.decode("ascii", "replace"),
                event.http_version.decode(), event.status_code,
            )  # fmt: skip
        return httpcore.Response(
            event.status_code,
            headers=event.headers.raw_items(),
            content=_Body(self, connection),
            extensions={
                "http_version": b"HTTP/" + event.http_version,
                "reason_phrase": event.reason,
            },
        )

    async def _exchange(self, connection: _Connection, request: httpcore.Request) -> h11.Response:
        protocol = connection.protocol
        head = h11.Request(
            method=request.method, target=request.url.target, headers=request.headers
        )
        try:
            data = (protocol.send(head) or b"") + (protocol.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError as exc:
            raise httpx.LocalProtocolError(str(exc)) from exc
        try:
            connection.writer.write(data)
            await connection.writer.drain()
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc
        while True:
            event = await connection.receive()
            if isinstance(event, h11.Response):
                return event
            if isinstance(event, h11.InformationalResponse):
                continue
            raise httpx.RemoteProtocolError("server disconnected without sending a response")

    def _idle_connection(self, origin: Origin) -> _Connection | None:
        """A kept connection to ``origin`` that is still open, if any."""
        idle = self._idle.get(origin)
        if idle is None:
            return None
        now = time.monotonic()
        found = None
        while idle and found is None:
            connection = idle.pop()  # the one used last
            self._idle_count -= 1
            if now - connection.idle_since <= self._expiry and not connection.gone():
                found = connection
            else:
                connection.close()
        if not idle:
            del self._idle[origin]
        return found

    def _make_room(self) -> None:
        """Close kept connections (the oldest first) while a new one would make more than
        ``max_connections`` open in all."""
        while self._idle_count and self._busy + self._idle_count > self._max_connections:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        """Close the kept connection that has been idle the longest."""
        origin, kept = min(self._idle.items(), key=lambda item: item[1][0].idle_since)
        kept.pop(0).close()
        self._idle_count -= 1
        if not kept:
            del self._idle[origin]

    def _done(self) -> None:
        self._busy -= 1
        self._slots.release()

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, raw_host, port = origin
        host = raw_host.decode("ascii")
        addresses = self._addresses(host, port)
        if not addresses:
            raise httpx.ConnectError(
                f"refused: no checked address for {host}:{port} "
                "(connections are made only through Fetcher.fetch)"
            )
        tls = self._ssl if scheme == b"https" else None
        failure: httpx.TransportError | None = None
        for address in addresses:
            try:
                async with asyncio.timeout(self._connect_timeout):
                    reader, writer = await open_stream(
                        str(address), port, tls, host if tls is not None else None
                    )
            except TimeoutError as exc:
                failure = httpx.ConnectTimeout(f"connect to {address} port {port} timed out")
                failure.__cause__ = exc
            except (OSError, ssl.SSLError) as exc:
                failure = httpx.ConnectError(str(exc) or type(exc).__name__)
                failure.__cause__ = exc
            else:
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("connected to %s port %d (%s)", address, port, host)
                return _Connection(origin, reader, writer)
        assert failure is not None
        raise failure

    def release(self, connection: _Connection) -> None:
        """The end of a response: keep its connection for the next request to its origin
        when the exchange ended cleanly (the connection idle the longest makes room for
        it when ``max_keepalive`` are kept), else close it."""
        self._done()
        protocol = connection.protocol
        if (
            self._closed
            or protocol.our_state is not h11.DONE
            or protocol.their_state is not h11.DONE
            or self._max_keepalive == 0
        ):
            connection.close()
            return
        while self._idle_count >= self._max_keepalive:
            self._drop_oldest()
        protocol.start_next_cycle()
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.origin, []).append(connection)
        self._idle_count += 1

    async def aclose(self) -> None:
        """Close the kept connections; a response read later closes its own."""
        self._closed = True
        idle, self._idle, self._idle_count = self._idle, {}, 0
        for connections in idle.values():
            for connection in connections:
                connection.close()
