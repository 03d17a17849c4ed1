"""The fetcher through a real proxy (tests/proxyserver.py, HTTP and SOCKS5 on 127.0.0.1):
routing, proxy credentials, the environment's proxy variables, and the address guard,
which still refuses private targets before anything reaches the proxy."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from crawlq.cli import cli
from crawlq.crawler.addresses import AddressPolicy
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.fetch import FetchSettings
from crawlq.crawler.proxies import bypassed, parse_proxy
from crawlq.exceptions import ConfigurationError
from tests.proxyserver import ProxyServer
from tests.unit.test_crawler_fetch import OPEN, Server, fetch, run, server

__all__ = ["server"]  # the fixture, shared with test_crawler_fetch

PASSWORD = "pr0xy-S3CRET"
AUTH = ("crawler", PASSWORD)


@pytest.fixture
def proxy() -> Iterator[ProxyServer]:
    with ProxyServer() as running:
        yield running


@pytest.fixture
def auth_proxy() -> Iterator[ProxyServer]:
    with ProxyServer(auth=AUTH) as running:
        yield running


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("scheme", ["http", "socks5", "socks5h"])
def test_a_page_is_fetched_through_the_proxy(
    server: Server, proxy: ProxyServer, scheme: str
) -> None:
    settings = FetchSettings(policy=OPEN, proxy=proxy.url(scheme))
    result = run(fetch(server.url("/echo"), settings))
    assert result.error is None, result.error
    assert result.status == 200 and "User-Agent" in json.loads(result.body)
    [request] = proxy.log
    assert request.target == f"127.0.0.1:{server.port}"
    assert request.protocol == ("http" if scheme == "http" else "socks5")


@pytest.mark.parametrize("scheme", ["http", "socks5"])
def test_proxy_credentials_are_sent_to_the_proxy_and_shown_nowhere(
    server: Server, auth_proxy: ProxyServer, scheme: str
) -> None:
    settings = FetchSettings(policy=OPEN, proxy=auth_proxy.url(scheme, AUTH))
    assert PASSWORD not in repr(settings)
    result = run(fetch(server.url("/echo"), settings))
    assert result.error is None, result.error
    assert auth_proxy.log[-1].credentials == AUTH
    sent = {k.lower() for k in json.loads(result.body)}
    assert "proxy-authorization" not in sent, "the proxy's credentials stay with the proxy"
    wrong = FetchSettings(policy=OPEN, proxy=auth_proxy.url(scheme, ("crawler", "nope")))
    refused = run(fetch(server.url("/echo"), wrong))
    if scheme == "http":
        assert refused.status == 407 and refused.error is None
    else:
        assert refused.error is not None and "through the proxy socks5://127.0.0.1:" in (
            refused.error
        )
        assert "nope" not in refused.error


def test_https_goes_through_a_connect_tunnel(proxy: ProxyServer, server: Server) -> None:
    """The target speaks plain HTTP, so TLS fails: the tunnel was asked for all the same."""
    settings = FetchSettings(policy=OPEN, proxy=proxy.url())
    result = run(fetch(f"https://127.0.0.1:{server.port}/echo", settings))
    assert result.error is not None
    assert [(r.protocol, r.target) for r in proxy.log] == [("connect", f"127.0.0.1:{server.port}")]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "2130706433"])
def test_the_guard_refuses_private_targets_before_the_proxy_sees_them(
    server: Server, proxy: ProxyServer, host: str
) -> None:
    for scheme in ("http", "socks5"):
        settings = FetchSettings(proxy=proxy.url(scheme))  # the default policy
        result = run(fetch(f"http://{host}:{server.port}/echo", settings))
        assert result.error is not None and result.error.startswith("refused:"), result.error
    assert proxy.log == [], "nothing reached the proxy"


def test_a_redirect_to_a_private_address_is_refused_through_the_proxy(
    server: Server, proxy: ProxyServer
) -> None:
    """The first hop's host is allowed by name; the redirect's is not: refused, and the
    proxy saw only the first request."""
    policy = AddressPolicy(allow=("localhost",))
    settings = FetchSettings(policy=policy, proxy=proxy.url())
    target = f"http://127.0.0.1:{server.port}/echo"
    result = run(fetch(f"http://localhost:{server.port}/redirect?to={target}", settings))
    assert result.error is not None and result.error.startswith("refused:"), result.error
    assert [r.target for r in proxy.log] == [f"localhost:{server.port}"]


def test_a_proxy_that_is_down_is_named_in_the_error_without_credentials(server: Server) -> None:
    port = free_port()
    settings = FetchSettings(policy=OPEN, proxy=f"http://crawler:{PASSWORD}@127.0.0.1:{port}")
    result = run(fetch(server.url("/echo"), settings))
    assert result.error is not None
    assert f"(through the proxy http://127.0.0.1:{port})" in result.error
    assert PASSWORD not in result.error


def test_the_environment_proxy_variables_are_used_only_when_asked(
    server: Server, proxy: ProxyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url())
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert run(fetch(server.url("/echo"), FetchSettings(policy=OPEN))).error is None
    assert proxy.log == [], "ignored unless proxy_from_env"
    settings = FetchSettings(policy=OPEN, proxy_from_env=True)
    assert run(fetch(server.url("/echo"), settings)).error is None
    assert len(proxy.log) == 1
    monkeypatch.setenv("NO_PROXY", "example.org, 127.0.0.1")
    assert run(fetch(server.url("/echo"), settings)).error is None
    assert len(proxy.log) == 1, "NO_PROXY goes direct"


@pytest.mark.parametrize(
    ("host", "no_proxy", "expected"),
    [
        ("example.com", "", False),
        ("example.com", "*", True),
        ("example.com", "example.com", True),
        ("www.example.com", ".example.com", True),
        ("www.example.com", "*.example.com", True),
        ("www.example.com", "example.com:8080", True),
        ("badexample.com", "example.com", False),
        ("::1", "[::1]:80", True),
        ("10.0.0.1", "10.0.0.2, 10.0.0.1", True),
    ],
)
def test_no_proxy(host: str, no_proxy: str, expected: bool) -> None:
    assert bypassed(host, no_proxy) is expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://proxy:21", "scheme must be http, https, socks5 or socks5h"),
        ("http://", "no host"),
        ("http://proxy:3128/path", "no path"),
        ("http://proxy:99999", "not a valid URL"),
        ("", "must be a URL"),
    ],
)
def test_bad_proxy_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_proxy(url)


def test_credentials_in_a_proxy_url_parse_and_never_show() -> None:
    proxy = parse_proxy(f"socks5://us%40er:{PASSWORD}@[::1]:9050")
    assert proxy.auth == ("us@er", PASSWORD)
    assert proxy.display == "socks5://[::1]:9050"
    assert PASSWORD not in repr(proxy)
    with pytest.raises(ConfigurationError) as info:
        parse_proxy(f"gopher://crawler:{PASSWORD}@proxy:70")
    assert PASSWORD not in str(info.value)


def test_crawl_settings_keep_no_proxy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"start_urls": ("http://example.com/",)}
    with pytest.raises(ConfigurationError, match="--proxy-env NAME") as info:
        CrawlConfig(**base, proxy=f"http://crawler:{PASSWORD}@proxy:3128")  # type: ignore[arg-type]
    assert PASSWORD not in str(info.value)
    with pytest.raises(ConfigurationError, match="not several"):
        CrawlConfig(**base, proxy="http://proxy:3128", proxy_from_env=True)  # type: ignore[arg-type]
    monkeypatch.setenv("CRAWL_PROXY", f"http://crawler:{PASSWORD}@proxy:3128")
    config = CrawlConfig(**base, proxy_env="CRAWL_PROXY")  # type: ignore[arg-type]
    assert PASSWORD not in json.dumps(config.to_meta())
    settings = config.fetch_settings
    assert settings.proxy == f"http://crawler:{PASSWORD}@proxy:3128"
    assert PASSWORD not in repr(settings)
    monkeypatch.setenv("CRAWL_PROXY", "nonsense")
    with pytest.raises(ConfigurationError, match="CRAWL_PROXY") as info:
        config.fetch_settings  # noqa: B018
    monkeypatch.delenv("CRAWL_PROXY")
    with pytest.raises(ConfigurationError, match=r"CRAWL_PROXY \(--proxy-env\) is not set"):
        config.fetch_settings  # noqa: B018


def test_crawl_with_a_bad_environment_proxy_stops_before_creating_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"gopher://crawler:{PASSWORD}@proxy:70")
    store = tmp_path / "c.db"
    result = CliRunner().invoke(
        cli,
        ["crawl", "https://example.com/", "--store", f"sqlite:///{store}", "--proxy-from-env",
         "-o", str(tmp_path / "o.jsonl")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "the environment variable HTTPS_PROXY" in result.output
    assert PASSWORD not in result.output
    assert not store.exists()
