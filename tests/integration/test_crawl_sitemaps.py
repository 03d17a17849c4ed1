"""``crawlq crawl --sitemap`` and ``--robots-sitemaps`` against a site served on
127.0.0.1: robots.txt ``Sitemap:`` lines, sitemap indexes, gzipped sitemaps, ``<lastmod>``
on the records, and the size caps (a gzip bomb, a file over ``--max-bytes``)."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from crawlq.crawler.records import ROBOTS_DISALLOWED
from crawlq.fingerprint import canonical_url
from tests.integration.conftest import Processes
from tests.integration.test_crawler import by_url, records, run

pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)

FAST = ["--allow-private", "--delay", "0", "--timeout", "5", "--no-progress"]
XML = "application/xml"


def urlset(*entries: tuple[str, str | None]) -> bytes:
    rows = "".join(
        f"<url><loc>{loc}</loc>" + (f"<lastmod>{mod}</lastmod>" if mod else "") + "</url>"
        for loc, mod in entries
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</urlset>'
    ).encode()


def index(*entries: tuple[str, str | None]) -> bytes:
    rows = "".join(
        f"<sitemap><loc>{loc}</loc>" + (f"<lastmod>{mod}</lastmod>" if mod else "") + "</sitemap>"
        for loc, mod in entries
    )
    return f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{rows}</sitemapindex>'.encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that stopped reading (a body over --max-bytes)


class StaticSite:
    """Serves ``files`` (path -> (content type, body)) on 127.0.0.1; 404 for the rest;
    ``requests`` lists the paths asked for."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[str, bytes]] = {}
        self.requests: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                site.requests.append(self.path)
                kind, body = site.files.get(self.path, ("text/html", b"<title>404</title>"))
                self.send_response(200 if self.path in site.files else 404)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def page(self, path: str, *links: str) -> None:
        anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
        self.files[path] = ("text/html", f"<title>{path}</title>{anchors}".encode())

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[StaticSite]:
    served = StaticSite()
    yield served
    served.close()


def build(site: StaticSite) -> None:
    o = site.origin
    site.files["/robots.txt"] = (
        "text/plain",
        f"User-agent: *\nDisallow: /private/\nSitemap: {o}/sitemap_index.xml\n".encode(),
    )
    site.files["/sitemap_index.xml"] = (
        XML,
        index((f"{o}/sitemap-a.xml", "2024-05-01"), (f"{o}/sitemap-b.xml.gz", None),
              (f"{o}/nested.xml", None)),
    )  # fmt: skip
    site.files["/sitemap-a.xml"] = (
        XML,
        urlset((f"{o}/a/1", "2024-01-01"), (f"{o}/a/2", None), ("http://other.example/x", None),
               (f"{o}/private/p", None)),
    )  # fmt: skip
    site.files["/sitemap-b.xml.gz"] = (
        "application/gzip",
        gzip.compress(urlset((f"{o}/b/1", "2024-02-02T10:00:00+00:00"), (f"{o}/b/2", None))),
    )
    site.files["/nested.xml"] = (XML, index((f"{o}/sitemap-c.xml", None)))
    site.files["/sitemap-c.xml"] = (XML, urlset((f"{o}/c/1", None)))
    site.page("/", "/linked")
    for path in ("/a/1", "/a/2", "/b/1", "/b/2", "/c/1", "/private/p"):
        site.page(path, "/linked")
    site.page("/linked")


def crawl(procs: Processes, *args: str, code: int = 0) -> dict[str, dict[str, Any]]:
    """Run ``crawlq crawl ARGS``; its records by canonical URL."""
    out = procs.workdir / "pages.jsonl"
    result = run(procs, *FAST, *args, "-o", str(out))
    assert result.returncode == code, result.stderr
    return by_url(records(out))


def test_robots_sitemaps_indexes_and_gzip_give_the_pages_with_their_lastmod(
    procs: Processes, site: StaticSite
) -> None:
    build(site)
    o = site.origin
    found = crawl(procs, o + "/", "--robots-sitemaps", "--max-depth", "0")
    sitemaps = ["/robots.txt", "/sitemap_index.xml", "/sitemap-a.xml", "/sitemap-b.xml.gz",
                "/nested.xml", "/sitemap-c.xml"]  # fmt: skip
    pages = ["/", "/a/1", "/a/2", "/b/1", "/b/2", "/c/1", "/private/p"]
    assert set(found) == {canonical_url(o + p) for p in sitemaps + pages}
    for path in sitemaps:
        record = found[canonical_url(o + path)]
        assert record["kind"] == "sitemap" and record["error"] is None, record
        assert record["links_found"] >= 1
    assert found[canonical_url(o + "/sitemap-a.xml")]["lastmod"] == "2024-05-01"
    assert found[canonical_url(o + "/sitemap-a.xml")]["links_found"] == 4
    for path in pages:
        record = found[canonical_url(o + path)]
        assert record["kind"] == "page" and record["depth"] == 0, record
    assert found[canonical_url(o + "/a/1")]["lastmod"] == "2024-01-01"
    assert found[canonical_url(o + "/b/1")]["lastmod"] == "2024-02-02T10:00:00+00:00"
    assert found[canonical_url(o + "/a/2")]["lastmod"] is None
    assert found[canonical_url(o + "/private/p")]["error"] == ROBOTS_DISALLOWED
    assert "/linked" not in site.requests and "/private/p" not in site.requests
    assert all(site.requests.count(p) == 1 for p in sitemaps[1:] + pages[:-1])


def test_sitemap_alone_follows_links_in_the_sitemaps_scope(
    procs: Processes, site: StaticSite
) -> None:
    build(site)
    o = site.origin
    found = crawl(procs, "--sitemap", o + "/sitemap-c.xml")
    assert set(found) == {canonical_url(o + p) for p in ("/sitemap-c.xml", "/c/1", "/linked")}
    assert found[canonical_url(o + "/linked")]["depth"] == 1


def test_sitemaps_over_the_caps_or_broken_are_recorded_as_errors(
    procs: Processes, site: StaticSite
) -> None:
    o = site.origin
    site.files["/bomb.xml.gz"] = ("application/gzip", gzip.compress(b"\0" * (60 << 20), 9))
    site.files["/huge.xml"] = (XML, urlset(*[(f"{o}/p/{n}", None) for n in range(40_000)]))
    site.files["/bad.xml"] = (XML, b"<urlset><url><loc>x</loc></urlset>")
    site.files["/entities.xml"] = (
        XML,
        b'<!DOCTYPE u [<!ENTITY a "aaaa">]><urlset><url><loc>&a;</loc></url></urlset>',
    )
    names = ["/bomb.xml.gz", "/huge.xml", "/bad.xml", "/entities.xml"]
    args = [a for name in names for a in ("--sitemap", o + name)]
    found = crawl(procs, *args, "--max-bytes", "1MiB", code=3)
    errors = {p: found[canonical_url(o + p)]["error"] for p in names}
    assert errors == {
        "/bomb.xml.gz": f"decoded body over {50 << 20} bytes",
        "/huge.xml": f"body over {1 << 20} bytes",
        "/bad.xml": errors["/bad.xml"],
        "/entities.xml": "invalid sitemap: it declares XML entities",
    }
    assert errors["/bad.xml"].startswith("invalid sitemap XML: mismatched tag")
    fetched = [path for path in site.requests if path != "/robots.txt"]
    assert sorted(fetched) == sorted(names)  # each once: final errors, no retries


def test_max_pages_leaves_room_for_the_pages_of_an_index(
    procs: Processes, site: StaticSite
) -> None:
    build(site)
    found = crawl(procs, "--sitemap", site.origin + "/sitemap_index.xml", "--max-pages", "4")
    kinds = sorted(record["kind"] for record in found.values())
    assert kinds == ["page", "page", "sitemap", "sitemap"], found.keys()
