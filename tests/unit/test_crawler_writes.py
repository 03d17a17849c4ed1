"""crawlq.crawler.writes: page records written together, each page waiting for its own."""

from __future__ import annotations

import asyncio
import json

import pytest

import crawlq
from crawlq.crawler.writes import ResultWriter
from crawlq.exceptions import CrawlNotFound
from crawlq.fingerprint import fingerprint


def record(i: int) -> str:
    return json.dumps({"url": f"http://site.test/{i}"})


def test_pages_ending_together_are_written_and_each_returns_once_its_record_is_kept(
    app: crawlq.App,
) -> None:
    crawl_id = app.crawl("writes").id
    writer = ResultWriter(app.store)

    async def page(i: int) -> int:
        await writer.add(crawl_id, fingerprint(f"http://site.test/{i}"), record(i))
        return app.store.result_count(crawl_id)  # its record is in by now

    async def main() -> list[int]:
        counts = await asyncio.gather(*(page(i) for i in range(50)))
        await writer.aclose()
        return counts

    counts = asyncio.run(main())
    assert min(counts) >= 1 and max(counts) == 50
    assert [text for _, text in app.store.result_list(crawl_id)] == [record(i) for i in range(50)]


def test_a_key_written_twice_keeps_its_first_record(app: crawlq.App) -> None:
    crawl_id = app.crawl("writes").id
    writer = ResultWriter(app.store)
    key = fingerprint("http://site.test/same")

    async def main() -> None:
        await asyncio.gather(writer.add(crawl_id, key, "1"), writer.add(crawl_id, key, "2"))
        await writer.add(crawl_id, key, "3")

    asyncio.run(main())
    assert [text for _, text in app.store.result_list(crawl_id)] == ["1"]


def test_a_failed_write_raises_in_its_pages_only(app: crawlq.App) -> None:
    crawl_id = app.crawl("writes").id
    writer = ResultWriter(app.store)

    async def main() -> list[BaseException | None]:
        return await asyncio.gather(
            writer.add(crawl_id, fingerprint("http://site.test/a"), record(1)),
            writer.add(crawl_id + 1000, fingerprint("http://site.test/b"), record(2)),
            writer.add(crawl_id, fingerprint("http://site.test/c"), record(3)),
            return_exceptions=True,
        )

    first, missing, third = asyncio.run(main())
    assert first is None and third is None
    assert isinstance(missing, CrawlNotFound)
    assert [text for _, text in app.store.result_list(crawl_id)] == [record(1), record(3)]


def test_the_write_goes_on_when_a_waiting_page_is_cancelled(app: crawlq.App) -> None:
    crawl_id = app.crawl("writes").id
    writer = ResultWriter(app.store)

    async def main() -> None:
        task = asyncio.create_task(writer.add(crawl_id, fingerprint("http://x.test/"), "{}"))
        await asyncio.sleep(0)  # queued, its write started
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await writer.aclose()

    asyncio.run(main())
    assert app.store.result_count(crawl_id) == 1
