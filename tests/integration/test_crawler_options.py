"""``crawlq crawl`` request options as a user runs them: headers, cookies, the credential
and the contact reach the site; the secret reaches nothing else (records, output, logs,
the crawl's settings in the store)."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests import crawlsite
from tests.crawlsite import CrawlSite, SiteSpec
from tests.integration.conftest import Processes, wait_until
from tests.integration.test_crawler import FAST, records, run
from tests.proxyserver import ProxyServer

crawl_site = crawlsite.crawl_site

SECRET = "Zq8-secret-token-41c7"
SMALL = SiteSpec(
    pages=30, links_per_page=3, slow_pages=0, hang=False, errors=False, redirects=False,
    bombs=False, flaky_failures=0, offsite=False,
)  # fmt: skip


def crawlq(procs: Processes, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [*procs.argv(*args)], cwd=procs.workdir, env=env or procs.env(),
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return result.stdout + result.stderr


def status(procs: Processes, crawl_id: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(crawlq(procs, "crawl-status", str(crawl_id), "--json"))
    return data


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_headers_cookies_auth_and_contact_reach_the_site_and_the_secret_nothing_else(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SMALL)
    out = procs.workdir / "pages.jsonl"
    env = {**procs.env(), "SITE_TOKEN": SECRET}
    result = subprocess.run(
        [*procs.argv("crawl"), site.url, *FAST, "-o", str(out), "--no-progress",
         "--header", "Accept-Language: fr-CH", "--header", "X-Team:  crawl ops",
         "--cookie", "consent=yes", "--cookie", "lang=fr",
         "--auth", "bearer", "--auth-env", "SITE_TOKEN",
         "--contact", "ops@example.org"],
        cwd=procs.workdir, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(site.log) > 20
    for request in site.log:  # robots.txt too: same host
        headers = request.headers
        assert headers["authorization"] == f"Bearer {SECRET}", request.path
        assert headers["cookie"] == "consent=yes; lang=fr"
        assert headers["accept-language"] == "fr-CH"
        assert headers["x-team"] == "crawl ops"
        assert headers["user-agent"].endswith(" (+mailto:ops@example.org)")
    texts = {
        "output": out.read_text(),
        "stderr": result.stderr + result.stdout,
        "status": json.dumps(status(procs, 1)),
        "export": crawlq(procs, "crawl-export", "1"),
        "jobs": crawlq(procs, "jobs", "--crawl", "1", "--json"),
    }
    for where, text in texts.items():
        assert SECRET not in text, where
        assert base64.b64encode(SECRET.encode()).decode() not in text, where
    assert "SITE_TOKEN" in texts["status"]  # where it is, not what it is
    assert len(records(out)) == len(site.expected().urls)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_missing_credential_stops_the_command_before_anything_is_created(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SMALL)
    result = run(procs, site.url, *FAST, "--auth", "basic", "--auth-env", "NOT_SET_ANYWHERE")
    assert result.returncode == 1
    assert "the environment variable NOT_SET_ANYWHERE (--auth-env) is not set" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (procs.workdir / "jobs.db").exists()
    assert site.log == []


@pytest.mark.parametrize("store_url", ["redis"], indirect=True)
def test_each_worker_reads_the_credential_from_its_own_environment(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    """--detach on a machine without the secret only warns; a worker that has it in its
    environment fetches with it."""
    site = crawl_site(SMALL)
    args = [site.url, *FAST, "--auth", "basic", "--auth-env", "SITE_BASIC", "--detach"]
    detached = run(procs, *args)
    assert detached.returncode == 0, detached.stderr
    assert "warning: the environment variable SITE_BASIC (--auth-env) is not set" in (
        detached.stderr
    )
    crawl_id = int(detached.stdout.split()[0])
    env = {**procs.env(), "SITE_BASIC": f"ann:{SECRET}"}
    worker = subprocess.Popen(
        procs.argv("worker", "--runtime", "asyncio", "--concurrency", "4", "--log-level", "debug"),
        cwd=procs.workdir, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: status(procs, crawl_id)["state"] == "finished", 120, "the crawl")
    finally:
        worker.send_signal(signal.SIGTERM)
        _, log = worker.communicate(timeout=30)
    expected = "Basic " + base64.b64encode(f"ann:{SECRET}".encode()).decode()
    assert {r.headers.get("authorization") for r in site.log} == {expected}
    assert "crawlq.crawler.http11" in log, "the debug log was on, the HTTP client's too"
    assert SECRET not in log and expected not in log


PROXY_PASSWORD = "pr0xy-Pa55-e2f9"


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_a_crawl_through_a_proxy_and_the_guard_refusing_private_targets_through_it(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SMALL)
    with ProxyServer(auth=("crawler", PROXY_PASSWORD)) as proxy:
        env = {**procs.env(), "CRAWL_PROXY": proxy.url("http", ("crawler", PROXY_PASSWORD))}
        refused_out = procs.workdir / "refused.jsonl"
        refused = subprocess.run(
            [*procs.argv("crawl"), site.url, "--proxy-env", "CRAWL_PROXY", "--delay", "0",
             "-o", str(refused_out), "--no-progress"],
            cwd=procs.workdir, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert refused.returncode == 3, refused.stderr
        assert records(refused_out)[0]["error"].startswith("refused:")
        assert proxy.log == [] and site.log == [], "a private target never reaches the proxy"

        out = procs.workdir / "pages.jsonl"
        result = subprocess.run(
            [*procs.argv("crawl"), site.url, *FAST, "--proxy-env", "CRAWL_PROXY",
             "-o", str(out), "--no-progress", "--new"],
            cwd=procs.workdir, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        through = proxy.log
    assert len(records(out)) == len(site.expected().urls)
    assert len(through) == len(site.log) > 20, "every request went through the proxy"
    assert {r.credentials for r in through} == {("crawler", PROXY_PASSWORD)}
    assert {r.target for r in through} == {f"127.0.0.1:{site.port}"}
    for request in site.log:
        assert "proxy-authorization" not in request.headers
    texts = {
        "output": out.read_text() + refused_out.read_text(),
        "stderr": result.stderr + refused.stderr,
        "status": json.dumps(status(procs, 2)),
    }
    for where, text in texts.items():
        assert PROXY_PASSWORD not in text, where
    assert "CRAWL_PROXY" in texts["status"]


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_proxy_options_refused_with_a_fix_and_no_credentials_echoed(
    procs: Processes, crawl_site: Callable[..., CrawlSite]
) -> None:
    site = crawl_site(SMALL)
    url = f"http://crawler:{PROXY_PASSWORD}@127.0.0.1:3128"
    with_credentials = run(procs, site.url, *FAST, "--proxy", url)
    assert with_credentials.returncode == 1
    assert "--proxy-env NAME" in with_credentials.stderr
    assert PROXY_PASSWORD not in with_credentials.stderr
    both = run(procs, site.url, *FAST, "--proxy", "http://127.0.0.1:3128", "--proxy-from-env")
    assert both.returncode == 1 and "not several" in both.stderr
    assert not (procs.workdir / "jobs.db").exists()
