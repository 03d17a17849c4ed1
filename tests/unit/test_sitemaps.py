"""Reading sitemap files: XML, indexes, gzip, robots.txt, text; caps and bad input."""

from __future__ import annotations

import gzip

from crawlq.crawler.sitemaps import MAX_ENTRIES, Entry, read_sitemap

BASE = "http://a.example/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def test_a_urlset_gives_its_pages_with_their_lastmod() -> None:
    body = (
        f"\ufeff<?xml version='1.0'?><urlset {NS}><url><loc> http://a.example/1 </loc>"
        "<lastmod>2024-01-02</lastmod><priority>1</priority></url>"
        "<url><loc>/2</loc></url><url><loc>mailto:x@y</loc></url><url></url></urlset>"
    ).encode()
    found = read_sitemap(BASE, body, decoded_cap=1 << 20)
    assert found.error is None and found.sitemaps == []
    assert found.pages == [Entry("http://a.example/1", "2024-01-02"), Entry("http://a.example/2")]


def test_an_index_gives_sitemaps_and_gzip_is_read_member_by_member() -> None:
    body = f"<sitemapindex {NS}><sitemap><loc>http://cdn.example/s1.xml.gz</loc></sitemap>"
    packed = gzip.compress(body.encode()[:40]) + gzip.compress(
        body.encode()[40:] + b"</sitemapindex>"
    )
    found = read_sitemap(BASE, packed, decoded_cap=1 << 20)
    assert found.error is None
    assert found.sitemaps == [Entry("http://cdn.example/s1.xml.gz")] and found.pages == []


def test_a_gzip_bomb_stops_at_the_cap() -> None:
    found = read_sitemap(BASE, gzip.compress(b" " * (4 << 20)), decoded_cap=1 << 20)
    assert found.error == f"decoded body over {1 << 20} bytes"


def test_robots_txt_gives_its_sitemap_lines() -> None:
    text = b"User-agent: *\nDisallow: /x\nSitemap: http://a.example/s.xml\nsitemap: /t.xml\n"
    found = read_sitemap("http://a.example/robots.txt", text, decoded_cap=1 << 20)
    assert [e.url for e in found.sitemaps] == ["http://a.example/s.xml", "http://a.example/t.xml"]


def test_a_text_sitemap_has_one_url_per_line_and_entries_are_capped() -> None:
    lines = "\n".join(f"http://a.example/{n}" for n in range(MAX_ENTRIES + 5))
    found = read_sitemap(BASE, lines.encode(), decoded_cap=10 << 20)
    assert len(found.pages) == MAX_ENTRIES and found.pages[-1].url.endswith(f"/{MAX_ENTRIES - 1}")


def test_what_is_not_a_sitemap_is_an_error() -> None:
    cap = 1 << 20
    assert read_sitemap(BASE, b"<html><p>x</p></html>", decoded_cap=cap).error == (
        "not a sitemap: the root element is <html>"
    )
    assert (read_sitemap(BASE, b"<urlset><url>", decoded_cap=cap).error or "").startswith(
        "invalid sitemap XML"
    )
    entities = b'<!DOCTYPE x [<!ENTITY a "b">]><urlset/>'
    assert read_sitemap(BASE, entities, decoded_cap=cap).error == (
        "invalid sitemap: it declares XML entities"
    )
    assert read_sitemap(BASE, b"\x1f\x8bnot gzip", decoded_cap=cap).error is not None
