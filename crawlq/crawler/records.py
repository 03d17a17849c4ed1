"""Page records: the one JSON object per page that a crawl outputs and keeps.

Fields (every record has all of them, ``null`` where there is no value):

* ``url``: the URL the crawl fetched (as found in a link or given as a start URL);
* ``final_url``: where redirects ended (``url`` when there was none);
* ``status``: the final HTTP status, null when no response arrived;
* ``content_type``: the media type, lower case, without parameters;
* ``title``: the HTML ``<title>``, whitespace collapsed;
* ``depth``: link hops from a start URL (start URLs have 0; redirects add none);
* ``referrer``: the page the link was found on (null for start URLs);
* ``fetched_at``: when the fetch ended, ISO 8601 in UTC;
* ``elapsed_ms``: the whole fetch, redirects included;
* ``bytes``: the body as received; ``sha256``: hex digest of the decoded body (null
  when there is no complete body);
* ``links_found``: distinct http(s) links on the page (before scope rules);
* ``error``: null for a complete response, else why the page has none (a refusal, a
  network error after the last retry, a cap, ``robots.txt disallows it``, ...).

A crawl's options add fields after these, to every record of the crawl: its
``--extract`` fields (``crawlq.crawler.extract``), and the ``RESERVED_FIELDS`` of the
parse hook, of sitemaps and of revisits (``crawlq.crawler.items``,
``crawlq.crawler.sitemaps``, ``crawlq.crawler.revisit``).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from crawlq.crawler.fetch import FetchResult

__all__ = [
    "RECORD_FIELDS",
    "RESERVED_FIELDS",
    "REVISIT_FIELDS",
    "ROBOTS_DISALLOWED",
    "page_record",
    "record_text",
]

#: The ``error`` of a page that robots.txt disallows (recorded, never fetched).
ROBOTS_DISALLOWED = "robots.txt disallows it"

RECORD_FIELDS = (
    "url",
    "final_url",
    "status",
    "content_type",
    "title",
    "depth",
    "referrer",
    "fetched_at",
    "elapsed_ms",
    "bytes",
    "sha256",
    "links_found",
    "error",
)

#: Fields every record of a crawl with ``revisit_changed`` has (``crawlq.crawler.revisit``).
REVISIT_FIELDS = ("etag", "last_modified", "links", "unchanged")

#: Fields some crawls add (parse hook: ``items``, ``traceback``; sitemaps: ``kind``,
#: ``lastmod``; revisits: ``REVISIT_FIELDS``): no ``--extract`` field may take these names
#: either.
RESERVED_FIELDS = ("items", "traceback", "kind", "lastmod", *REVISIT_FIELDS)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def page_record(
    url: str,
    *,
    depth: int,
    referrer: str | None,
    result: FetchResult | None = None,
    title: str | None = None,
    links_found: int = 0,
    error: str | None = None,
) -> dict[str, Any]:
    """The record of one page; ``error`` overrides the fetch's own error."""
    complete = result is not None and result.error is None and not result.truncated
    return {
        "url": url,
        "final_url": result.final_url if result is not None else url,
        "status": result.status if result is not None else None,
        "content_type": result.content_type if result is not None else None,
        "title": title,
        "depth": depth,
        "referrer": referrer,
        "fetched_at": _now(),
        "elapsed_ms": result.elapsed_ms if result is not None else 0,
        "bytes": result.bytes if result is not None else 0,
        "sha256": hashlib.sha256(result.body).hexdigest()
        if complete and result is not None
        else None,
        "links_found": links_found,
        "error": error if error is not None else (result.error if result is not None else None),
    }


def record_text(record: dict[str, Any]) -> str:
    """One record as compact JSON (one line, UTF-8 characters kept)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
