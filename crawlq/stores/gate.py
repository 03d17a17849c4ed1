"""The gate in front of every store: the public store calls that take something to
check, written once for all stores.

A store inherits the gate of each part it implements (``JobGate``, ``WorkerGate``,
``CrawlGate``, ``StorageGate``). Each public call of a gate checks its arguments with
``crawlq.stores.checks`` (the same rule and the same message on every store, before any
I/O), answers the calls that need no I/O (an empty batch, a listing of 0), then calls the
store's hook of the same name with a leading underscore (``job_schedule`` ->
``_job_schedule``), which does the work on checked arguments. The hooks of the calls
that may name an unknown crawl return None for it, and the gate raises ``CrawlNotFound``.
That is one more function call per store call, and no reflection.

The gates also keep a memo of the fingerprints the store object has scheduled into each
crawl (``seen_memo.py``): ``seen_known`` reads it, and a completion's children it knows
never reach the store (the store would drop them as ``SEEN``).

Calls with nothing to check (``job_get``, ``job_list``, ``job_wait``, ``queue_totals``,
``crawl_get``, ``crawl_list``, ``close``, ``now``) are the store's own methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import cached_property

from crawlq.crawls import CrawlInfo, CrawlSpec
from crawlq.fingerprint import check_fingerprint
from crawlq.jobs import (
    FINISHED_STATES,
    Job,
    JobSpec,
    JobState,
    Lease,
    QueueStats,
    ScheduleResult,
    WorkerInfo,
)
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import check_count, check_text
from crawlq.stores.base import (
    ClaimParams,
    Completion,
    Failure,
    JobFilter,
    Release,
    StoreSummary,
    WaitParams,
)
from crawlq.stores.checks import (
    check_cache_key,
    check_fingerprints,
    check_finite,
    check_finites,
    check_now,
    check_page,
    check_records,
    check_results,
    check_specs,
    check_ttl,
    found,
)
from crawlq.stores.seen_memo import SeenMemo
from crawlq.stores.workers import Counters
from crawlq.types import JobId, Timestamp


class _SeenMemoGate:
    """The seen memo that the job and crawl gates share: the fingerprints this store
    object has scheduled, learnt after each write that returned, left out of the
    completions' children before the store writes them, forgotten with their crawl."""

    @cached_property
    def _seen_memo(self) -> SeenMemo:
        """What this process knows the crawls' seen sets hold (``seen_memo.py``): taught
        by the completions applied, read by ``seen_known``."""
        return SeenMemo()


class JobGate(_SeenMemoGate, ABC):
    """Jobs and queues (``JobStore``)."""

    job_wait: Callable[[WaitParams], None]
    """The store's own (nothing to check); ``_job_wait_claim``'s default waits with it."""

    def job_schedule(
        self, specs: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> list[ScheduleResult]:
        check_now(now)
        check_specs(specs)
        if not specs:
            return []
        results = self._job_schedule(specs, now)
        self._seen_memo.learn_specs(specs)
        return results

    def job_claim(self, params: ClaimParams) -> list[Job]:
        if params.limit <= 0 or not params.queues:
            return []
        check_now(params.now)
        return self._job_claim(params)

    def job_heartbeat(self, leases: Sequence[Lease], *, now: Timestamp | None = None) -> list[bool]:
        check_now(now)
        return self._job_heartbeat(leases, now) if leases else []

    def job_complete(
        self, completions: Sequence[Completion], *, now: Timestamp | None = None
    ) -> list[bool]:
        check_now(now)
        for completion in completions:
            check_specs(completion.children)
        check_records(completions)
        if not completions:
            return []
        unknown = self._seen_memo.unknown_children(completions)
        applied = self._job_complete(unknown, now)
        self._seen_memo.learn(unknown, applied)  # the children left out are known already
        return applied

    def job_complete_claim(
        self, completions: Sequence[Completion], params: ClaimParams
    ) -> tuple[list[bool], list[Job]]:
        check_now(params.now)
        for completion in completions:
            check_specs(completion.children)
        check_records(completions)
        if params.limit <= 0 or not params.queues:
            return self.job_complete(completions, now=params.now), []
        if not completions:
            return [], self._job_claim(params)
        unknown = self._seen_memo.unknown_children(completions)
        applied, jobs = self._job_complete_claim(unknown, params)
        self._seen_memo.learn(unknown, applied)
        return applied, jobs

    def job_wait_claim(self, params: ClaimParams, timeout: float) -> list[Job]:
        check_now(params.now)
        if params.limit <= 0 or not params.queues:
            self.job_wait(WaitParams(queues=params.queues, timeout=timeout))
            return []
        return self._job_wait_claim(params, timeout)

    def job_fail(self, failures: Sequence[Failure], *, now: Timestamp | None = None) -> list[bool]:
        check_now(now)
        check_finites("retry_delay", [f.retry_delay for f in failures])
        check_records(failures)
        return self._job_fail(failures, now) if failures else []

    def job_release(
        self, releases: Sequence[Release], *, now: Timestamp | None = None
    ) -> list[bool]:
        check_now(now)
        check_finites("delay", [r.delay for r in releases])
        return self._job_release(releases, now) if releases else []

    def job_expire_leases(self, *, now: Timestamp | None = None) -> list[JobId]:
        check_now(now)
        return self._job_expire_leases(now)

    def job_cancel(self, ids: Sequence[JobId], *, now: Timestamp | None = None) -> list[JobId]:
        check_now(now)
        return self._job_cancel(ids, now) if ids else []

    def job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None = None, *, now: Timestamp | None = None
    ) -> list[JobId]:
        check_now(now)
        if run_at is not None:
            check_finite("run_at", run_at)
        return self._job_reschedule(ids, run_at, now) if ids else []

    def job_recent(self, queues: Sequence[str], limit: int) -> list[Job]:
        limit = check_count("limit", limit, 0)
        return self._job_recent(queues, limit) if limit and queues else []

    def job_requeue(self, where: JobFilter, *, now: Timestamp | None = None) -> list[JobId]:
        check_now(now)
        if where.state not in (None, JobState.DEAD):
            return []  # only dead jobs are requeued
        return self._job_requeue(where, now)

    def job_purge(self, where: JobFilter) -> int:
        if where.state is not None and where.state not in FINISHED_STATES:
            return 0  # only finished jobs are purged
        return self._job_purge(where)

    def job_prune(self, *, retention: float, now: Timestamp | None = None) -> int:
        check_now(now)
        return self._job_prune(check_finite("retention", retention), now)

    def job_next_due(self, queues: Sequence[str]) -> Timestamp | None:
        return self._job_next_due(queues) if queues else None

    def job_next_gated(
        self, queues: Sequence[str], *, within: float, now: Timestamp | None = None
    ) -> Timestamp | None:
        check_now(now)
        within = check_finite("within", within)
        return self._job_next_gated(queues, within, now) if queues else None

    def queue_stats(self, *, now: Timestamp | None = None) -> list[QueueStats]:
        check_now(now)
        return self._queue_stats(now)

    @abstractmethod
    def _job_schedule(
        self, specs: Sequence[JobSpec], now: Timestamp | None
    ) -> list[ScheduleResult]: ...

    @abstractmethod
    def _job_claim(self, params: ClaimParams) -> list[Job]: ...

    @abstractmethod
    def _job_heartbeat(self, leases: Sequence[Lease], now: Timestamp | None) -> list[bool]: ...

    @abstractmethod
    def _job_complete(
        self, completions: Sequence[Completion], now: Timestamp | None
    ) -> list[bool]: ...

    def _job_complete_claim(
        self, completions: Sequence[Completion], params: ClaimParams
    ) -> tuple[list[bool], list[Job]]:
        """Two calls, for a store that cannot do better (it overrides this)."""
        return self._job_complete(completions, params.now), self._job_claim(params)

    def _job_wait_claim(self, params: ClaimParams, timeout: float) -> list[Job]:
        """Two calls, for a store that cannot do better (it overrides this)."""
        self.job_wait(WaitParams(queues=params.queues, timeout=timeout))
        return self._job_claim(params)

    @abstractmethod
    def _job_fail(self, failures: Sequence[Failure], now: Timestamp | None) -> list[bool]: ...

    @abstractmethod
    def _job_release(self, releases: Sequence[Release], now: Timestamp | None) -> list[bool]: ...

    @abstractmethod
    def _job_expire_leases(self, now: Timestamp | None) -> list[JobId]: ...

    @abstractmethod
    def _job_cancel(self, ids: Sequence[JobId], now: Timestamp | None) -> list[JobId]: ...

    @abstractmethod
    def _job_reschedule(
        self, ids: Sequence[JobId], run_at: Timestamp | None, now: Timestamp | None
    ) -> list[JobId]: ...

    @abstractmethod
    def _job_recent(self, queues: Sequence[str], limit: int) -> list[Job]: ...

    @abstractmethod
    def _job_requeue(self, where: JobFilter, now: Timestamp | None) -> list[JobId]: ...

    @abstractmethod
    def _job_purge(self, where: JobFilter) -> int: ...

    @abstractmethod
    def _job_prune(self, retention: float, now: Timestamp | None) -> int: ...

    @abstractmethod
    def _job_next_due(self, queues: Sequence[str]) -> Timestamp | None: ...

    @abstractmethod
    def _job_next_gated(
        self, queues: Sequence[str], within: float, now: Timestamp | None
    ) -> Timestamp | None: ...

    @abstractmethod
    def _queue_stats(self, now: Timestamp | None) -> list[QueueStats]: ...


class WorkerGate(ABC):
    """Workers and maintenance leases (``JobStore``)."""

    def worker_register(self, info: WorkerInfo, *, now: Timestamp | None = None) -> None:
        check_now(now)
        self._worker_register(info, now)

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
        check_now(now)
        return self._worker_heartbeat(worker_id, Counters(running, done, failed, rss_bytes), now)

    def worker_stop(
        self, worker_id: str, *, done: int, failed: int, now: Timestamp | None = None
    ) -> None:
        check_now(now)
        self._worker_stop(worker_id, done, failed, now)

    def worker_list(self, *, now: Timestamp | None = None) -> list[WorkerInfo]:
        check_now(now)
        return self._worker_list(now)

    def worker_reap(
        self, *, dead_after: float, gone: Sequence[str] = (), now: Timestamp | None = None
    ) -> list[str]:
        check_now(now)
        return self._worker_reap(check_finite("dead_after", dead_after), gone, now)

    def worker_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        check_now(now)
        return self._worker_prune(check_finite("older_than", older_than), now)

    def maintenance_acquire(
        self, duty: str, owner: str, ttl: float, *, now: Timestamp | None = None
    ) -> bool:
        check_now(now)
        return self._maintenance_acquire(duty, owner, check_finite("ttl", ttl), now)

    @abstractmethod
    def _worker_register(self, info: WorkerInfo, now: Timestamp | None) -> None: ...

    @abstractmethod
    def _worker_heartbeat(
        self, worker_id: str, counters: Counters, now: Timestamp | None
    ) -> bool: ...

    @abstractmethod
    def _worker_stop(
        self, worker_id: str, done: int, failed: int, now: Timestamp | None
    ) -> None: ...

    @abstractmethod
    def _worker_list(self, now: Timestamp | None) -> list[WorkerInfo]: ...

    @abstractmethod
    def _worker_reap(
        self, dead_after: float, gone: Sequence[str], now: Timestamp | None
    ) -> list[str]: ...

    @abstractmethod
    def _worker_prune(self, older_than: float, now: Timestamp | None) -> int: ...

    @abstractmethod
    def _maintenance_acquire(
        self, duty: str, owner: str, ttl: float, now: Timestamp | None
    ) -> bool: ...


class CrawlGate(_SeenMemoGate, ABC):
    """Crawls, seen sets and limit keys (``CrawlStore``)."""

    def crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], *, now: Timestamp | None = None
    ) -> CrawlInfo:
        check_now(now)
        check_specs(start, crawl_given=True)
        if spec.on_finish is not None:
            check_specs([spec.on_finish], crawl_given=True)
        info = self._crawl_create(spec, start, now)
        self._seen_memo.learn_specs(start, info.id)
        return info

    def crawl_pause(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        check_now(now)
        return self._crawl_pause(crawl_id, now)

    def crawl_resume(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        check_now(now)
        return self._crawl_resume(crawl_id, now)

    def crawl_cancel(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        check_now(now)
        return self._crawl_cancel(crawl_id, now)

    def crawl_drop_pending(self, crawl_id: int, *, now: Timestamp | None = None) -> int:
        check_now(now)
        return self._crawl_drop_pending(crawl_id, now)

    def crawl_delete(self, crawl_id: int, *, now: Timestamp | None = None) -> bool:
        check_now(now)
        deleted = self._crawl_delete(crawl_id, now)
        self._seen_memo.forget(crawl_id)
        return deleted

    def seen_add(
        self, crawl_id: int, fingerprints: Sequence[bytes], *, now: Timestamp | None = None
    ) -> list[bool]:
        check_now(now)
        fps = check_fingerprints(fingerprints)
        return found(crawl_id, self._seen_add(crawl_id, fps, now))

    def seen_has(self, crawl_id: int, fingerprints: Sequence[bytes]) -> list[bool]:
        fps = check_fingerprints(fingerprints)
        return found(crawl_id, self._seen_has(crawl_id, fps))

    def seen_known(self, crawl_id: int, fingerprint: bytes) -> bool:
        return self._seen_memo.knows(crawl_id, fingerprint)

    def limit_set(self, key: str, limits: Limits, *, now: Timestamp | None = None) -> None:
        check_now(now)
        self._limit_set(key, limits, now)

    def limit_set_default(
        self, queue: str, limits: Limits | None, *, now: Timestamp | None = None
    ) -> None:
        check_now(now)
        self._limit_set_default(queue, limits)

    def limit_block(self, key: str, until: Timestamp, *, now: Timestamp | None = None) -> None:
        check_now(now)
        self._limit_block(key, check_finite("until", until), now)

    def limit_get(
        self, keys: Sequence[str], *, now: Timestamp | None = None
    ) -> list[KeyLimit | None]:
        check_now(now)
        return self._limit_get(keys) if keys else []

    def limit_list(self, *, limit: int = 100, after: str = "") -> list[KeyLimit]:
        return self._limit_list(limit, after) if limit > 0 else []

    def store_summary(self, *, now: Timestamp | None = None) -> StoreSummary:
        check_now(now)
        return self._store_summary(now)

    @abstractmethod
    def _crawl_create(
        self, spec: CrawlSpec, start: Sequence[JobSpec], now: Timestamp | None
    ) -> CrawlInfo: ...

    @abstractmethod
    def _crawl_pause(self, crawl_id: int, now: Timestamp | None) -> bool: ...

    @abstractmethod
    def _crawl_resume(self, crawl_id: int, now: Timestamp | None) -> bool: ...

    @abstractmethod
    def _crawl_cancel(self, crawl_id: int, now: Timestamp | None) -> bool: ...

    @abstractmethod
    def _crawl_drop_pending(self, crawl_id: int, now: Timestamp | None) -> int: ...

    @abstractmethod
    def _crawl_delete(self, crawl_id: int, now: Timestamp | None) -> bool: ...

    @abstractmethod
    def _seen_add(
        self, crawl_id: int, fingerprints: list[bytes], now: Timestamp | None
    ) -> list[bool] | None: ...

    @abstractmethod
    def _seen_has(self, crawl_id: int, fingerprints: list[bytes]) -> list[bool] | None: ...

    @abstractmethod
    def _limit_set(self, key: str, limits: Limits, now: Timestamp | None) -> None: ...

    @abstractmethod
    def _limit_set_default(self, queue: str, limits: Limits | None) -> None: ...

    @abstractmethod
    def _limit_block(self, key: str, until: float, now: Timestamp | None) -> None: ...

    @abstractmethod
    def _limit_get(self, keys: Sequence[str]) -> list[KeyLimit | None]: ...

    @abstractmethod
    def _limit_list(self, limit: int, after: str) -> list[KeyLimit]: ...

    @abstractmethod
    def _store_summary(self, now: Timestamp | None) -> StoreSummary: ...


class StorageGate(ABC):
    """Crawl results and the cache (``CrawlerStorage``)."""

    def result_add(
        self,
        crawl_id: int,
        items: Sequence[tuple[bytes, str]],
        *,
        now: Timestamp | None = None,
    ) -> list[bool]:
        check_now(now)
        checked = check_results(items)
        return found(crawl_id, self._result_add(crawl_id, checked, now))

    def result_list(
        self, crawl_id: int, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        after, limit = check_page(after, limit)
        return found(crawl_id, self._result_list(crawl_id, after, limit))

    def result_count(self, crawl_id: int) -> int:
        return found(crawl_id, self._result_count(crawl_id))

    def result_get(self, crawl_id: int, keys: Sequence[bytes]) -> list[str | None]:
        checked = [check_fingerprint(key, "a result key") for key in keys]
        return found(crawl_id, self._result_get(crawl_id, checked))

    def cache_get(self, key: str, *, now: Timestamp | None = None) -> str | None:
        check_now(now)
        return self._cache_get(check_cache_key(key), now)

    def cache_set(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> None:
        check_now(now)
        self._cache_set(*self._cache_entry(key, value, ttl), now)

    def cache_add(self, key: str, value: str, ttl: float, *, now: Timestamp | None = None) -> bool:
        check_now(now)
        return self._cache_add(*self._cache_entry(key, value, ttl), now)

    def cache_delete(self, key: str) -> None:
        self._cache_delete(check_cache_key(key))

    @staticmethod
    def _cache_entry(key: str, value: str, ttl: float) -> tuple[str, str, float]:
        return check_cache_key(key), check_text(value, "a cache value"), check_ttl(ttl)

    @abstractmethod
    def _result_add(
        self, crawl_id: int, items: list[tuple[bytes, str]], now: Timestamp | None
    ) -> list[bool] | None: ...

    @abstractmethod
    def _result_list(self, crawl_id: int, after: int, limit: int) -> list[tuple[int, str]] | None:
        """None for an unknown crawl (as every hook that may meet one)."""

    @abstractmethod
    def _result_count(self, crawl_id: int) -> int | None: ...

    @abstractmethod
    def _result_get(self, crawl_id: int, keys: list[bytes]) -> list[str | None] | None:
        """The record of each key, None for a missing one; None for an unknown crawl."""

    @abstractmethod
    def _cache_get(self, key: str, now: Timestamp | None) -> str | None: ...

    @abstractmethod
    def _cache_set(self, key: str, value: str, ttl: float, now: Timestamp | None) -> None: ...

    @abstractmethod
    def _cache_add(self, key: str, value: str, ttl: float, now: Timestamp | None) -> bool: ...

    @abstractmethod
    def _cache_delete(self, key: str) -> None: ...
