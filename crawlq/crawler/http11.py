"""The fetcher's direct HTTP/1.1 connections: GET requests written from bytes kept per
origin, responses read by a parser of this module, over asyncio streams.

``DirectPool.get(scheme, host, port, target, head)`` sends one GET and returns a
``Response`` whose ``stream`` reads the body as it arrives, like an httpcore pool does,
with less work per request: the request is one bytes join (``request_head`` checks and
writes the header lines once per origin), the response head is split and checked with a
few regular expressions, and the body is sliced from the connection's buffer. The
fetcher uses it for its direct requests over HTTP/1.1; a proxy, or ``http2=True``, goes
through an httpcore pool.

The response is read as h11 (the parser httpcore uses) reads it, and a differential
test holds the two together (``tests/unit/test_crawler_http11.py``):

* the status line is ``HTTP/d.d SP 3DIGIT [SP reason]``; header lines are
  ``token ":" OWS value OWS`` with no control character but tab in the value, a line
  starting with a space or tab continues the one before (obsolete folding, joined with a
  space), lines end in CRLF or a bare LF, and a head over ``MAX_HEAD`` bytes is refused;
* 1xx responses are skipped; 204 and 304 have no body; ``Transfer-Encoding: chunked``
  (the only transfer coding accepted, once) frames the body, else ``Content-Length``
  (digits, one value however often repeated), else the connection's end;
* a chunk is ``HEX{1,20} [";" ext] OWS CRLF data CRLF``; the last one's trailer lines
  are read and dropped;
* the connection is kept only after a complete response of HTTP/1.1 without
  ``Connection: close``, framed by its length or chunks, with nothing after it.

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
  ``ReadError``/``WriteError``, ``RemoteProtocolError``, and ``LocalProtocolError`` for a
  request header or target that could split the request.

A connection goes back to the pool only once its response was read to the end and may
be reused (above); a response closed early, a cancelled read or an error closes it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import select
import socket
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

import httpx

__all__ = ["MAX_HEAD", "DirectPool", "Response", "open_stream", "readable", "request_head"]

logger = logging.getLogger(__name__)

_READ = 64 * 1024
MAX_HEAD = 100 * 1024  # the largest response head (or chunk line, or trailer) read
_LENGTH_DIGITS = 20  # the most digits of a Content-Length

_TOKEN = rb"[-!#$%&'*+.^_`|~0-9a-zA-Z]+"
_VALUE = rb"(?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?"
_STATUS_LINE = re.compile(rb"HTTP/([0-9]\.[0-9]) ([0-9]{3})(?: ((?:[ \t]|[^\x00\s])*))?")
_HEADER_LINE = re.compile(rb"(" + _TOKEN + rb"):[ \t]*(" + _VALUE + rb")[ \t]*")
_HEADER_NAME = re.compile(_TOKEN)
_HEADER_VALUE = re.compile(_VALUE)
_TARGET = re.compile(rb"[\x21-\x7e]+")
_CHUNK_LINE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*\r\n", re.DOTALL)
_BLANK_LINE = re.compile(rb"\n\r?\n")
_FOLD = re.compile(rb"[ \t]+")
_DIGITS = re.compile(rb"[0-9]+")

Origin = tuple[bytes, bytes, int]
Addresses = Callable[[str, int], Sequence[object]]
Headers = list[tuple[bytes, bytes]]


async def open_stream(
    address: str, port: int, ssl_context: ssl.SSLContext | None, server_hostname: str | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """One TCP (and TLS) connection to ``address`` (an IP literal): every connection of
    the pool is opened here."""
    return await asyncio.open_connection(
        address, port, ssl=ssl_context, server_hostname=server_hostname, limit=_READ
    )


def unpinned(host: str, port: int | None) -> str:
    """Why a connection to ``host``:``port`` is refused: no checked address is pinned for
    it in this context (the direct pool, the httpcore pools and the fetcher's client)."""
    return (
        f"refused: no checked address for {host}:{port} "
        "(connections are made only through Fetcher.fetch)"
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


def request_head(headers: Iterable[tuple[bytes, bytes]]) -> bytes:
    """The header lines of a request (each ending in CRLF), checked: a name that is not
    a token or a value with a control character but tab raises ``LocalProtocolError``."""
    lines = []
    for name, value in headers:
        if not _HEADER_NAME.fullmatch(name):
            raise httpx.LocalProtocolError(f"illegal header name {name!r}")
        if not _HEADER_VALUE.fullmatch(value):
            raise httpx.LocalProtocolError(f"illegal value in header {name!r}")
        lines.append(b"%s: %s\r\n" % (name, value))
    return b"".join(lines)


@dataclass(slots=True)
class Response:
    """A response's status line, its header lines as received (name case kept) and its
    body: ``stream`` yields the body's bytes (after transfer decoding) as they arrive;
    ``aclose`` must be awaited once done with it (``release`` then hands the connection
    back, or closes it when the body was not read to its end)."""

    status: int
    reason: bytes
    http_version: bytes
    headers: Headers
    stream: AsyncGenerator[bytes, None]
    release: Callable[[], Awaitable[None]]

    async def aclose(self) -> None:
        try:
            await self.stream.aclose()
        finally:
            await self.release()


class _Head:
    """A response head, parsed: status line, headers, and how the body is framed
    (``length`` bytes, ``chunked``, or to the connection's end when both are unset)."""

    __slots__ = ("chunked", "headers", "keep_alive", "length", "reason", "status", "version")

    def __init__(self, lines: list[bytes]) -> None:
        if not lines:
            raise httpx.RemoteProtocolError("no response line received")
        match = _STATUS_LINE.fullmatch(lines[0])
        if match is None:
            raise httpx.RemoteProtocolError(f"illegal status line: {lines[0]!r}")
        version, status, reason = match.groups()
        self.version: bytes = version
        self.status = int(status)
        self.reason: bytes = reason or b""
        self.headers: Headers = []
        self.length: int | None = None
        self.chunked = False
        close = False
        for name, value in _header_fields(lines[1:]):
            lower = name.lower()
            if lower == b"content-length":
                value = _content_length(value, self.length)
                if self.length is not None:
                    continue  # the same length again: kept once, as h11 does
                self.length = int(value)
            elif lower == b"transfer-encoding":
                if self.chunked:
                    raise httpx.RemoteProtocolError("multiple Transfer-Encoding headers")
                value = value.lower()
                if value != b"chunked":
                    raise httpx.RemoteProtocolError("Only Transfer-Encoding: chunked is supported")
                self.chunked = True
            elif lower == b"connection":
                close = close or any(part.strip().lower() == b"close" for part in value.split(b","))
            self.headers.append((name, value))
        if self.status in (204, 304):  # never a body, whatever the headers say
            self.length, self.chunked = 0, False
        elif self.chunked:
            # Both framings: the chunks win, and the connection is not trusted again.
            close = close or self.length is not None
            self.length = None
        self.keep_alive = not close and version == b"1.1"


def _block_end(buffer: bytes) -> int:
    """Where the block of header lines at the buffer's start ends (after its blank line,
    which may be all of it); -1 while the blank line has not arrived."""
    if buffer[:1] == b"\n":
        return 1
    if buffer[:2] == b"\r\n":
        return 2
    match = _BLANK_LINE.search(buffer)
    return -1 if match is None else match.end()


def _header_fields(lines: list[bytes]) -> Iterable[tuple[bytes, bytes]]:
    """(name, value) of header lines, folded lines joined with a space."""
    if any(line[:1] in (b" ", b"\t") for line in lines):
        lines = _unfold(lines)
    for line in lines:
        match = _HEADER_LINE.fullmatch(line)
        if match is None:
            raise httpx.RemoteProtocolError(f"illegal header line: {line!r}")
        yield match.group(1), match.group(2)


def _unfold(lines: list[bytes]) -> list[bytes]:
    unfolded: list[bytes] = []
    for line in lines:
        fold = _FOLD.match(line)
        if fold is None:
            unfolded.append(line)
        elif not unfolded:
            raise httpx.RemoteProtocolError("continuation line at start of headers")
        else:
            unfolded[-1] += b" " + line[fold.end() :]
    return unfolded


def _content_length(value: bytes, seen: int | None) -> bytes:
    lengths = {length.strip() for length in value.split(b",")}
    if len(lengths) != 1:
        raise httpx.RemoteProtocolError("conflicting Content-Length headers")
    length = lengths.pop()
    if not _DIGITS.fullmatch(length) or len(length) > _LENGTH_DIGITS:
        raise httpx.RemoteProtocolError("bad Content-Length")
    if seen is not None and int(length) != seen:
        raise httpx.RemoteProtocolError("conflicting Content-Length headers")
    return length


class _Connection:
    __slots__ = ("buffer", "idle_since", "origin", "reader", "reusable", "socket", "writer")

    def __init__(
        self, origin: Origin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.socket: socket.socket | None = writer.get_extra_info("socket")
        self.buffer = b""  # bytes received and not yet parsed
        self.reusable = False  # set when a response ended cleanly and may be followed
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

    async def fill(self) -> bool:
        """Read more into the buffer; False at the connection's end."""
        try:
            data = await self.reader.read(_READ)
        except OSError as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
        if not data:
            return False
        self.buffer += data
        return True

    async def head(self) -> _Head:
        """The next final response head (1xx responses skipped)."""
        while True:
            lines = await self._block("response head")
            if lines is None:
                raise httpx.RemoteProtocolError(
                    "server disconnected in the response head"
                    if self.buffer
                    else "server disconnected without sending a response"
                )
            head = _Head(lines)
            if head.status == 101:
                raise httpx.RemoteProtocolError("server switched protocols unasked (101)")
            if head.status >= 200:
                return head

    async def _block(self, what: str) -> list[bytes] | None:
        """The lines of the block of header lines at the buffer's start (without their
        ends or the blank line), taken from the buffer; None when the connection ended
        first. ``what`` names the block when it is over ``MAX_HEAD`` bytes."""
        while (end := _block_end(self.buffer)) < 0:
            if len(self.buffer) > MAX_HEAD:
                raise httpx.RemoteProtocolError(f"{what} over {MAX_HEAD} bytes")
            if not await self.fill():
                return None
        block, self.buffer = self.buffer[:end], self.buffer[end:]
        return [line.removesuffix(b"\r") for line in block.split(b"\n")[:-2]]

    async def body(self, head: _Head) -> AsyncGenerator[bytes, None]:
        """The body's bytes as they arrive; ``reusable`` is set at a clean end."""
        if head.chunked:
            async for data in self._chunked():
                yield data
        elif head.length is not None:
            async for data in self._sized(head.length):
                yield data
        else:
            while True:
                if self.buffer:
                    data, self.buffer = self.buffer, b""
                    yield data
                if not await self.fill():
                    return  # framed by the connection's end: never reused
        self.reusable = head.keep_alive and not self.buffer

    async def _sized(self, length: int, chunk: bool = False) -> AsyncIterator[bytes]:
        remaining = length
        while remaining:
            if not self.buffer and not await self.fill():
                if chunk:
                    raise _incomplete_chunks()
                raise httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body "
                    f"(received {length - remaining} bytes, expected {length})"
                )
            if len(self.buffer) <= remaining:
                data, self.buffer = self.buffer, b""
            else:
                data, self.buffer = self.buffer[:remaining], self.buffer[remaining:]
            remaining -= len(data)
            yield data

    async def _chunked(self) -> AsyncIterator[bytes]:
        while True:
            line = await self._line()
            match = _CHUNK_LINE.fullmatch(line)
            if match is None:
                raise httpx.RemoteProtocolError(f"illegal chunk header: {line!r}")
            size = int(match.group(1), 16)
            if size == 0:
                await self._trailer()
                return
            async for data in self._sized(size, chunk=True):
                yield data
            while len(self.buffer) < 2:
                if not await self.fill():
                    raise _incomplete_chunks()
            if self.buffer[:2] != b"\r\n":
                raise httpx.RemoteProtocolError(
                    f"malformed chunk footer: {self.buffer[:2]!r} (expected b'\\r\\n')"
                )
            self.buffer = self.buffer[2:]

    async def _line(self) -> bytes:
        """The next CRLF-ended line of a chunked body, its CRLF included."""
        while True:
            end = self.buffer.find(b"\r\n")
            if end >= 0:
                line, self.buffer = self.buffer[: end + 2], self.buffer[end + 2 :]
                return line
            if len(self.buffer) > MAX_HEAD:
                raise httpx.RemoteProtocolError(f"chunk header over {MAX_HEAD} bytes")
            if not await self.fill():
                raise _incomplete_chunks()

    async def _trailer(self) -> None:
        """Read (and check, then drop) the trailer lines after the last chunk."""
        lines = await self._block("chunked trailer")
        if lines is None:
            raise _incomplete_chunks()
        for _ in _header_fields(lines):
            pass


def _incomplete_chunks() -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError(
        "peer closed connection without sending complete message body (incomplete chunked read)"
    )


class DirectPool:
    """HTTP/1.1 keep-alive connections to checked addresses (see the module docstring)."""

    def __init__(
        self,
        *,
        addresses: Addresses,
        ssl_context: Callable[[], ssl.SSLContext],
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

    async def get(
        self, scheme: bytes, host: bytes, port: int | None, target: bytes, head: bytes
    ) -> Response:
        """Send a GET of ``target`` (a path and query) with the header lines ``head``
        (``request_head``'s, Host included) and read the response head."""
        if not _TARGET.fullmatch(target):
            raise httpx.LocalProtocolError(f"illegal request target {target!r}")
        origin: Origin = (scheme, host, port or (443 if scheme == b"https" else 80))
        await self._slots.acquire()
        self._busy += 1
        connection: _Connection | None = None
        try:
            connection = self._idle_connection(origin)
            if connection is None:
                self._make_room()
                connection = await self._connect(origin)
            try:
                connection.writer.write(b"GET %s HTTP/1.1\r\n%s\r\n" % (target, head))
                await connection.writer.drain()
            except OSError as exc:
                raise httpx.WriteError(str(exc) or type(exc).__name__) from exc
            response = await connection.head()
        except BaseException:
            if connection is not None:
                connection.close()
            self._done()
            raise
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "GET %s://%s:%d%s: HTTP/%s %d", *(
                    part.decode("ascii", "replace") for part in origin[:2]
                ), origin[2], target.decode("ascii", "replace"),
                response.version.decode(), response.status,
            )  # fmt: skip
        used = connection

        async def release() -> None:
            self.release(used)

        return Response(
            response.status,
            response.reason,
            b"HTTP/" + response.version,
            response.headers,
            connection.body(response),
            release,
        )

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
            raise httpx.ConnectError(unpinned(host, port))
        tls = self._ssl() if scheme == b"https" else None
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
        if self._closed or not connection.reusable or self._max_keepalive == 0:
            connection.close()
            return
        connection.reusable = False
        while self._idle_count >= self._max_keepalive:
            self._drop_oldest()
        connection.idle_since = time.monotonic()
        self._idle.setdefault(connection.origin, []).append(connection)
        self._idle_count += 1

    async def aclose(self) -> None:
        """Close the kept connections; a response read later closes its own."""
        self._closed = True
        idle, self._idle, self._idle_count = self._idle, {}, 0
        for connection in idle.values():
            for kept in connection:
                kept.close()
