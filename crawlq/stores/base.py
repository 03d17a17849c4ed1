"""The store protocols: the contract every store keeps, proven by ``tests/stores``.

The contract comes in three parts, one protocol each: ``JobStore`` (jobs, workers and
queues), ``CrawlStore`` (crawls, seen sets and limit keys) and ``CrawlerStorage`` (crawl
results and the cache). ``Store`` is all three, what ``open_store`` returns; code that
needs only one part asks for that part (``docs/stores.md``: adding a store).

Everything here is synchronous and batch-minded: one call schedules many jobs, claims up
to N, or acknowledges many leases, in one round trip and one transaction. Times are
seconds since the epoch on the *store's* clock; every operation takes an optional ``now``
so tests can move time, and uses the store's clock when it is None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from crawlq.crawls import CrawlInfo, CrawlSpec, CrawlState
from crawlq.jobs import (
    Job,
    JobSpec,
    JobState,
    Lease,
    QueueStats,
    QueueTotals,
    ScheduleResult,
    WorkerInfo,
)
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import MAX_EXACT, check_count, check_text
from crawlq.stores.checks import check_finite
from crawlq.stores.finished import FinishWaits
from crawlq.types import JobId, JSONValue, Timestamp


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What a store can do beyond the protocol's minimum."""

    notify: bool = False
    """``job_wait`` wakes up on new work instead of sleeping out its timeout."""
    multi_host: bool = False
    """Workers on several machines can share the store."""
    batched_claims: bool = False
    """A call's fixed work (its statements, their triggers) costs the store more than
    the jobs it carries: a worker of short jobs claims once its prefetch's room is free,
    a full batch a call (``crawlq.worker.prefetch``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimParams:
    """Claim up to ``limit`` due jobs of ``queues`` for ``worker_id``."""

    queues: Sequence[str]
    worker_id: str
    limit: int = 1
    now: Timestamp | None = None


CrawlRecord = tuple[int, bytes, str]
"""A record a job's end keeps in a crawl's results: (crawl id, 16-byte key, record text),
as ``CrawlerStorage.result_add(crawl_id, [(key, record)])`` would."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Completion:
    """A successful end of a claimed job.

    ``children`` are scheduled and ``records`` kept in the same transaction as the
    completion, and only if the lease is still valid: a job that crashes or lost its lease
    adds nothing.
    """

    lease: Lease
    result: JSONValue = None
    children: Sequence[JobSpec] = ()
    records: Sequence[CrawlRecord] = ()
    """Crawl results to keep, as ``result_add`` keeps them (the first record of a key
    wins; a record of an unknown crawl is dropped)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Failure:
    """A failed attempt. The caller decided what happens next (see ``crawlq.retry``).

    ``retry_delay`` None sends the job to ``dead`` with ``reason``; a number makes it
    pending again that many seconds after now. The attempt stays counted. ``records`` are
    kept as a completion keeps them: in the same transaction, only if the lease is valid.
    """

    lease: Lease
    error: str
    retry_delay: float | None
    reason: str = "error"
    exception: str = ""
    """The exception on one line, ``Type: message``: what the worker logs (not stored)."""
    records: Sequence[CrawlRecord] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Release:
    """Give a claimed job back without using up its attempt (shutdown, snooze)."""

    lease: Lease
    delay: float = 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class JobFilter:
    """Selects jobs for listing, requeueing and purging. Empty fields match everything."""

    ids: Sequence[JobId] | None = None
    queue: str | None = None
    task: str | None = None
    state: JobState | None = None
    key: str | None = None
    """Only jobs with this unique key."""
    crawl: int | None = None
    """Only jobs of this crawl."""
    limit_key: str | None = None
    """Only jobs of this limit key (a host)."""
    finished_before: Timestamp | None = None
    """Only jobs that finished before this time."""
    limit: int | None = None
    after_id: JobId = 0
    """Only jobs with a larger id (for paging through a listing)."""

    def __post_init__(self) -> None:
        for job_id in self.ids or ():
            check_count("job id", job_id, 1)
        if self.limit is not None:
            check_count("limit", self.limit, -MAX_EXACT)
        check_count("after_id", self.after_id, -MAX_EXACT)
        if self.crawl is not None:
            check_count("crawl id", self.crawl, 1)
        if self.finished_before is not None:
            check_finite("finished_before", self.finished_before)
        texts = (("queue", self.queue), ("task", self.task), ("key", self.key))
        for what, text in (*texts, ("limit_key", self.limit_key)):
            if text is not None:
                check_text(text, what, nul=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreSummary:
    """Counts over crawls and limit keys, read without listing them (``/metrics``)."""

    crawls: dict[CrawlState, int]
    """Crawls by state; every state is present (0 when none)."""
    crawl_jobs: dict[str, int]
    """Jobs of every crawl that ended ``done``, ``dead`` and ``cancelled``."""
    limit_keys: int
    """Limit keys the store has a record of (those ``limit_list`` lists)."""
    blocked_keys: int
    """Of those, the keys blocked at now (``blocked_until`` > now)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitParams:
    """Block until a job of ``queues`` may be claimable, or ``timeout`` seconds pass."""

    queues: Sequence[str]
    timeout: float


@runtime_checkable
class JobStore(FinishWaits, Protocol):
    """Durable storage for jobs, the workers that run them and their queues: the part of
    the contract a store that only runs jobs keeps.

    Contract (each sentence is a test in ``tests/stores``):

    - Uniqueness: at most one live (pending or running) job per (queue, key), enforced
      atomically by the store. Scheduling a live key applies the spec's ``on_conflict``
      to the pending job; if the job is running the request is remembered, at most one
      per key (merged by the same policy), and becomes a pending job when the running one
      ends as done or dead. Cancelling drops it.
    - Claim is atomic: no job is leased to two workers at once. It takes due pending jobs
      in the order priority desc, run_at asc, id asc; never a job before its run_at.
      Attempts are counted at claim; each claim issues a new lease token.
    - Heartbeat, complete, fail and release need the current lease token of a running
      job; a stale token changes nothing and reports False for that item.
    - A running job whose lease expired is returned by ``job_expire_leases``: pending
      again if it has attempts left, else dead with reason ``lease_expired``.
    - Workers register and heartbeat. ``worker_reap`` declares dead every alive worker
      whose heartbeat is overdue or that the caller names as gone, and returns its running
      jobs at once, as an expired lease is returned (reason ``worker_lost``); their old
      lease tokens are stale from then on, and the dead worker's own heartbeat is refused.
      ``worker_list`` shows an alive worker whose heartbeat is overdue as ``lost``.
    - ``maintenance_acquire`` is a named lease: at most one owner holds a duty until its
      ttl runs out.
    """

    capabilities: Capabilities

    def close(self) -> None:
        """Release connections. The store cannot be used afterwards."""

    def now(self) -> Timestamp:
        """The store's clock."""

    def job_schedule(
        self, specs: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> list[ScheduleResult]:
        """Schedule many jobs in one transaction; one result per spec, in order."""

    def job_claim(self, params: ClaimParams) -> list[Job]:
        """Lease up to ``params.limit`` due jobs, in claim order; [] if none is due."""

    def job_heartbeat(self, leases: Sequence[Lease], *, now: Timestamp | None = None) -> list[bool]:
        """Extend each lease by its job's lease_seconds from now; False where stale."""

    def job_complete(
        self, completions: Sequence[Completion], *, now: Timestamp | None = None
    ) -> list[bool]:
        """Mark jobs done (keeping their result), schedule their children and keep their
        records (``Completion.records``), atomically; False where the lease is stale (and
        then no child is scheduled and no record kept). Records are kept as ``result_add``
        keeps them, in batch order (a key's first record wins); a record whose crawl does
        not exist is dropped, and an invalid one (key not 16 bytes, text not valid
        Unicode) refuses the batch with ``ConfigurationError``."""

    def job_complete_claim(
        self, completions: Sequence[Completion], params: ClaimParams
    ) -> tuple[list[bool], list[Job]]:
        """``job_complete(completions, now=params.now)`` then ``job_claim(params)``, in one
        round trip where the store can (a worker's turn): what each returns. The claim
        sees the completions (their children may be claimed). On an error the completions
        may or may not have been recorded, as with ``job_complete``."""

    def job_fail(self, failures: Sequence[Failure], *, now: Timestamp | None = None) -> list[bool]:
        """Record failed attempts: retry later or dead, as each Failure says; the records
        of each applied one are kept as ``job_complete`` keeps a completion's."""

    def job_release(
        self, releases: Sequence[Release], *, now: Timestamp | None = None
    ) -> list[bool]:
        """Return running jobs to pending and give back the attempt their claim counted."""

    def job_expire_leases(self, *, now: Timestamp | None = None) -> list[JobId]:
        """Return running jobs whose lease has expired; their ids, in id order."""

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        """Cancel the pending or running jobs among ``ids``; returns those cancelled."""

    def job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None = None, *, now: Timestamp | None = None
    ) -> list[JobId]:
        """Move the pending jobs among ``ids`` to ``run_at`` (None: the store's now), as a
        schedule with ``on_conflict="replace"`` would: a held job stays held, a keyed one
        goes back behind its key. Returns the ids moved, in id order; running and finished
        jobs are left alone."""

    def job_get(self, job_id: JobId) -> Job | None:
        """One job, or None if there is no such job (or it was pruned)."""

    def job_list(self, where: JobFilter) -> list[Job]:
        """Jobs matching ``where``, in id order."""

    def job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        """The finished (done, dead, cancelled) jobs of ``queues`` that finished last, at
        most ``limit``: latest finished_at first, then higher id first. Reads an index of
        finish times: the cost grows with ``limit``, not with the jobs kept."""

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        """Make matching dead jobs pending, due now, with fresh attempts.

        A dead job whose key is live again is left dead (the live job already covers it).
        """

    def job_purge(self, where: JobFilter) -> int:
        """Delete matching finished (done, dead, cancelled) jobs; returns how many."""

    def job_prune(self, *, retention: float, now: Timestamp | None = None) -> int:
        """Delete done and cancelled jobs that finished more than ``retention`` s ago."""

    def job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        """The earliest run_at among pending jobs of ``queues``, or None."""

    def job_next_gated(
        self, queues: Sequence[str], *, within: float, now: Timestamp | None = None
    ) -> Timestamp | None:
        """The earliest time, no later than ``within`` s from now, at which a pending job
        of ``queues`` that is due by its own run_at may start, where only its limit key's
        gate (``min_interval`` since the key's last start, ``blocked_until``) keeps it
        back; None if there is none. Jobs due later by their own run_at (delay, at, a
        retry's backoff) do not count."""

    def job_wait(self, params: WaitParams) -> None:
        """Block until work may be claimable in ``params.queues`` or the timeout passes.

        Returning early is always allowed; callers must then try to claim.
        """

    def job_wait_claim(self, params: ClaimParams, timeout: float) -> list[Job]:
        """``job_wait`` for ``params.queues`` (up to ``timeout`` s), then
        ``job_claim(params)``: what it claims. A worker's wait: where the store can, the
        claim comes back in the wake-up's own round trip (Redis)."""

    def queue_stats(self, *, now: Timestamp | None = None) -> list[QueueStats]:
        """Counts for every queue that has or had jobs, sorted by queue name."""

    # -- workers and maintenance -------------------------------------------------------

    def queue_totals(self) -> list[QueueTotals]:
        """The totals of every queue (see ``QueueTotals``), sorted by queue name; read
        from counters, without scanning jobs."""

    def worker_register(self, info: WorkerInfo, *, now: Timestamp | None = None) -> None:
        """Insert or replace the record of ``info.id``, alive, with started_at and
        last_heartbeat = now; its identity and counters come from ``info``."""

    def worker_heartbeat(
        self,
        worker_id: str,
        *,
        running: int,
        done: int,
        failed: int,
        rss_bytes: int | None,
        now: Timestamp | None = None,
    ) -> bool:
        """Record an alive worker's counters and last_heartbeat = now. False, changing
        nothing, if the worker is unknown, stopped or was declared dead (it has then lost
        every lease it held)."""

    def worker_stop(
        self, worker_id: str, *, done: int, failed: int, now: Timestamp | None = None
    ) -> None:
        """A clean exit: an alive worker becomes stopped, with stopped_at = now and its
        final counters (``done``, ``failed``; running 0). A dead or unknown worker is left
        as it is."""

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        """Every registered worker: alive ones first, then lost ones, then the others,
        each by started_at (then id). An alive worker whose last heartbeat is older than
        ``now - DEAD_AFTER`` (``crawlq.config``) is listed as ``lost``, whatever the
        store holds."""

    def worker_reap(
        self, *, dead_after: float, gone: Sequence[str] = (), now: Timestamp | None = None
    ) -> list[str]:
        """Declare dead every alive worker whose last heartbeat is older than
        ``now - dead_after``, and every alive worker named in ``gone`` (its process is
        known to have ended), and in the same transaction return each running job it holds
        as ``job_expire_leases`` would (pending again if it has attempts left, else dead
        with reason ``worker_lost``), clearing their lease tokens. Returns the ids of the
        workers declared dead, sorted."""

    def worker_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        """Delete stopped and dead workers that ended more than ``older_than`` s ago;
        returns how many."""

    def maintenance_acquire(
        self, duty: str, owner: str, ttl: float, *, now: Timestamp | None = None
    ) -> bool:
        """Take or renew the named lease ``duty`` for ``owner`` until now + ttl, atomically.
        True if ``owner`` holds it now (it was free, expired, or already ``owner``'s);
        False, changing nothing, while another owner holds it unexpired."""


@runtime_checkable
class CrawlStore(Protocol):
    """Crawls, their seen sets and the limit keys that pace jobs.

    Contract (each sentence is a test in ``tests/stores``):

    - Crawls (``crawlq.crawls``): a job scheduled with ``crawl`` counts in that crawl;
      the crawl's counters change in the transaction that changes the job. Every
      transaction that lowers a crawl's pending + running (complete, fail to dead, expire,
      reap, cancel) ends by finishing each open crawl it touched whose pending + running
      is 0: state finished, finished_at = now, and its ``on_finish`` spec scheduled in the
      same transaction (its id kept in ``on_finish_job``). A crawl finishes once; nothing
      reopens it. Scheduling into an unknown crawl raises ``CrawlNotFound``, into a
      finished or cancelled one ``CrawlClosed`` (the whole batch is refused), except the
      children of a completion, which are dropped silently when their crawl is closed.
      A job of a paused crawl is never claimed: its pending jobs are held (scheduling
      into it holds the new job too) until ``crawl_resume``. ``job_requeue`` leaves a
      dead job of a closed crawl dead.
    - Seen sets: a fingerprint is added to a crawl's seen set once, for ever; the
      ``seen`` counter is the size of the set. A spec with ``fingerprint`` is scheduled
      only if it is new (outcome ``SEEN`` otherwise), in the same transaction.
      ``seen_known`` is True, without I/O, for the fingerprints this store object has
      scheduled (a new crawl's start jobs, ``job_schedule``, the children of the
      completions it applied), until it deletes their crawl.
    - Limits (``crawlq.limits``): a job with a ``limit_key`` is claimed only when its key
      has fewer than ``max_running`` jobs running, at least ``min_interval`` s after the
      key's last start, and not before ``blocked_until``; every other claim rule holds.
      The running count of a key is lowered by every way a job leaves running. A claim
      costs the same whether the waiting jobs of blocked keys number none or millions.
      ``job_next_gated`` tells when the next job that only its key's gate keeps back may
      start (burst workers wait for it); a job due later by its own run_at is not one.
    """

    # -- crawls and seen sets ----------------------------------------------------------

    def crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> CrawlInfo:
        """Create a running crawl and schedule ``start`` into it (their ``crawl`` field is
        replaced by the new id), in one transaction. With no start job left scheduled
        (none given, or all ``SEEN``) the crawl finishes at once. Crawl ids are positive
        integers, increasing, never reused."""

    def crawl_get(self, crawl_id: int) -> CrawlInfo | None:
        """One crawl, or None if there is no such crawl."""

    def crawl_list(
        self, *, state: CrawlState | None = None, limit: int | None = None, after_id: int = 0
    ) -> list[CrawlInfo]:
        """Crawls with an id above ``after_id`` (in ``state`` if given), in id order."""

    def crawl_pause(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        """A running crawl becomes paused and its pending jobs held; True if it was
        running, else False and nothing changes."""

    def crawl_resume(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        """A paused crawl runs again: its held jobs are pending again, with their own
        run_at and limit keys. True if it was paused, else False and nothing changes."""

    def crawl_cancel(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        """An open crawl becomes cancelled (finished_at = now, no ``on_finish``): its
        pending jobs are cancelled; its running jobs run on, and their completion adds no
        child. True if it was open, else False and nothing changes."""

    def crawl_drop_pending(self, crawl_id: int, *, now: Timestamp | None = None) -> int:
        """Cancel every pending job of an open crawl (held ones too) in one store
        operation; running jobs run on. The crawl stays open and finishes, once and with
        its ``on_finish``, when nothing of it is left running (at once if nothing is).
        Returns how many were cancelled; 0 for a closed or unknown crawl."""

    def crawl_delete(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        """Delete a crawl with its jobs (in every state: running ones are cancelled
        first, so their outcome is refused like a lost lease), its results and its seen
        set; no ``on_finish`` runs. Queue totals count the deleted jobs as gone; limit keys
        are reconciled. True if the crawl existed, else False. One transaction on SQLite
        and PostgreSQL; on Redis a few steps, the crawl's record last, so a call that
        stopped half-way is completed by calling again."""

    def seen_add(
        self, crawl_id: int, fingerprints: Sequence[bytes], *, now: Timestamp | None = None
    ) -> list[bool]:
        """Add 16-byte fingerprints to the crawl's seen set, in one transaction; True for
        each that was new (a repeat within the batch is False). ``CrawlNotFound`` for an
        unknown crawl; a closed crawl's set still takes additions."""

    def seen_has(self, crawl_id: int, fingerprints: Sequence[bytes]) -> list[bool]:
        """Whether each 16-byte fingerprint is in the crawl's seen set, in order, changing
        nothing (the crawler skips links already seen before it counts them against
        ``max_pages``). ``CrawlNotFound`` for an unknown crawl."""

    def seen_known(self, crawl_id: int, fingerprint: bytes) -> bool:
        """Whether this process knows ``fingerprint`` is in the crawl's seen set, without
        I/O: True once this store object has scheduled a spec carrying it into the crawl
        (a start job, ``job_schedule``, a child of an applied completion), until
        ``SEEN_MEMO_MAX`` fingerprints are known (then all are forgotten); False says
        nothing. The crawler skips such links: the store would drop them as ``SEEN``
        (``crawlq/stores/seen_memo.py``)."""

    # -- limits --------------------------------------------------------------------------

    def limit_set(self, key: str, limits: Limits, *, now: Timestamp | None = None) -> None:
        """Override the settings of ``key`` (creating its record), effective for its next
        claim; a key whose front waits on the old interval is re-timed at once."""

    def limit_set_default(
        self, queue: str, limits: Limits | None, *, now: Timestamp | None = None
    ) -> None:
        """The settings a key takes when a job of ``queue`` (outside a crawl with its own
        limits) is the first to use it; None removes the default."""

    def limit_block(self, key: str, until: Timestamp, *, now: Timestamp | None = None) -> None:
        """No job of ``key`` starts before ``until`` (a later block wins, an earlier one
        changes nothing). Running jobs are not touched."""

    def limit_get(
        self, keys: Sequence[str], *, now: Timestamp | None = None
    ) -> list[KeyLimit | None]:
        """The state of each key, None for a key the store has no record of."""

    def limit_list(self, *, limit: int = 100, after: str = "") -> list[KeyLimit]:
        """Keys greater than ``after``, in key order, at most ``limit``."""

    def store_summary(self, *, now: Timestamp | None = None) -> StoreSummary:
        """Crawls by state and the jobs they ended, limit keys and those blocked at now:
        the figures of ``/metrics``, in one read, without listing crawls or keys."""


@runtime_checkable
class CrawlerStorage(Protocol):
    """What the crawler keeps besides jobs: crawl results and a shared cache.

    Contract (each sentence is a test in ``tests/stores``):

    - Crawl results: ``result_add`` keeps one record per (crawl, 16-byte key), the
      first one given, for as long as the crawl exists; each new record gets the next
      sequence number of its crawl (positive, strictly increasing). Records become
      visible in sequence order: a reader paging with ``result_list(after=)`` while
      writers add never skips one. ``result_get`` reads the records of given keys.
      ``Completion.records`` and ``Failure.records`` are kept the same way by
      ``job_complete`` and ``job_fail``, in their transaction and only for a valid lease.
    - Cache: an entry set with a ttl is read back until now + ttl, then it is absent;
      ``cache_add`` sets an absent or expired entry atomically (of concurrent callers
      exactly one wins). Expired entries are removed (``job_prune`` or natively).
    """

    def result_add(
        self,
        crawl_id: int,
        items: Sequence[tuple[bytes, str]],
        *,
        now: Timestamp | None = None,
    ) -> list[bool]:
        """Keep each (16-byte key, record) of ``items`` in the crawl's results, in one
        transaction; True for each that was new. A key the crawl already has keeps its
        first record and gives False (so does a repeat within the batch). Each new record
        gets the crawl's next sequence number, in order: positive and strictly increasing,
        and a record is visible only once every record numbered before it is.
        ``CrawlNotFound`` for an unknown crawl; a closed crawl still takes results. A key
        that is not 16 bytes, or a record that is not a str of valid Unicode, refuses the
        whole batch with ``ConfigurationError``."""

    def result_list(
        self, crawl_id: int, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """The crawl's (seq, record) pairs with seq > ``after``, in seq order, at most
        ``limit``: page with ``after`` = the last seq read. [] when there are no more;
        ``CrawlNotFound`` for an unknown crawl."""

    def result_count(self, crawl_id: int) -> int:
        """How many results the crawl has (without reading them); ``CrawlNotFound`` for an
        unknown crawl."""

    def result_get(self, crawl_id: int, keys: Sequence[bytes]) -> list[str | None]:
        """The record kept under each 16-byte key of ``keys``, in order, None for a key
        the crawl has no record of (one read). ``CrawlNotFound`` for an unknown crawl; a
        key that is not 16 bytes refuses the call with ``ConfigurationError``."""

    # -- cache ---------------------------------------------------------------------------

    def cache_get(self, key: str, *, now: Timestamp | None = None) -> str | None:
        """The value of ``key``, or None if it is absent or expired (expires_at <= now)."""

    def cache_set(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> None:
        """Set or overwrite ``key``, expiring at now + ``ttl`` (seconds, > 0, fractions
        allowed). Keys and values are any str; one that is not valid Unicode (a lone
        surrogate), or a ttl that is not a positive finite number, is refused with
        ``ConfigurationError``."""

    def cache_add(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> bool:
        """Set ``key`` as ``cache_set`` does, only if it is absent or expired, atomically:
        of many concurrent callers exactly one gets True; the others change nothing."""

    def cache_delete(self, key: str) -> None:
        """Remove ``key`` (nothing happens if it is absent)."""


@runtime_checkable
class Store(JobStore, CrawlStore, CrawlerStorage, Protocol):
    """A full store: jobs, crawls and the crawler's storage (what ``open_store`` returns
    and ``App`` uses). Each part's contract is in its own protocol's docstring; the
    conformance suite (``tests/stores``) proves them all. ``docs/stores.md`` says how to
    add a store."""
