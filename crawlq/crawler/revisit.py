"""Revisiting only what changed: conditional requests from the previous crawl's records.

A crawl with ``revisit_changed`` (``crawlq crawl ... --revisit-changed``) that has a
previous crawl of the same name and settings (the latest one no longer open, found when
the crawl is created and kept in its meta under ``PREVIOUS_META_KEY``) fetches each page
with ``If-None-Match`` (the previous record's ``etag``) and ``If-Modified-Since`` (its
``last_modified``), sent to the URL that answered last time (its ``final_url``). The
previous record is read by the URL's fingerprint (``Store.result_get``).

A ``304 Not Modified`` is recorded with ``status`` 304 and ``unchanged: true``; what the
page holds (title, content type, digest, links, ``--extract`` fields, parse-hook items)
is carried over from the previous record, not parsed again, and the page's links are
followed from that record, so the crawl still reaches the whole site. Its body is not
written to the WARC file again; with ``rewrite_unchanged`` a WARC ``revisit`` record
(profile server-not-modified) is written for it. A changed page (200) is fetched, parsed
and recorded as usual.

To make this possible every record of such a crawl keeps ``etag``, ``last_modified``
(the response headers, null when absent), ``links`` (the links the page has that the
crawl's scope admits, depth aside) and ``unchanged`` (false for a page fetched whole).
A page whose previous record is missing, failed, was not a 2xx or 304, or has neither
validator is fetched without conditions.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from crawlq.crawler.config import stored_settings
from crawlq.crawler.records import REVISIT_FIELDS
from crawlq.crawls import OPEN_CRAWL_STATES

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.crawler.config import CrawlConfig

__all__ = [
    "PREVIOUS_META_KEY",
    "REVISIT_FIELDS",
    "carried_over",
    "conditional_headers",
    "previous_crawl",
    "usable",
]

#: The key of the previous crawl's id in the meta of a crawl with ``revisit_changed``.
PREVIOUS_META_KEY = "previous_crawl"

#: Fields of the previous record a 304 keeps: what the page holds, not how it was fetched.
_CARRIED = ("content_type", "title", "sha256", "links_found", "links", "etag", "last_modified")


def previous_crawl(app: App, name: str, config: CrawlConfig) -> int | None:
    """The latest crawl named ``name`` with the settings of ``config`` that is no longer
    open (finished or cancelled), None when there is none."""
    wanted = config.to_meta()
    key = next(iter(wanted))
    latest: int | None = None
    after = 0
    while True:
        batch = app.store.crawl_list(limit=500, after_id=after)
        for crawl in batch:
            if (
                crawl.state not in OPEN_CRAWL_STATES
                and crawl.name == name
                and stored_settings(crawl.meta) == wanted[key]
            ):
                latest = crawl.id if latest is None else max(latest, crawl.id)
        if len(batch) < 500:
            return latest
        after = batch[-1].id


def usable(text: str | None) -> dict[str, Any] | None:
    """The previous record (its JSON text) when a conditional request may rest on it: a
    2xx or an unchanged 304 without error, with its links and a validator."""
    if text is None:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("error") is not None:
        return None
    status = record.get("status")
    revisited = status == 304 and record.get("unchanged") is True
    if not isinstance(status, int) or not (200 <= status < 300 or revisited):
        return None
    if not isinstance(record.get("links"), list) or not isinstance(record.get("final_url"), str):
        return None
    if not record.get("etag") and not record.get("last_modified"):
        return None
    return record


def conditional_headers(previous: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``If-None-Match`` and ``If-Modified-Since`` from a usable previous record."""
    headers: list[tuple[str, str]] = []
    if previous.get("etag"):
        headers.append(("If-None-Match", str(previous["etag"])))
    if previous.get("last_modified"):
        headers.append(("If-Modified-Since", str(previous["last_modified"])))
    return tuple(headers)


def carried_over(
    record: dict[str, Any], previous: dict[str, Any], config: CrawlConfig
) -> dict[str, Any]:
    """The record of a 304: ``record`` (this fetch) with what the page holds and its
    validators taken from ``previous`` (the caller sets any new validator the 304 sent)."""
    for name in _CARRIED:
        record[name] = previous.get(name)
    record["unchanged"] = True
    extractor = config.extractor
    for name in extractor.names if extractor is not None else ():
        record[name] = previous.get(name)
    if "items" in previous:
        record["items"] = previous["items"]
    return record
