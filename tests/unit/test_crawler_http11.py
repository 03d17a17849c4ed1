"""The fetcher's direct HTTP/1.1 pool (crawler.http11): keep-alive reuse, idle
connections the server closed, the connection caps, framings and malformed responses,
against a small asyncio server in the test's own event loop that counts connections; and
its response parser against h11's on generated responses (a differential test)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import h11
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawlq.crawler import http11
from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.fetch import Fetcher, FetchResult, FetchSettings
from crawlq.crawler.http11 import MAX_HEAD

OPEN = AddressPolicy(allow_private=True)
BODY = b"<html><title>t</title></html>"


@dataclass
class Site:
    """Answers every GET with BODY; ``close_after`` closes each connection once it
    answered (without saying so); ``delay`` waits before each answer."""

    close_after: bool = False
    delay: float = 0.0
    raw: dict[bytes, bytes] = field(default_factory=dict)  # path: the whole response
    connections: int = 0
    open_now: int = 0
    most_open: int = 0
    requests: int = 0
    port: int = 0
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open_now += 1
        self.most_open = max(self.most_open, self.open_now)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self.requests += 1
                if self.delay:
                    await asyncio.sleep(self.delay)
                path = head.split(b" ", 2)[1]
                if path in self.raw:
                    writer.write(self.raw[path])
                    await writer.drain()
                    if self.close_after:
                        return
                    continue
                status = b"302 Found" if head.startswith(b"GET /redirect") else b"200 OK"
                location = b"Location: /page\r\n" if status.startswith(b"302") else b""
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\n" + location
                    + b"Content-Type: text/html\r\nContent-Length: "
                    + str(len(BODY)).encode() + b"\r\n\r\n" + BODY
                )  # fmt: skip
                await writer.drain()
                if self.close_after:
                    return
        finally:
            self.open_now -= 1
            writer.close()


async def serving(site: Site, work: Callable[[str], Awaitable[Any]]) -> Any:
    server = await asyncio.start_server(site.handle, "127.0.0.1", 0)
    site.port = server.sockets[0].getsockname()[1]
    async with server:
        return await work(f"http://127.0.0.1:{site.port}")


def fetch_all(
    site: Site, paths: list[str], settings: FetchSettings, *, together: bool
) -> list[FetchResult]:
    async def work(base: str) -> list[FetchResult]:
        async with Fetcher(settings) as fetcher:
            if together:
                return list(await asyncio.gather(*(fetcher.fetch(base + p) for p in paths)))
            results = []
            for path in paths:
                results.append(await fetcher.fetch(base + path))
                await asyncio.sleep(0.02)  # the server's close, if any, reaches the client
            return results

    result: list[FetchResult] = asyncio.run(serving(site, work))
    return result


def test_keep_alive_reuses_one_connection() -> None:
    site = Site()
    results = fetch_all(site, ["/a", "/b", "/c"], FetchSettings(policy=OPEN), together=False)
    assert [r.body for r in results] == [BODY] * 3
    assert site.connections == 1


def test_no_keep_alive_room_opens_a_connection_per_request() -> None:
    site = Site()
    settings = FetchSettings(policy=OPEN, max_keepalive_connections=0)
    results = fetch_all(site, ["/a", "/b", "/c"], settings, together=False)
    assert all(r.error is None for r in results)
    assert site.connections == 3


def test_idle_connection_closed_by_the_server_is_not_reused() -> None:
    site = Site(close_after=True)
    results = fetch_all(site, ["/a", "/b", "/c"], FetchSettings(policy=OPEN), together=False)
    assert [r.error for r in results] == [None] * 3
    assert [r.body for r in results] == [BODY] * 3
    assert site.connections == 3


def test_redirect_body_left_unread_closes_its_connection() -> None:
    site = Site()
    results = fetch_all(site, ["/redirect", "/a"], FetchSettings(policy=OPEN), together=False)
    assert [r.final_url.rsplit("/", 1)[1] for r in results] == ["page", "a"]
    assert [r.body for r in results] == [BODY, BODY]
    # the redirect's connection is closed (its body unread); /page's is reused by /a
    assert site.connections == 2


def test_max_connections_caps_the_connections_open_at_once() -> None:
    site = Site(delay=0.05)
    settings = FetchSettings(policy=OPEN, max_connections=2)
    results = fetch_all(site, [f"/{i}" for i in range(8)], settings, together=True)
    assert all(r.error is None and r.body == BODY for r in results)
    assert site.requests == 8
    assert site.most_open == 2


def test_a_full_keep_alive_pool_drops_its_oldest_connection() -> None:
    """With room for one kept connection, the host fetched last keeps its connection:
    the other host's, idle longer, is closed for it."""
    first, second = Site(), Site()

    async def work() -> list[FetchResult]:
        servers = [await asyncio.start_server(s.handle, "127.0.0.1", 0) for s in (first, second)]
        a, b = (f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers)
        settings = FetchSettings(policy=OPEN, max_keepalive_connections=1)
        try:
            async with Fetcher(settings) as fetcher:
                return [await fetcher.fetch(url) for url in (a + "/1", b + "/1", b + "/2")]
        finally:
            for server in servers:
                server.close()

    results = asyncio.run(work())
    assert [r.error for r in results] == [None] * 3
    assert (first.connections, second.connections) == (1, 1)


# --- framings and malformed responses, through the fetcher -------------------------------

CHUNKED = (
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/html\r\n\r\n"
    b"5;name=value\r\n<html\r\n1b \r\n><title>t</title></html>xyz\r\n0\r\nX-Trailer: 1\r\n\r\n"
)
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def raw_site(**raw: bytes) -> Site:
    return Site(raw={b"/" + name.encode(): response for name, response in raw.items()})


def test_chunked_body_with_extension_and_trailer_keeps_the_connection() -> None:
    site = raw_site(chunked=CHUNKED)
    results = fetch_all(site, ["/chunked", "/a"], FetchSettings(policy=OPEN), together=False)
    assert [r.error for r in results] == [None, None]
    assert results[0].body == b"<html><title>t</title></html>xyz"
    assert results[0].headers["transfer-encoding"] == "chunked"
    assert site.connections == 1


def test_bare_line_feeds_folded_and_repeated_headers() -> None:
    response = (
        b"HTTP/1.1 404 Not Found\nContent-Length: 2\nX-Long: one\n  two\n"
        b"Set-Cookie: a=1\nSet-Cookie: b=2\nContent-Length: 2\n\nok"
    )
    site = raw_site(lf=response)
    result = fetch_all(site, ["/lf", "/a"], FetchSettings(policy=OPEN), together=False)[0]
    assert (result.error, result.status, result.reason) == (None, 404, "Not Found")
    assert result.body == b"ok"
    assert result.headers["x-long"] == "one two"
    assert result.headers["set-cookie"] == "a=1, b=2"
    assert site.connections == 1


@pytest.mark.parametrize(
    "response",
    [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nok\r\n0\r\n\r\n",
    ],
    ids=["connection-close", "http-1.0", "length-and-chunks"],
)
def test_a_connection_not_to_be_kept_is_not_reused(response: bytes) -> None:
    site = raw_site(once=response)
    results = fetch_all(site, ["/once", "/a"], FetchSettings(policy=OPEN), together=False)
    assert [(r.error, r.body) for r in results] == [(None, b"ok"), (None, BODY)]
    assert site.connections == 2


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "received 5 bytes, expected 10"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\nx", "conflicting Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "Only Transfer-Encoding: chunked"),
        (CHUNKED_HEAD + b"zz\r\n", "illegal chunk header"),
        (CHUNKED_HEAD + b"2\r\nokXX", "malformed chunk footer"),
        (CHUNKED_HEAD + b"5\r\nok", "incomplete chunked read"),
        (b"HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n", "illegal header line"),
        (b"HTTP/1.1 200 OK\r\n continued\r\n\r\n", "continuation line at start"),
        (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\n\r\n", "illegal header line"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", "illegal status line"),
        (b"\r\nHTTP/1.1 200 OK\r\n\r\n", "no response line received"),
        (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "switched protocols unasked"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * (MAX_HEAD + 10), f"head over {MAX_HEAD} bytes"),
        (b"HTTP/1.1 200 OK\r\nX: y", "disconnected in the response head"),
        (b"", "server disconnected without sending a response"),
    ],
)
def test_malformed_responses_are_errors_that_name_the_fault(response: bytes, error: str) -> None:
    site = Site(raw={b"/bad": response}, close_after=True)
    result = fetch_all(site, ["/bad"], FetchSettings(policy=OPEN), together=False)[0]
    assert result.error is not None and result.error.startswith("RemoteProtocolError: ")
    assert error in result.error


def test_1xx_responses_are_skipped_and_204_has_no_body() -> None:
    site = raw_site(
        early=b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\n"
        b"Content-Length: 2\r\n\r\nok",
        empty=b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
    )
    paths = ["/early", "/empty", "/a"]
    results = fetch_all(site, paths, FetchSettings(policy=OPEN), together=False)
    assert [(r.error, r.status, r.body) for r in results] == [
        (None, 200, b"ok"), (None, 204, b""), (None, 200, BODY)
    ]  # fmt: skip
    assert site.connections == 1


@pytest.mark.parametrize(
    "headers",
    [[(b"X-A", b"one\r\nInjected: yes")], [(b"Bad Name", b"x")], [(b"X", b"a\x00")]],
)
def test_request_headers_that_could_split_a_request_are_refused(
    headers: list[tuple[bytes, bytes]],
) -> None:
    with pytest.raises(httpx.LocalProtocolError):
        http11.request_head(headers)
    assert http11.request_head([(b"Host", b"a"), (b"X", b"b\tc")]) == b"Host: a\r\nX: b\tc\r\n"


# --- the parser against h11's --------------------------------------------------------------


def h11_reading(data: bytes) -> tuple[Any, ...]:
    """What h11 reads from ``data`` (then the connection's end) as the answer to a GET:
    (status, reason, version, headers, body), or ("error",)."""
    connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=http11.MAX_HEAD)
    connection.send(h11.Request(method="GET", target="/", headers=[("Host", "a")]))
    connection.send(h11.EndOfMessage())
    connection.receive_data(data)
    connection.receive_data(b"")
    head: h11.Response | None = None
    body = b""
    try:
        while True:
            event = connection.next_event()
            if isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return (
                    head.status_code, head.reason, head.http_version,
                    list(head.headers.raw_items()), body,
                )  # fmt: skip
            elif not isinstance(event, h11.InformationalResponse):
                return ("error",)
    except h11.RemoteProtocolError:
        return ("error",)


def our_reading(pieces: list[bytes]) -> tuple[Any, ...]:
    """What this module reads from ``pieces``, fed one per turn of the event loop."""

    async def read() -> tuple[Any, ...]:
        reader = asyncio.StreamReader()

        async def feed() -> None:
            for piece in pieces:
                reader.feed_data(piece)
                await asyncio.sleep(0)
            reader.feed_eof()

        feeding = asyncio.create_task(feed())
        connection = http11._Connection((b"http", b"a", 80), reader, _NoWriter())  # type: ignore[arg-type]
        try:
            head = await connection.head()
            body = b"".join([data async for data in connection.body(head)])
        except httpx.RemoteProtocolError:
            return ("error",)
        finally:
            await feeding
        version = head.version
        return (head.status, head.reason, version, head.headers, body)

    return asyncio.run(read())


class _NoWriter:
    def get_extra_info(self, name: str) -> None:
        return None


_NAMES = st.sampled_from(
    [b"Content-Length", b"content-length", b"Transfer-Encoding", b"Connection", b"X-A",
     b"Set-Cookie", b"Bad Name", b"", b"X\x00"]
)  # fmt: skip
_VALUES = st.one_of(
    st.sampled_from([b"chunked", b"Chunked", b"gzip", b"close", b"5", b" 5 ", b"5, 5",
                     b"5,6", b"x", b"", b"a\tb", b"01"]),
    st.binary(max_size=8),
)  # fmt: skip


@st.composite
def responses(draw: st.DrawFn) -> bytes:
    """Responses near the grammar's edges: sometimes valid, often not."""
    newline = draw(st.sampled_from([b"\r\n", b"\n"]))
    status = draw(st.sampled_from([b"200", b"204", b"304", b"404", b"100", b"2xx", b"99"]))
    reason = draw(st.sampled_from([b" OK", b"", b" ", b" Not\tFound", b" \xff", b" a\x00"]))
    version = draw(st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.x", b"HTTP/11"]))
    lines = [version + b" " + status + reason]
    for name, value in draw(st.lists(st.tuples(_NAMES, _VALUES), max_size=4)):
        lines.append(name + b":" + draw(st.sampled_from([b" ", b"", b"\t"])) + value)
        if draw(st.integers(0, 9)) == 0:
            lines.append(b" folded")
    head = newline.join(lines) + newline + newline
    body = draw(st.binary(max_size=12))
    if draw(st.booleans()):  # a chunked body
        sizes = draw(st.lists(st.integers(1, 6), max_size=3))
        parts = []
        for size in sizes:
            ext = draw(st.sampled_from([b"", b";x=1", b" ", b"g"]))
            parts.append(b"%x" % size + ext + b"\r\n" + body[:size].ljust(size, b"z") + b"\r\n")
        parts.append(b"0\r\n" + draw(st.sampled_from([b"", b"T: 1\r\n", b"bad\r\n"])) + b"\r\n")
        body = b"".join(parts)
    return head + body + draw(st.sampled_from([b"", b"HTTP/1.1 200 OK\r\n\r\n"]))


@settings(max_examples=400, deadline=None)
@given(responses(), st.lists(st.integers(1, 40), max_size=6))
def test_the_parser_reads_what_h11_reads(data: bytes, cuts: list[int]) -> None:
    pieces, rest = [], data
    for cut in cuts:
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    assert our_reading([piece for piece in pieces if piece]) == h11_reading(data)
