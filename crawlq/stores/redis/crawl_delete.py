"""``crawl_drop_pending`` and ``crawl_delete`` on Redis.

A mixin of ``RedisStore`` (it uses the store's ``_run`` and ``job_purge``). Dropping is
one script (``crawl_drop_pending.lua``). Deleting takes steps, since no index lists a
crawl's finished jobs: ``crawl_delete.lua`` closes the crawl and cancels its live jobs,
``job_purge`` (filter ``crawl=``) deletes its jobs a page of ids at a time, and
``crawl_delete.lua`` then removes the crawl's record, seen set and results. The record
goes last, so a call that stopped half-way is completed by calling again.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

from crawlq.stores.base import JobFilter
from crawlq.stores.redis.core import RedisCore, now_arg
from crawlq.types import Timestamp


class CrawlDeleteMixin(RedisCore):
    """Dropping a crawl's pending jobs; deleting a crawl with everything it has."""

    if TYPE_CHECKING:

        def job_purge(self, where: JobFilter) -> int: ...

    def _crawl_drop_pending(self, crawl_id: int, now: Timestamp | None) -> int:
        args = [now_arg(now), str(operator.index(crawl_id))]
        return int(self._run("dropping a crawl's pending jobs", "crawl_drop_pending", args))

    def _crawl_delete(self, crawl_id: int, now: Timestamp | None) -> bool:
        crawl = str(operator.index(crawl_id))
        if not self._run("deleting a crawl", "crawl_delete", [now_arg(now), crawl, "close"]):
            return False
        self.job_purge(JobFilter(crawl=crawl_id))
        return bool(self._run("deleting a crawl", "crawl_delete", ["", crawl, "forget"]))
