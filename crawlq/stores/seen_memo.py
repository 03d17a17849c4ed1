"""What this process knows its crawls' seen sets hold, so that a crawler skips, without
asking the store, the links it has scheduled before.

A fingerprint goes into a crawl's seen set once and stays there for ever, and a crawl's
id is never reused (``CrawlStore``'s contract): once a completion whose children carry
fingerprints has been applied, each of them is in its crawl's seen set (it was added,
or was there already), and a spec with one of them would be ``SEEN``; so is each of a
new crawl's start jobs, and each spec of a ``job_schedule`` that returned (a closed crawl
refuses the whole batch). The gate teaches the memo those fingerprints after the store
answers; a link the memo knows is one the store would drop. Deleting a crawl
(``crawl_delete``) forgets its fingerprints here; another process's memo may keep them,
which is harmless since no crawl will have that id again.

A page links to the same pages as its neighbours (menus, footers, the pages of a
listing): on a crawl's site most links found are known, and each one skipped here is a
job spec not built, not sent to the store and not looked up in the seen set there. The
memo holds up to ``SEEN_MEMO_MAX`` fingerprints (about 100 bytes each), and forgets them
all at once past that, as Scrapy's crawlq scheduler does with its own
(``crawlq.scrapy.scheduler.LOCAL_SEEN_MAX``): the links seen on most pages come back
within a few pages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawlq.jobs import JobSpec
    from crawlq.stores.base import Completion

SEEN_MEMO_MAX = 32_768
"""Fingerprints a process remembers, over all crawls, before it forgets them all."""


class SeenMemo:
    """Fingerprints known to be in their crawl's seen set. ``learn`` runs in the thread
    that records completions, ``knows`` in the one that follows links: each reads or
    replaces one dict and set at a time, which the GIL keeps whole."""

    def __init__(self, limit: int = SEEN_MEMO_MAX) -> None:
        self.limit = limit
        self._crawls: dict[int, set[bytes]] = {}
        self._size = 0

    def knows(self, crawl_id: int, fingerprint: bytes) -> bool:
        known = self._crawls.get(crawl_id)
        return known is not None and fingerprint in known

    def unknown_children(self, completions: Sequence[Completion]) -> Sequence[Completion]:
        """``completions`` without the children the memo knows, which the store would drop
        as ``SEEN`` (``ctx.schedule(..., seen=url)`` of any task, not only the crawler's
        links, which it has skipped already)."""
        if not self._crawls:
            return completions
        kept: list[Completion] = []
        for completion in completions:
            children = completion.children
            left = [spec for spec in children if not self._knows_spec(spec)]
            kept.append(
                replace(completion, children=left) if len(left) < len(children) else completion
            )
        return kept

    def _knows_spec(self, spec: JobSpec) -> bool:
        return (
            spec.crawl is not None
            and spec.fingerprint is not None
            and self.knows(spec.crawl, spec.fingerprint)
        )

    def learn(self, completions: Sequence[Completion], applied: Sequence[bool]) -> None:
        """The children's fingerprints of the completions the store applied."""
        for completion, done in zip(completions, applied, strict=True):
            if done:
                self.learn_specs(completion.children)

    def learn_specs(self, specs: Sequence[JobSpec], crawl_id: int | None = None) -> None:
        """The fingerprints of ``specs`` the store has just scheduled into their crawl (or
        into ``crawl_id``: a new crawl's start jobs)."""
        for spec in specs:
            crawl = spec.crawl if crawl_id is None else crawl_id
            if crawl is None or spec.fingerprint is None:
                continue
            known = self._crawls.get(crawl)
            if known is not None and spec.fingerprint in known:
                continue
            if self._size >= self.limit:
                self._crawls, self._size, known = {}, 0, None
            if known is None:
                known = self._crawls[crawl] = set()
            known.add(spec.fingerprint)
            self._size += 1

    def forget(self, crawl_id: int) -> None:
        """The crawl is deleted: its seen set is gone."""
        known = self._crawls.pop(crawl_id, None)
        if known is not None:
            self._size -= len(known)
