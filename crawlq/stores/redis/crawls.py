"""The Redis store's crawls, seen sets and limit keys."""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState
from crawlq.jobs import JobSpec
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import dumps
from crawlq.stores.base import StoreSummary
from crawlq.stores.codec import (
    crawl_from_hash,
    key_limit_from_reply,
    limits_json,
    pairs,
    spec_row,
)
from crawlq.stores.gate import CrawlGate
from crawlq.stores.redis import keys
from crawlq.stores.redis.core import RedisCore, now_arg, number, translate
from crawlq.types import Timestamp


class RedisCrawls(RedisCore, CrawlGate):
    """Crawls, seen sets and limit keys (``CrawlStore``)."""

    def _crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], now: Timestamp | None
    ) -> CrawlInfo:
        """The id is taken (INCR) before the script runs, so the on_finish spec and the
        start specs are encoded with it; a create that fails leaves a gap in the ids."""
        with translate("creating a crawl"):
            crawl_id = int(self._client.incr(keys.key("crawl_ids", self._prefix)))
        on_finish = ""
        if spec.on_finish is not None:
            kwargs = {**spec.on_finish.kwargs, "crawl_id": crawl_id}
            on_finish = dumps(
                spec_row(replace(spec.on_finish, crawl=None, kwargs=kwargs, fingerprint=None))
            )
        args = [
            now_arg(now),
            str(crawl_id),
            spec.name,
            dumps(dict(spec.meta)),
            on_finish,
            limits_json(spec.limits) or "",
            dumps([spec_row(replace(s, crawl=crawl_id)) for s in start]),
        ]
        flat = self._run("creating a crawl", "crawl_create", args)
        return crawl_from_hash(crawl_id, pairs(flat))

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        with translate("reading a crawl"):
            raw = self._client.hgetall(keys.key("crawl", self._prefix, crawl=int(crawl_id)))
        h = cast("dict[str, str]", raw)
        return crawl_from_hash(int(crawl_id), h) if h else None

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        found: list[CrawlInfo] = []
        cursor = int(after_id)
        page = 500
        while limit is None or len(found) < limit:
            with translate("listing crawls"):
                ids = cast(
                    "list[str]",
                    self._client.zrangebyscore(
                        keys.key("crawls", self._prefix), f"({cursor}", "+inf", 0, page
                    ),
                )
                pipe = self._client.pipeline(transaction=False)
                for crawl_id in ids:
                    pipe.hgetall(keys.key("crawl", self._prefix, crawl=crawl_id))
                hashes = cast("list[dict[str, str]]", pipe.execute())
            for crawl_id, h in zip(ids, hashes, strict=True):
                info = crawl_from_hash(int(crawl_id), h)
                if state is None or info.state == state:
                    found.append(info)
            if len(ids) < page:
                break
            cursor = int(ids[-1])
        return found if limit is None else found[: max(limit, 0)]

    def _crawl_transition(
        self, operation: str, script: str, crawl_id: int, now: Timestamp | None
    ) -> bool:
        """Pause, resume or cancel a crawl (scripts crawl_pause, crawl_resume,
        crawl_cancel.lua). Siblings: the ``_crawl_transition`` of the SQL stores."""
        return bool(self._run(operation, script, [now_arg(now), str(operator.index(crawl_id))]))

    def _crawl_pause(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition("pausing a crawl", "crawl_pause", crawl_id, now)

    def _crawl_resume(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition("resuming a crawl", "crawl_resume", crawl_id, now)

    def _crawl_cancel(self, crawl_id: int, now: Timestamp | None) -> bool:
        return self._crawl_transition("cancelling a crawl", "crawl_cancel", crawl_id, now)

    def _seen_add(
        self, crawl_id: int, fingerprints: list[bytes], now: Timestamp | None
    ) -> list[bool] | None:
        fps = fingerprints
        args: list[Any] = [now_arg(now), str(operator.index(crawl_id)), *fps]
        answers = self._run("adding to a seen set", "seen_add", args)
        if answers == [-1]:
            return None
        return [bool(a) for a in answers]

    def _seen_has(self, crawl_id: int, fingerprints: list[bytes]) -> list[bool] | None:
        fps = fingerprints
        args: list[Any] = ["", str(operator.index(crawl_id)), *fps]
        answers = self._run("reading a seen set", "seen_has", args)
        if answers == [-1]:
            return None
        return [bool(a) for a in answers]

    def _limit_set(self, key: str, limits: Limits, now: Timestamp | None) -> None:
        cap = "" if limits.max_running is None else str(limits.max_running)
        args = [now_arg(now), key, cap, number(limits.min_interval)]
        self._run("setting a key's limits", "limit_set", args)

    def _limit_set_default(self, queue: str, limits: Limits | None) -> None:
        name = keys.key("limit_defaults", self._prefix)
        with translate("setting a queue's default limits"):
            if limits is None:
                self._client.hdel(name, queue)
            else:
                self._client.hset(name, queue, limits_json(limits) or "")

    def _limit_block(self, key: str, until: Timestamp, now: Timestamp | None) -> None:
        args = [now_arg(now), key, number(until)]
        self._run("blocking a key", "limit_block", args)

    def _limit_get(self, keys: Sequence[str]) -> list[KeyLimit | None]:
        rows = self._run("reading key limits", "limit_read", ["", "get", *keys])
        return [key_limit_from_reply(row) if row else None for row in rows]

    def _limit_list(self, limit: int, after: str) -> list[KeyLimit]:
        rows = self._run("listing key limits", "limit_read", ["", "list", after, str(limit)])
        return [key_limit_from_reply(row) for row in rows]

    def _store_summary(self, now: Timestamp | None) -> StoreSummary:
        raw = self._run("summing up crawls and keys", "store_summary", [now_arg(now)])
        counts = {str(k): int(v) for k, v in json.loads(raw).items()}
        return StoreSummary(
            crawls={s: counts.get(s.value, 0) for s in CrawlState},
            crawl_jobs={
                name: counts.get("job_" + name, 0) for name in ("done", "dead", "cancelled")
            },
            limit_keys=counts.get("keys", 0),
            blocked_keys=counts.get("blocked", 0),
        )
