"""Sitemaps: reading the files ``--sitemap URL`` and robots.txt ``Sitemap:`` lines name.

A sitemap is fetched by the page task like any page (robots.txt, politeness, the address
guard, retries, ``--max-bytes`` and the decoded cap all apply), as a job whose
``sitemap`` argument is its nesting level (``crawlq.crawler.pages``); what it lists is
read here, with no I/O:

* a ``<urlset>``: its pages (``<loc>``, with ``<lastmod>`` kept on the page's record);
* a ``<sitemapindex>``: more sitemaps, followed down to ``MAX_LEVEL`` levels;
* a robots.txt (a URL whose path is ``/robots.txt``): its ``Sitemap:`` lines;
* a text sitemap: one URL per line.

A body that starts with the gzip magic (``sitemap.xml.gz`` served as a file, not with
``Content-Encoding``) is gunzipped here up to the crawl's decoded cap: a gzip bomb stops
at the cap, and the sitemap is recorded with ``decoded body over N bytes``. At most
``MAX_ENTRIES`` entries of a file are read (the protocol's own limit). XML that declares
entities is refused (no sitemap needs them), and XML that does not parse is an error;
either way nothing of the file is followed. Entries that are not http(s) URLs are
skipped; page URLs are then scoped like links, sitemap URLs are not (a sitemap index may
point at another host, e.g. a CDN).
"""

from __future__ import annotations

import urllib.parse
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from crawlq.crawler.links import resolve_link
from crawlq.crawler.robots import Robots

__all__ = ["MAX_ENTRIES", "MAX_LEVEL", "Entry", "SitemapFile", "is_robots", "read_sitemap"]

#: Entries read from one file (the sitemap protocol's limit); later ones are ignored.
MAX_ENTRIES = 50_000

#: Sitemap levels followed: a sitemap given (0), an index's sitemaps (1), and two more.
MAX_LEVEL = 3

_GZIP_MAGIC = b"\x1f\x8b"
_MAX_LASTMOD = 64
_CHUNK = 256 * 1024


@dataclass(frozen=True)
class Entry:
    """One URL a sitemap lists, with its ``<lastmod>`` (as written; None if absent)."""

    url: str
    lastmod: str | None = None


@dataclass
class SitemapFile:
    """What one file lists: ``pages`` to crawl and more ``sitemaps`` to read; ``error``
    (then both are empty) when it cannot be read."""

    pages: list[Entry] = field(default_factory=list)
    sitemaps: list[Entry] = field(default_factory=list)
    error: str | None = None

    @property
    def entries(self) -> int:
        return len(self.pages) + len(self.sitemaps)


def is_robots(url: str) -> bool:
    """Whether ``url`` names a robots.txt file (its ``Sitemap:`` lines are read)."""
    try:
        return urllib.parse.urlsplit(url).path == "/robots.txt"
    except ValueError:
        return False


def gunzip(body: bytes, cap: int) -> bytes:
    """``body`` gunzipped (concatenated members too), at most ``cap`` bytes;
    ValueError when it is bigger or not gzip."""
    out: list[bytes] = []
    size = 0
    data = body
    while data:
        inflater = zlib.decompressobj(31)
        try:
            piece = inflater.decompress(data, cap - size + 1)
        except zlib.error as exc:
            raise ValueError(f"could not decode the gzip file: {exc}") from None
        size += len(piece)
        if size > cap or inflater.unconsumed_tail:
            raise ValueError(f"decoded body over {cap} bytes")
        out.append(piece)
        data = inflater.unused_data if inflater.eof else b""
    return b"".join(out)


def read_sitemap(url: str, body: bytes, *, decoded_cap: int) -> SitemapFile:
    """The entries of the file at ``url`` (see the module docstring); never raises."""
    if body.startswith(_GZIP_MAGIC):
        try:
            body = gunzip(body, decoded_cap)
        except ValueError as exc:
            return SitemapFile(error=str(exc))
    if is_robots(url):
        text = body.decode("utf-8", "replace")
        named = Robots.parse(text, url).sitemaps
        return SitemapFile(sitemaps=_entries(url, ((loc, None) for loc in named)))
    start = body.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start.startswith(b"<"):
        lines = body.decode("utf-8", "replace").splitlines()
        return SitemapFile(pages=_entries(url, ((line, None) for line in lines if line.strip())))
    return _read_xml(url, start)


def _entries(base: str, pairs: Iterable[tuple[str, str | None]]) -> list[Entry]:
    found: list[Entry] = []
    for loc, lastmod in pairs:
        if len(found) >= MAX_ENTRIES:
            break
        link = resolve_link(loc, base)
        if link is not None:
            found.append(Entry(link, lastmod))
    return found


def _local(tag: str) -> str:
    return tag.rpartition("}")[2].lower()


def _read_xml(url: str, data: bytes) -> SitemapFile:
    if b"<!ENTITY" in data:
        return SitemapFile(error="invalid sitemap: it declares XML entities")
    parser: Any = ET.XMLPullParser(events=("end",))
    pages: list[tuple[str, str | None]] = []
    sitemaps: list[tuple[str, str | None]] = []
    root = ""
    try:
        for start in range(0, len(data), _CHUNK):  # read as fed: elements are cleared
            parser.feed(data[start : start + _CHUNK])
            root = _take(parser, pages, sitemaps) or root
        parser.close()
        root = _take(parser, pages, sitemaps) or root
    except ET.ParseError as exc:
        return SitemapFile(error=f"invalid sitemap XML: {exc}")
    if root not in ("urlset", "sitemapindex"):
        return SitemapFile(error=f"not a sitemap: the root element is <{root}>")
    return SitemapFile(pages=_entries(url, pages), sitemaps=_entries(url, sitemaps))


def _take(
    parser: Any, pages: list[tuple[str, str | None]], sitemaps: list[tuple[str, str | None]]
) -> str:
    """Collect the ``<url>`` and ``<sitemap>`` entries parsed so far; the last element's
    name (the root's, once the document has ended)."""
    tag = ""
    for _, element in parser.read_events():
        tag = _local(str(element.tag))
        if tag in ("url", "sitemap"):
            loc = lastmod = None
            for child in element:
                name = _local(str(child.tag))
                if name == "loc":
                    loc = (child.text or "").strip()
                elif name == "lastmod":
                    lastmod = (child.text or "").strip()[:_MAX_LASTMOD] or None
            if loc and len(pages) + len(sitemaps) < MAX_ENTRIES:
                (pages if tag == "url" else sitemaps).append((loc, lastmod))
            element.clear()
    return tag
