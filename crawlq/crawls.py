"""Crawls: a set of jobs that grows while it runs and finishes exactly once.

The life of a crawl::

      crawl_create ──▶ running ◀──── resume ──── paused
                        │   └────── pause ───────▶ │
                        │ pending + running = 0    │ pending + running = 0
                        ▼                          ▼
                     finished  (on_finish scheduled in the same transaction)

      running / paused ── crawl_cancel ──▶ cancelled (pending jobs cancelled; running
                                           ones finish but add nothing; no on_finish)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from crawlq.exceptions import ConfigurationError, CrawlNotFound
from crawlq.jobs import JobSpec
from crawlq.limits import Limits
from crawlq.payload import MAX_EXACT, check_text
from crawlq.types import JSONValue, Timestamp


class CrawlState(StrEnum):
    """Where a crawl is in its life."""

    RUNNING = "running"
    """Its jobs are claimed and may add jobs to it."""
    PAUSED = "paused"
    """Its pending jobs are held: none is claimed until it is resumed. Running jobs finish
    and their children join the crawl, held."""
    FINISHED = "finished"
    """Nothing pending or running is left; ``on_finish`` was scheduled. Final."""
    CANCELLED = "cancelled"
    """Cancelled by a user. Final."""


OPEN_CRAWL_STATES = frozenset({CrawlState.RUNNING, CrawlState.PAUSED})
"""States in which a crawl accepts jobs."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlSpec:
    """A crawl to create.

    ``on_finish`` is scheduled (outside the crawl) in the transaction that finishes it,
    with the keyword argument ``crawl_id`` added. ``limits`` are the defaults a limit key
    takes when a job of this crawl is the first to use it (see ``crawlq.limits``).
    """

    name: str
    meta: dict[str, JSONValue] = field(default_factory=dict)
    on_finish: JobSpec | None = None
    limits: Limits | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CrawlInfo:
    """A crawl as the store holds it; the counters are read without scanning jobs.

    ``pending`` counts every job not yet claimed (due, scheduled, waiting for its limit
    key, or held by a pause); ``done``, ``dead`` and ``cancelled`` count jobs that ended
    so, and are never lowered by pruning; ``seen`` counts the fingerprints of its seen set.
    """

    id: int
    name: str
    meta: dict[str, JSONValue]
    state: CrawlState
    pending: int
    running: int
    done: int
    dead: int
    cancelled: int
    seen: int
    created_at: Timestamp
    finished_at: Timestamp | None
    """When it finished or was cancelled; None while open."""
    on_finish_job: int | None
    """The id of the ``on_finish`` job once scheduled."""
    limits: Limits | None = None

    @property
    def outstanding(self) -> int:
        """Jobs the crawl still waits for: when 0 in an open crawl, it finishes."""
        return self.pending + self.running


MAX_LIMIT_KEY_LENGTH = 1024


def check_placement(crawl: int | None, limit_key: str | None, seen: str | None) -> None:
    """Refuse a crawl id, limit key or seen key a store could not take, saying why."""
    if crawl is not None and (
        isinstance(crawl, bool) or not isinstance(crawl, int) or not 1 <= crawl <= MAX_EXACT
    ):
        raise ConfigurationError(
            f"crawl={crawl!r:.40} is not a crawl id: pass the id app.crawl(...) returned"
        )
    if limit_key is not None and (
        not isinstance(limit_key, str) or not limit_key or len(limit_key) > MAX_LIMIT_KEY_LENGTH
    ):
        raise ConfigurationError(
            f"limit_key={limit_key!r} is not valid: give a non-empty string of at most "
            f"{MAX_LIMIT_KEY_LENGTH} characters (the crawler uses the host name)"
        )
    if seen is not None and (not isinstance(seen, str) or not seen):
        raise ConfigurationError(f"seen={seen!r} is not valid: give a URL or a key string")
    if limit_key is not None:
        check_key_text(limit_key, "limit_key")
    if seen is not None:
        check_key_text(seen, "seen", nul=True)


def check_key_text(value: str, what: str, *, nul: bool = False) -> None:
    """Refuse a key no store could keep alike: text that is not valid Unicode (a lone
    surrogate), or that holds NUL, which PostgreSQL text cannot (``nul``: NUL is fine,
    the key is hashed)."""
    check_text(value, what, nul=nul)


def no_such_crawl(crawl_id: object, lister: str = "`crawlq crawls`") -> CrawlNotFound:
    """The error for a crawl id no crawl has, the same from every store and the App (which
    passes a ``lister`` command that carries its store, ``config.store_command``)."""
    return CrawlNotFound(f"no crawl has id {crawl_id}: {lister} lists them")


def check_seen_has_crawl(specs: Sequence[JobSpec]) -> None:
    """Refuse a spec gated by the seen set that belongs to no crawl."""
    for spec in specs:
        if spec.fingerprint is not None and spec.crawl is None:
            raise ConfigurationError(
                f"a job of task {spec.task!r} was given seen= but no crawl: the seen set "
                "belongs to one crawl; pass crawl=ID too, or schedule it through "
                "app.crawl(...) or a crawl's task (ctx.schedule fills the crawl in)"
            )
