"""Page records written together: one store call for the pages that end at once.

Each page job of a crawl keeps its record with ``Store.result_add`` before it ends. Made
one by one, each write is a hand-off to a thread and a store transaction of its own;
``ResultWriter.add`` instead queues the record and waits until a write that holds it has
returned (so a page still ends only once its record is kept, and sees the store's error
if that write failed). One write is in flight at a time per event loop: the records
queued meanwhile go together in the next one, one ``result_add`` per crawl (a batch keeps
each key's first record, as one call per record would).
"""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawlq.stores.base import CrawlerStorage

__all__ = ["ResultWriter"]

_Queued = dict[int, list[tuple[bytes, str, "asyncio.Future[None]"]]]


class ResultWriter:
    """Writes the records queued on one event loop to one store, in batches."""

    def __init__(self, store: CrawlerStorage) -> None:
        self._store = weakref.ref(store)  # the writer is kept in a dict keyed by the store
        self._queued: _Queued = {}
        self._task: asyncio.Task[None] | None = None

    async def add(self, crawl_id: int, key: bytes, record: str) -> None:
        """Keep ``record`` under ``key`` in the crawl's results (``result_add``); returns
        once it is written, raises what the store raised for its batch."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queued.setdefault(crawl_id, []).append((key, record, done))
        if self._task is None:
            # A task of its own, so that a page job cancelled meanwhile does not stop the
            # write that the other pages wait for.
            self._task = asyncio.create_task(self._drain())
        await done

    async def _drain(self) -> None:
        batch: _Queued = {}
        try:
            while self._queued:
                batch, self._queued = self._queued, {}
                failures = await asyncio.to_thread(self._write, batch)
                for crawl_id, items in batch.items():
                    failure = failures.get(crawl_id)
                    for _key, _record, done in items:
                        if done.done():  # its page was cancelled
                            continue
                        if failure is None:
                            done.set_result(None)
                        else:
                            done.set_exception(failure)
        finally:
            self._task = None
            for items in (*batch.values(), *self._queued.values()):
                for *_, done in items:
                    done.cancel()  # only when this task was cancelled (the loop closing)

    def _write(self, batch: _Queued) -> dict[int, Exception]:
        """One ``result_add`` per crawl of ``batch``; the error of each that failed."""
        failures: dict[int, Exception] = {}
        store = self._store()
        assert store is not None  # the pages waiting for this write hold their app's store
        for crawl_id, items in batch.items():
            try:
                store.result_add(crawl_id, [(key, record) for key, record, _ in items])
            except Exception as exc:  # handed to the pages that wait for it
                failures[crawl_id] = exc
        return failures

    async def aclose(self) -> None:
        """Wait for the write in flight, if any (at the event loop's close)."""
        task = self._task
        if task is not None:
            await asyncio.wait([task])
