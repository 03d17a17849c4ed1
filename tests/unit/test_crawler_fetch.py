"""The fetcher against web servers started here on 127.0.0.1 (random free ports).

Servers on loopback are forbidden by the default policy, so tests that expect a page use
``AddressPolicy(allow_private=True)`` (or an allow-list); the refusal tests use the
default policy and a sentinel server that counts the connections it accepts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import http.server
import importlib.util
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
import tracemalloc
import urllib.parse
import zlib
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import brotli  # type: ignore[import-untyped]
import httpcore
import httpx
import pytest

import crawlq
from crawlq.crawler import http11
from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.fetch import DEFAULT_USER_AGENT, Fetcher, FetchResult, FetchSettings
from crawlq.exceptions import ConfigurationError
from tests.crawlsite import gzip_bomb
from tests.servers import unavailable

T = TypeVar("T")
OPEN = AddressPolicy(allow_private=True)
MIB = 1024 * 1024
PAGE = b"<html><head><title>hello</title></head><body>hello</body></html>"


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def fetch(url: str, settings: FetchSettings | None = None) -> FetchResult:
    async with Fetcher(settings or FetchSettings(policy=OPEN)) as fetcher:
        return await fetcher.fetch(url)


@functools.cache
def brotli_bomb() -> bytes:
    """256 MiB of zeros, brotli-compressed to a few hundred bytes."""
    return bytes(brotli.compress(bytes(256 * MIB), quality=5))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def send(self, status: int, body: bytes, ctype: str = "text/html", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def redirect(self, location: str, status: int = 302) -> None:
        self.send(status, b"", Location=location)

    def do_GET(self) -> None:
        self.server.requests.append((self.path, dict(self.headers.items())))
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        query = dict(urllib.parse.parse_qsl(url.query))
        if url.path == "/page":
            self.send(200, PAGE, "text/html; charset=utf-8", X_Twice="a")
        elif url.path == "/echo":
            self.send(200, json.dumps(dict(self.headers.items())).encode(), "application/json")
        elif parts[0] == "status":
            self.send(int(parts[1]), f"status {parts[1]}".encode(), "text/plain", Retry_After="7")
        elif parts[0] == "type":
            self.send(200, b"x", urllib.parse.unquote(parts[1]))
        elif parts[0] == "chain":
            left = int(parts[1])
            if left == 0:
                self.send(200, PAGE)
            elif left % 2:  # relative reference, resolved against /chain/N
                self.redirect(f"{left - 1}?from={left}#frag", 301 if left == 1 else 307)
            else:
                self.redirect(f"http://127.0.0.1:{self.server.port}/chain/{left - 1}")
        elif parts[0] == "loop":
            self.redirect("/loop/b" if parts[1] == "a" else "/loop/a")
        elif url.path == "/redirect":
            self.redirect(query["to"])
        elif url.path == "/slow":
            time.sleep(2)
            self.send(200, b"late")
        elif url.path == "/huge":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(64 * MIB))
            self.end_headers()
            chunk = b"x" * 65536
            with contextlib.suppress(OSError):
                for _ in range(64 * MIB // len(chunk)):
                    self.wfile.write(chunk)
        elif url.path == "/gzip-bomb":
            self.send(200, gzip_bomb(), "text/html", Content_Encoding="gzip")
        elif url.path == "/brotli-bomb":
            self.send(200, brotli_bomb(), "text/html", Content_Encoding="br")
        elif url.path == "/gzip":
            self.send(200, gzip.compress(PAGE * 100), Content_Encoding="gzip")
        elif url.path == "/deflate":
            self.send(200, zlib.compress(PAGE * 100), Content_Encoding="deflate")
        elif url.path == "/br":
            self.send(200, brotli.compress(PAGE * 100), Content_Encoding="br")
        else:
            self.send(404, b"not found")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.port = int(self.server_address[1])
        self.requests: list[tuple[str, dict[str, str]]] = []

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the fetcher hangs up on purpose (caps, deadlines): no tracebacks

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


class Sentinel:
    """Listens on 127.0.0.1 (and ::1 when it can) on one port; counts accepted sockets."""

    def __init__(self) -> None:
        self.count = 0
        self.sockets = [socket.create_server(("127.0.0.1", 0))]
        self.port = int(self.sockets[0].getsockname()[1])
        with contextlib.suppress(OSError):
            self.sockets.append(socket.create_server(("::1", self.port), family=socket.AF_INET6))
        self.threads = [threading.Thread(target=self._accept, args=(s,)) for s in self.sockets]
        for thread in self.threads:
            thread.daemon = True
            thread.start()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            self.count += 1
            conn.close()

    def connections(self) -> int:
        time.sleep(0.02)  # let an accepted connection be counted
        return self.count

    def close(self) -> None:
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self.threads:
            thread.join(1)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    httpd = Server()
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


@pytest.fixture
def sentinel() -> Iterator[Sentinel]:
    guard = Sentinel()
    yield guard
    guard.close()


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every TCP connect the fetcher makes, as (address, port): its direct HTTP/1.1
    connections (``http11.open_stream``) and its httpcore pools' (proxies, HTTP/2)."""
    seen: list[tuple[str, int]] = []
    original = httpcore.AnyIOBackend.connect_tcp
    direct = http11.open_stream

    async def spy(self: httpcore.AnyIOBackend, host: str, port: int, **kw: Any) -> Any:
        seen.append((host, port))
        return await original(self, host, port, **kw)

    async def direct_spy(address: str, port: int, *args: Any) -> Any:
        seen.append((address, port))
        return await direct(address, port, *args)

    monkeypatch.setattr(httpcore.AnyIOBackend, "connect_tcp", spy)
    monkeypatch.setattr(http11, "open_stream", direct_spy)
    return seen


def fake_dns(
    monkeypatch: pytest.MonkeyPatch, answers: Callable[[int], str], name: str = "site.test"
) -> list[str]:
    """Resolve ``name`` to ``answers(n)`` on its n-th look-up; other names as usual."""
    calls: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.rstrip(".") == name:
            calls.append(host)
            address = answers(len(calls))
            return real(address, port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return calls


# --- settings ----------------------------------------------------------------------------


def test_settings_defaults() -> None:
    settings = FetchSettings()
    assert settings.user_agent == DEFAULT_USER_AGENT
    assert DEFAULT_USER_AGENT == f"crawlq/{crawlq.__version__}"  # no invented project URL
    assert settings.deadline == 30
    assert settings.max_body_bytes == 10 * MIB
    assert settings.max_decoded_bytes == 50 * MIB
    assert settings.max_redirects == 10
    assert settings.http2 is False
    assert settings.policy == AddressPolicy()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"deadline": 0},
        {"deadline": -1},
        {"deadline": float("inf")},
        {"deadline": "30"},
        {"connect_timeout": 0},
        {"max_body_bytes": 0},
        {"max_decoded_bytes": 1.5},
        {"max_redirects": -1},
        {"max_redirects": True},
        {"max_connections": 0},
        {"user_agent": ""},
        {"user_agent": "crawlq\r\nX-Evil: 1"},
        {"extra_headers": (("X-Test", "a\r\nX-Evil: 1"),)},
        {"extra_headers": (("X-Test", "a\nb"),)},
        {"extra_headers": (("X-Test", "a\x00b"),)},
        {"extra_headers": (("X Test", "a"),)},
        {"extra_headers": (("X-Test:", "a"),)},
        {"extra_headers": (("Host", "example.com"),)},
        {"extra_headers": (("user-agent", "other"),)},
        {"extra_headers": "X-Test: a"},
        {"extra_headers": (("X-Test",),)},
        {"http2": "yes"},
        {"policy": "open"},
    ],
)
def test_settings_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        FetchSettings(**kwargs)


def test_settings_accepts_header_mapping() -> None:
    settings = FetchSettings(extra_headers={"Accept-Language": "en"})  # type: ignore[arg-type]
    assert settings.extra_headers == (("Accept-Language", "en"),)


@pytest.mark.skipif(importlib.util.find_spec("h2") is not None, reason="h2 is installed")
def test_http2_without_h2_names_the_extra() -> None:
    with pytest.raises(ConfigurationError, match=r"crawlq\[http2\]"):
        FetchSettings(http2=True)


# --- pages ------------------------------------------------------------------------------


def test_page(server: Server) -> None:
    result = run(fetch(server.url("/page")))
    assert result.error is None, result.error
    assert result.status == 200
    assert result.url == result.final_url == server.url("/page")
    assert result.body == PAGE
    assert result.bytes == len(PAGE)
    assert result.content_type == "text/html"
    assert result.headers["content-type"] == "text/html; charset=utf-8"
    assert result.headers["x-twice"] == "a"
    assert all(name == name.lower() for name in result.headers)
    assert result.redirects == []
    assert result.truncated is False
    assert 0 <= result.elapsed_ms < 5000


def test_user_agent_and_extra_headers_sent(server: Server) -> None:
    settings = FetchSettings(policy=OPEN, extra_headers=(("Accept-Language", "fr"),))
    result = run(fetch(server.url("/echo"), settings))
    sent = {k.lower(): v for k, v in json.loads(result.body).items()}
    assert sent["user-agent"] == DEFAULT_USER_AGENT
    assert sent["accept-language"] == "fr"
    assert "gzip" in sent["accept-encoding"] and "br" in sent["accept-encoding"]
    custom = FetchSettings(policy=OPEN, user_agent="mybot/2 (+https://example.org)")
    result = run(fetch(server.url("/echo"), custom))
    assert json.loads(result.body)["User-Agent"] == "mybot/2 (+https://example.org)"


@pytest.mark.parametrize("status", [404, 500, 429, 503, 410])
def test_error_statuses_are_results(server: Server, status: int) -> None:
    result = run(fetch(server.url(f"/status/{status}")))
    assert result.error is None
    assert result.status == status
    assert result.body == f"status {status}".encode()
    assert result.headers["retry-after"] == "7"


@pytest.mark.parametrize(
    ("header", "media"),
    [
        ("text/html; charset=ISO-8859-1", "text/html"),
        ("application/json", "application/json"),
        ("Image/PNG", "image/png"),
        ("application/pdf; name=x", "application/pdf"),
        ("text/plain;charset=utf-8", "text/plain"),
    ],
)
def test_content_type_recorded(server: Server, header: str, media: str) -> None:
    result = run(fetch(server.url("/type/" + urllib.parse.quote(header, safe=""))))
    assert result.content_type == media
    assert result.headers["content-type"] == header


@pytest.mark.parametrize("path", ["/gzip", "/deflate", "/br"])
def test_compressed_bodies_decoded(server: Server, path: str) -> None:
    result = run(fetch(server.url(path)))
    assert result.error is None
    assert result.body == PAGE * 100
    assert result.bytes < len(PAGE) * 10


def test_concurrent_fetches_share_one_client(server: Server) -> None:
    async def many() -> list[FetchResult]:
        async with Fetcher(FetchSettings(policy=OPEN, max_connections=4)) as fetcher:
            return await asyncio.gather(*(fetcher.fetch(server.url("/page")) for _ in range(30)))

    results = run(many())
    assert all(r.error is None and r.body == PAGE for r in results)


def test_network_errors_are_results() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connection refused
        result = run(fetch(f"http://127.0.0.1:{port}/"))
    assert result.status is None
    assert result.error == (
        "ConnectError: connection refused: nothing accepts connections on that host and port"
    )


@pytest.mark.parametrize("url", ["http://", "not a url", "http://exa mple.com/", "http:///x"])
def test_invalid_urls_are_results(url: str) -> None:
    result = run(fetch(url))
    assert result.error is not None
    assert result.status is None


def test_unknown_name_is_a_dns_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    result = run(fetch("http://no-such-host.test/"))
    assert result.error is not None and result.error.startswith("dns:")


# --- the address guard ------------------------------------------------------------------


def test_default_policy_refuses_loopback(sentinel: Sentinel, connects: list[Any]) -> None:
    result = run(fetch(f"http://127.0.0.1:{sentinel.port}/", FetchSettings()))
    assert result.error is not None and result.error.startswith("refused:")
    assert "loopback" in result.error
    assert result.status is None
    assert connects == []
    assert sentinel.connections() == 0


LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "127.1",
    "127.0.1",
    "127.255.255.254",
    "0x7f.1",
    "0x7f.0.0.1",
    "0X7F.0X0.0X0.0X1",
    "017700000001",
    "0177.0.0.01",
    "0177.1",
    "127.000.000.001",
    "00000000000000000177.0.0.1",
    "0x00000000007f.0.0.1",
    "2130706433",
    "0x7F000001",
    "127.0.0.1.",
    "2130706433.",
    "127\u30020\u30020\u30021",
    "\uff11\uff12\uff17.\uff10.\uff10.\uff11",
    "%31%32%37.0.0.1",
    "127.0.0.%31",
    "[::1]",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]",
    "[::FFFF:7F00:1]",
    "[0:0:0:0:0:ffff:127.0.0.1]",
    "[::127.0.0.1]",
    "[::ffff:0:127.0.0.1]",
    "[64:ff9b::127.0.0.1]",
    "[2002:7f00:1::]",
    "localhost",
    "LOCALHOST.",
    "0.0.0.0",
    "0",
]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS)
def test_loopback_spellings_refused(
    host: str, sentinel: Sentinel, connects: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dns(monkeypatch, lambda n: "127.0.0.1", name="localhost")
    result = run(fetch(f"http://{host}:{sentinel.port}/", FetchSettings()))
    assert result.error is not None
    assert result.error.startswith("refused:"), result.error
    assert result.status is None
    assert connects == []
    assert sentinel.connections() == 0


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "gopher://x/", "data:text/plain,hi"]
)
def test_other_schemes_refused(url: str, connects: list[Any]) -> None:
    result = run(fetch(url))
    assert result.error is not None and result.error.startswith("refused: scheme")
    assert connects == []


def test_connection_goes_to_the_checked_address(
    server: Server, monkeypatch: pytest.MonkeyPatch, connects: list[tuple[str, int]]
) -> None:
    calls = fake_dns(monkeypatch, lambda n: "127.0.0.1" if n == 1 else "10.9.9.9")
    settings = FetchSettings(policy=AddressPolicy(allow=("site.test",)))
    result = run(fetch(server.url("/echo", host="site.test"), settings))
    assert result.error is None, result.error
    assert calls == ["site.test"]  # looked up once, by the guard; never by the connector
    assert connects == [("127.0.0.1", server.port)]
    assert json.loads(result.body)["Host"] == f"site.test:{server.port}"


def test_every_fetch_checks_again(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, lambda n: "127.0.0.1" if n == 1 else "10.9.9.9")
    settings = FetchSettings(policy=AddressPolicy(allow=("127.0.0.1",)))

    async def twice() -> tuple[FetchResult, FetchResult]:
        async with Fetcher(settings) as fetcher:
            url = server.url("/page", host="site.test")
            return await fetcher.fetch(url), await fetcher.fetch(url)

    first, second = run(twice())
    assert first.error is None
    assert second.error is not None and "10.9.9.9" in second.error  # DNS rebinding refused


def test_client_cannot_connect_outside_fetch(server: Server) -> None:
    async def direct() -> None:
        async with Fetcher(FetchSettings(policy=OPEN)) as fetcher:
            await fetcher._client.get(server.url("/page"))

    with pytest.raises(httpx.ConnectError, match="no checked address"):
        run(direct())


@pytest.fixture
def tls_server(tmp_path: Any) -> Iterator[int]:
    """A TLS server on 127.0.0.1 with a self-signed certificate (``openssl``), which
    answers every request with ``PAGE``: its port."""
    if shutil.which("openssl") is None:  # it makes the test's self-signed certificate
        unavailable("openssl", "apt-get install openssl")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_https_verifies_certificates_with_a_context_made_on_first_use(
    server: Server, tls_server: int
) -> None:
    """A fetcher loads the CA certificates at its first https connection, not before
    (a crawl of http:// pages never pays for them), and checks the server's
    certificate with them: a self-signed one is refused."""

    async def both() -> tuple[FetchResult, bool, FetchResult, bool]:
        async with Fetcher(FetchSettings(policy=OPEN)) as fetcher:
            plain = await fetcher.fetch(server.url("/page"))
            before = fetcher._tls is not None
            secure = await fetcher.fetch(f"https://127.0.0.1:{tls_server}/page")
            return plain, before, secure, fetcher._tls is not None

    plain, made_before, secure, made_after = run(both())
    assert plain.status == 200 and not made_before
    assert made_after
    assert secure.status is None
    assert secure.error is not None and "CERTIFICATE_VERIFY_FAILED" in secure.error


# --- redirects ---------------------------------------------------------------------------


def test_redirect_chain_relative_and_absolute(server: Server) -> None:
    result = run(fetch(server.url("/chain/5")))
    assert result.error is None, result.error
    assert result.status == 200
    assert result.body == PAGE
    assert result.final_url == server.url("/chain/0?from=1")
    assert result.redirects == [
        server.url("/chain/5"),
        server.url("/chain/4?from=5"),
        server.url("/chain/3"),
        server.url("/chain/2?from=3"),
        server.url("/chain/1"),
    ]


def test_redirect_loop(server: Server) -> None:
    result = run(fetch(server.url("/loop/a")))
    assert result.error is not None and result.error.startswith("redirect loop")
    assert result.status == 302
    assert result.redirects == [server.url("/loop/a")]
    assert result.final_url == server.url("/loop/b")


def test_too_many_redirects(server: Server) -> None:
    result = run(fetch(server.url("/chain/5"), FetchSettings(policy=OPEN, max_redirects=3)))
    assert result.error == "too many redirects (over 3)"
    assert len(result.redirects) == 3
    exact = run(fetch(server.url("/chain/3"), FetchSettings(policy=OPEN, max_redirects=3)))
    assert exact.error is None and exact.body == PAGE


@pytest.mark.parametrize(
    "target",
    [
        "http://127.0.0.1:{port}/",
        "http://2130706433:{port}/",
        "http://[::ffff:127.0.0.1]:{port}/",
        "http://localhost:{port}/",
        "//127.1:{port}/",
    ],
)
def test_redirect_to_refused_address(
    server: Server,
    sentinel: Sentinel,
    monkeypatch: pytest.MonkeyPatch,
    connects: list[tuple[str, int]],
    target: str,
) -> None:
    fake_dns(monkeypatch, lambda n: "127.0.0.1")
    location = target.format(port=sentinel.port)
    settings = FetchSettings(policy=AddressPolicy(allow=("site.test",)))
    url = server.url("/redirect?to=" + urllib.parse.quote(location, safe=""), host="site.test")
    result = run(fetch(url, settings))
    assert result.error is not None and result.error.startswith("refused:"), result.error
    assert result.status == 302
    assert result.final_url == url
    assert connects == [("127.0.0.1", server.port)]
    assert sentinel.connections() == 0


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://example.com/x", "javascript:1"])
def test_redirect_to_other_scheme_refused(server: Server, target: str) -> None:
    result = run(fetch(server.url("/redirect?to=" + urllib.parse.quote(target, safe=""))))
    assert result.error is not None and result.error.startswith("refused: redirect to scheme")
    assert result.status == 302


# --- deadlines and caps ------------------------------------------------------------------


def test_slow_page_hits_the_deadline(server: Server) -> None:
    started = time.monotonic()
    result = run(fetch(server.url("/slow"), FetchSettings(policy=OPEN, deadline=0.3)))
    assert result.error == "deadline: fetch took over 0.3 s"
    assert time.monotonic() - started < 1.5


def test_huge_body_stops_at_the_cap(server: Server) -> None:
    settings = FetchSettings(policy=OPEN, max_body_bytes=MIB)
    result = run(fetch(server.url("/huge"), settings))
    assert result.truncated is True
    assert result.error == f"body over {MIB} bytes"
    assert len(result.body) == MIB
    assert result.status == 200
    assert result.bytes < 2 * MIB


@pytest.mark.parametrize(
    ("path", "size"), [("/gzip-bomb", 1024 * MIB), ("/brotli-bomb", 256 * MIB)]
)
def test_compression_bomb_stops_at_the_decoded_cap(server: Server, path: str, size: int) -> None:
    cap = 8 * MIB
    settings = FetchSettings(policy=OPEN, max_decoded_bytes=cap)
    run(fetch(server.url("/status/200")))  # warm up imports outside the measurement
    bomb = gzip_bomb() if path == "/gzip-bomb" else brotli_bomb()
    tracemalloc.start()
    try:
        result = run(fetch(server.url(path), settings))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.truncated is True
    assert result.error == f"decoded body over {cap} bytes"
    assert len(result.body) == cap
    assert result.body == bytes(cap)
    assert result.bytes <= len(bomb) < size // 100
    assert peak < 4 * cap + 2 * len(bomb), peak
