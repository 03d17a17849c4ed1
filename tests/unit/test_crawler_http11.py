"""The fetcher's direct HTTP/1.1 pool (crawler.http11): keep-alive reuse, idle
connections the server closed, the connection caps; against a small asyncio server in
the test's own event loop that counts connections."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.fetch import Fetcher, FetchResult, FetchSettings

OPEN = AddressPolicy(allow_private=True)
BODY = b"<html><title>t</title></html>"


@dataclass
class Site:
    """Answers every GET with BODY; ``close_after`` closes each connection once it
    answered (without saying so); ``delay`` waits before each answer."""

    close_after: bool = False
    delay: float = 0.0
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
