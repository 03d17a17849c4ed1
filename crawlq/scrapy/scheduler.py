"""``crawlq.scrapy.Scheduler``: Scrapy's scheduler on a crawlq crawl.

Two threads share the work. The reactor thread (Scrapy's) only touches local memory:
``enqueue_request`` appends a job spec to a write buffer, ``next_request`` pops a leased
job from the ready buffer, ``has_pending_requests`` reads flags. A feeder thread does
every store call, in this order on each turn: store the buffered requests (one
``job_schedule``), acknowledge the processed ones (one ``job_complete``; a request is thus
stored before the response that produced it is acknowledged), give back released ones,
renew leases, read the crawl's state, and claim as many jobs as the buffer has room for.
It hands claimed jobs to the reactor through a deque and wakes the engine at once
(``crawlq.scrapy.engine``), so a job held back by a limit or a delay is fetched when it
becomes due, not at Scrapy's next 5-second heartbeat.

A job is acknowledged when Scrapy has fully processed its request: the download, every
redirect and retry (they carry the job's id in ``meta`` and stay that job), the callback
or errback and the requests and items it produced. A process killed with ``kill -9`` loses
nothing: its leases lapse (or the next process on the same machine sees it gone) and
other processes claim its jobs again.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawlq.config import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_STORE_URL
from crawlq.crawls import CrawlState
from crawlq.exceptions import ConfigurationError, CrawlClosed, CrawlqError, StoreError
from crawlq.jobs import Job, JobSpec, Lease, Outcome, WorkerInfo
from crawlq.limits import Limits
from crawlq.scrapy import crawls, engine
from crawlq.scrapy.codec import JOB_META, Unserializable, decode, encode
from crawlq.stores import open_store
from crawlq.stores.base import ClaimParams, Completion, Release, Store
from crawlq.worker.liveness import identity, reclaim
from crawlq.worker.maintenance import EXPIRE_EVERY, return_leases

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger("crawlq.scrapy")

DELAY_META = "crawlq_delay"
"""``meta`` key: seconds from now before the request may be fetched."""
LOCAL_SEEN_MAX = 200_000
"""Fingerprints this process remembers to skip writing obvious duplicates (the crawl's
seen set in the store is the one that decides); forgotten all at once past this size."""
CRAWL_CHECK_EVERY = 0.2
"""Seconds between two reads of the crawl's state (finished, paused, cancelled)."""
WORKER_BEAT_EVERY = 5.0
IDLE_WAIT = 0.05
"""Longest sleep of the feeder between two claims while the buffer has room."""
GATHER = 0.005
"""Seconds the feeder lets requests and acknowledgements gather after it is woken, so
that each store call carries a batch rather than one."""


@dataclass(frozen=True, kw_only=True)
class SchedulerSettings:
    """The ``CRAWLQ_*`` Scrapy settings, checked once."""

    store: str = DEFAULT_STORE_URL
    crawl: str = ""
    prefetch: int = 8
    lease_seconds: float = 30.0
    max_attempts: int = 3
    limits: Limits | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, spider_name: str) -> SchedulerSettings:
        s = crawler.settings
        limits = s.getdict("CRAWLQ_HOST_LIMITS") or None
        try:
            return cls(
                store=s.get("CRAWLQ_STORE") or DEFAULT_STORE_URL,
                crawl=s.get("CRAWLQ_CRAWL") or spider_name,
                prefetch=s.getint("CRAWLQ_PREFETCH", s.getint("CONCURRENT_REQUESTS") // 2),
                lease_seconds=s.getfloat("CRAWLQ_LEASE_SECONDS", 30.0),
                max_attempts=s.getint("CRAWLQ_MAX_ATTEMPTS", 3),
                limits=Limits(**limits) if limits else None,
            )
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"a CRAWLQ_* setting is not valid: {exc}") from None


@dataclass
class _Shared:
    """What both threads touch, under ``lock``."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    writes: list[tuple[JobSpec, str]] = field(default_factory=list)
    acks: list[Completion] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    leases: dict[int, Lease] = field(default_factory=dict)
    """Every request job this process holds: ready, in flight or being processed."""
    seeds: dict[int, Lease] = field(default_factory=dict)
    """Seeding sentinels this process holds."""


class Scheduler:
    """A Scrapy scheduler whose queue, dedup and politeness are a crawlq crawl's."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.spider: Spider | None = None
        self.settings: SchedulerSettings | None = None
        self.store: Store | None = None
        self.crawl_id = 0
        self.queue = ""
        self.worker_id = f"scrapy-{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
        self._shared = _Shared()
        self._ready: deque[Job] = deque()
        self._redo: deque[Request] = deque()
        """Redirects and retries of held jobs: fetched before new jobs, never stored."""
        self._current: dict[int, Request] = {}
        """Job id -> the request of it the engine is processing now."""
        self._responded: set[int] = set()
        self._local_seen: set[bytes] = set()
        self._state = CrawlState.RUNNING
        self._start_done = threading.Event()
        self._asked = threading.Event()
        """Set at the engine's first ``next_request``: no job is leased before the engine
        can fetch it (a limit key's interval starts at the claim)."""
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._call_soon: Any = None
        self._cancel_seen = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Scheduler:
        return cls(crawler)

    # -- opening and closing (may block: called once) --------------------------------

    def open(self, spider: Spider) -> None:
        from scrapy import signals

        self.spider = spider
        name = getattr(spider, "crawlq_crawl", None) or spider.name
        settings = SchedulerSettings.from_crawler(self.crawler, name)
        if getattr(spider, "crawlq_crawl", None):
            settings = SchedulerSettings(**{**settings.__dict__, "crawl": name})
        self.settings = settings
        self.queue = crawls.queue_of(settings.crawl)
        self.store = store = open_store(settings.store)
        host = socket.gethostname()
        info = WorkerInfo(
            id=self.worker_id,
            host=host,
            pid=os.getpid(),
            process=identity(os.getpid()),
            queues=(self.queue, crawls.seed_queue_of(settings.crawl)),
            runtime="scrapy",
            concurrency=self.crawler.settings.getint("CONCURRENT_REQUESTS"),
        )
        store.worker_register(info)
        gone = reclaim(store, host=host, me=self.worker_id)
        if gone:
            logger.warning("took back the requests of crashed processes: %s", gone)
        crawl, seed = crawls.join(
            store,
            settings.crawl,
            meta={"scrapy_spider": spider.name},
            limits=settings.limits,
            lease_seconds=settings.lease_seconds,
            worker_id=self.worker_id,
        )
        if seed is not None:
            self._shared.seeds[seed.id] = seed.lease
        self.crawl_id = crawl.id
        self._state = crawl.state
        self.stats.set_value("crawlq/crawl_id", crawl.id)
        logger.info(
            "crawlq: %s joined crawl %s (%r) on %s",
            self.worker_id,
            crawl.id,
            settings.crawl,
            settings.store,
        )
        self._call_soon = engine.thread_safe_caller()
        engine.on_request_done(self.crawler, self._processed)
        engine.preload_download_handlers(self.crawler)
        self.crawler.signals.connect(self._on_response, signal=signals.response_received)
        self._thread = threading.Thread(target=self._feed, name="crawlq-feeder", daemon=True)
        self._thread.start()

    def close(self, reason: str) -> None:
        """Store what is buffered, acknowledge what was processed, give back the rest."""
        self._start_done.set()
        with self._shared.lock:
            unused = self._take_ready()
            if self._redo or self._current:
                held = [self._shared.leases.pop(i) for i in list(self._shared.leases)]
                self._shared.releases.extend(Release(lease=lease) for lease in held)
        self.stats.inc_value("crawlq/released", len(unused))
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(60)
        if self.store is not None:
            try:
                self.store.worker_stop(self.worker_id, done=0, failed=0)
            except StoreError as exc:
                logger.warning("crawlq: could not record this process's stop: %s", exc)
            self.store.close()
        logger.info("crawlq: closed (%s) on crawl %s", reason, self.crawl_id)

    def _take_ready(self) -> list[Lease]:
        """Empty the ready buffer into releases (under the lock; either thread)."""
        unused = []
        while True:
            try:
                job = self._ready.popleft()  # atomic: the other thread may append
            except IndexError:
                break
            lease = self._shared.leases.pop(job.id, None)
            if lease is not None:
                unused.append(lease)
        self._shared.releases.extend(Release(lease=lease) for lease in unused)
        return unused

    # -- the engine's calls (reactor thread, memory only) ----------------------------

    def has_pending_requests(self) -> bool:
        if self._ready or self._redo or self._shared.writes or self._shared.acks:
            return True
        return self._state in (CrawlState.RUNNING, CrawlState.PAUSED)

    def __len__(self) -> int:
        return len(self._ready) + len(self._redo)

    def enqueue_request(self, request: Request) -> bool:
        job_id = request.meta.get(JOB_META)
        if job_id in self._current and job_id not in self._responded:
            # a redirect or retry of a job this process holds: the same job
            self._current[job_id] = request
            self._redo.append(request)
            self.stats.inc_value("crawlq/redirects_and_retries")
            return True
        spec = self._spec(request)
        if spec is None:
            return False
        with self._shared.lock:
            self._shared.writes.append((spec, request.url))
        self._wake.set()
        self.stats.inc_value("crawlq/enqueued")
        return True

    def next_request(self) -> Request | None:
        if not self._asked.is_set():
            self._asked.set()
            self._wake.set()
        if self._redo:
            return self._redo.popleft()
        while self._ready:
            job = self._ready.popleft()
            if job.id not in self._shared.leases:
                continue  # its lease was lost
            try:
                request = decode(str(job.args[0]), self.spider)
            except Exception as exc:
                logger.error("crawlq: job %s holds no request Scrapy can read: %s", job.id, exc)
                self.stats.inc_value("crawlq/undecodable")
                self._ack(job.id)
                continue
            request.meta[JOB_META] = job.id
            self._current[job.id] = request
            self.stats.inc_value("crawlq/dequeued")
            self._wake.set()  # room in the buffer
            return request
        return None

    # -- requests to job specs -------------------------------------------------------

    def _spec(self, request: Request) -> JobSpec | None:
        assert self.settings is not None
        fingerprint = self._fingerprint(request)
        if fingerprint is not None:
            if fingerprint in self._local_seen:
                self.stats.inc_value("dupefilter/filtered")
                return None
            if len(self._local_seen) >= LOCAL_SEEN_MAX:
                self._local_seen.clear()
            self._local_seen.add(fingerprint)
        try:
            text = encode(request, self.spider)
        except Unserializable as exc:
            logger.error(
                "crawlq: refused %s: it cannot be stored as JSON (%s); give it a callback "
                "that is a method of the spider and JSON-friendly meta and cb_kwargs",
                request,
                exc,
            )
            self.stats.inc_value("crawlq/unserializable")
            return None
        if len(text) > DEFAULT_MAX_PAYLOAD_BYTES:
            logger.error("crawlq: refused %s: %d bytes stored is too large", request, len(text))
            self.stats.inc_value("crawlq/unserializable")
            return None
        delay = request.meta.get(DELAY_META) or 0.0
        assert self.crawler.engine is not None
        return JobSpec(
            queue=self.queue,
            task=crawls.REQUEST_TASK,
            args=[text],
            priority=int(request.priority),
            delay=float(delay),
            max_attempts=self.settings.max_attempts,
            lease_seconds=self.settings.lease_seconds,
            crawl=self.crawl_id,
            limit_key=self.crawler.engine.downloader.get_slot_key(request) or None,
            fingerprint=fingerprint,
        )

    def _fingerprint(self, request: Request) -> bytes | None:
        """16 bytes of ``crawler.request_fingerprinter``'s fingerprint; None for
        ``dont_filter`` requests, except start requests: those are keyed apart, so that
        every process seeding the crawl stores each start request once."""
        fingerprint = self.crawler.request_fingerprinter.fingerprint(request)
        if not request.dont_filter:
            return fingerprint[:16]
        if request.meta.get("is_start_request"):
            return hashlib.blake2b(b"start:" + fingerprint, digest_size=16).digest()
        return None

    # -- acknowledgement -------------------------------------------------------------

    def _on_response(self, response: Response, request: Request) -> None:
        job_id = request.meta.get(JOB_META)
        if job_id is not None and self._current.get(job_id) is request:
            self._responded.add(job_id)

    def _processed(self, request: Request) -> None:
        """The engine is done with ``request``: acknowledge its job if it is the job's
        current request (not one a redirect or retry replaced)."""
        job_id = request.meta.get(JOB_META)
        if job_id is not None and self._current.get(job_id) is request:
            self._ack(job_id)

    def _ack(self, job_id: int) -> None:
        self._current.pop(job_id, None)
        self._responded.discard(job_id)
        with self._shared.lock:
            lease = self._shared.leases.pop(job_id, None)
            if lease is not None:
                self._shared.acks.append(Completion(lease=lease))
        self._wake.set()

    # -- reactor-side reactions to the feeder ----------------------------------------

    def _nudge(self) -> None:
        """Run on the reactor thread: new jobs or a new crawl state."""
        if self._state is CrawlState.CANCELLED and not self._cancel_seen:
            self._cancel_seen = True
            logger.warning("crawlq: crawl %s was cancelled: closing", self.crawl_id)
            engine.close_spider(self.crawler, "cancelled")
            return
        engine.wake(self.crawler)

    def _tell_reactor(self) -> None:
        try:
            self._call_soon(self._nudge)
        except RuntimeError:
            pass  # the loop is closed: the process is ending

    # -- the feeder thread -----------------------------------------------------------

    def _feed(self) -> None:
        timers = {
            "crawl": 0.0,
            "leases": 0.0,
            "expire": 0.0,
            "worker": time.monotonic(),
            "sweep": time.monotonic(),
        }
        while True:
            stopping = self._stop.is_set()
            try:
                busy = self._turn(timers, stopping)
            except CrawlqError as exc:
                logger.warning("crawlq: store call failed, will retry: %s", exc)
                busy = False
                time.sleep(0.5)
            if stopping:
                with self._shared.lock:
                    left = self._shared.writes or self._shared.acks or self._shared.releases
                if not left:
                    self._finish_seeds()
                    return
                continue
            if not busy and self._wake.wait(IDLE_WAIT):
                time.sleep(GATHER)
            self._wake.clear()

    def _turn(self, timers: dict[str, float], stopping: bool) -> bool:
        assert self.store is not None and self.settings is not None
        store = self.store
        now = time.monotonic()
        busy = self._flush()
        if now >= timers["leases"]:
            timers["leases"] = now + self.settings.lease_seconds / 3
            self._renew()
        if now >= timers["expire"]:
            timers["expire"] = now + EXPIRE_EVERY
            return_leases(store, self.worker_id)
        if now >= timers["worker"]:
            timers["worker"] = now + WORKER_BEAT_EVERY
            store.worker_heartbeat(
                self.worker_id, running=len(self._shared.leases), done=0, failed=0, rss_bytes=None
            )
        if now >= timers["crawl"]:
            timers["crawl"] = now + CRAWL_CHECK_EVERY
            self._check_crawl()
        if stopping:
            return busy
        self._seeding(timers, now)
        return self._claim() or busy

    def _flush(self) -> bool:
        assert self.store is not None
        with self._shared.lock:
            writes, self._shared.writes = self._shared.writes, []
            acks, self._shared.acks = self._shared.acks, []
            releases, self._shared.releases = self._shared.releases, []
        if writes:
            try:
                results = self.store.job_schedule([spec for spec, _ in writes])
            except CrawlClosed:
                logger.warning(
                    "crawlq: crawl %s is closed: %d requests not stored", self.crawl_id, len(writes)
                )
                results = []
            except CrawlqError:
                with self._shared.lock:
                    self._shared.writes[:0] = writes
                    self._shared.acks[:0] = acks
                    self._shared.releases[:0] = releases
                raise
            seen = sum(1 for r in results if r.outcome is Outcome.SEEN)
            self.stats.inc_value("crawlq/stored", len(results) - seen)
            if seen:
                self.stats.inc_value("crawlq/filtered_by_crawl", seen)
        if acks:
            done = self.store.job_complete(acks)
            self.stats.inc_value("crawlq/acked", sum(done))
            if not all(done):
                self.stats.inc_value("crawlq/ack_stale", done.count(False))
        if releases:
            self.store.job_release(releases)
        return bool(writes or acks or releases)

    def _renew(self) -> None:
        assert self.store is not None
        with self._shared.lock:
            leases = list(self._shared.leases.values()) + list(self._shared.seeds.values())
        if not leases:
            return
        alive = self.store.job_heartbeat(leases)
        lost = [lease for lease, ok in zip(leases, alive, strict=True) if not ok]
        if lost:
            logger.warning("crawlq: lost the lease of %d jobs: %s", len(lost), lost)
            self.stats.inc_value("crawlq/leases_lost", len(lost))
            with self._shared.lock:
                for lease in lost:
                    self._shared.leases.pop(lease.job_id, None)
                    self._shared.seeds.pop(lease.job_id, None)

    def _check_crawl(self) -> None:
        assert self.store is not None
        info = self.store.crawl_get(self.crawl_id)
        state = CrawlState.CANCELLED if info is None else info.state
        if state is self._state:
            return
        logger.info("crawlq: crawl %s is %s", self.crawl_id, state)
        if state is not CrawlState.RUNNING:
            with self._shared.lock:
                self._take_ready()
        self._state = state
        self._tell_reactor()

    def _seeding(self, timers: dict[str, float], now: float) -> None:
        """Hold a seeding sentinel while ``start()`` runs, then complete it; now and then
        complete the sentinels of processes that died seeding: claimed again after their
        lease lapsed (attempts > 1), or never claimed for a lease's length (the process
        died between scheduling and claiming it)."""
        assert self.store is not None and self.settings is not None
        if not self._start_done.is_set():
            if engine.start_exhausted(self.crawler):
                self._start_done.set()
                self._wake.set()  # flush the last start requests next turn, then complete
            elif not self._shared.seeds and self._state is CrawlState.RUNNING:
                seed = crawls.claim_seed(self.store, self.settings.crawl, self.worker_id)
                if seed is not None:
                    with self._shared.lock:
                        self._shared.seeds[seed.id] = seed.lease
            return
        self._finish_seeds()
        if now < timers["sweep"] or self._state is not CrawlState.RUNNING:
            return
        timers["sweep"] = now + self.settings.lease_seconds / 2
        name = self.settings.crawl
        jobs = self.store.job_claim(
            ClaimParams(queues=[crawls.seed_queue_of(name)], worker_id=self.worker_id, limit=10)
        )
        late = self.settings.lease_seconds
        orphan = [j.attempts > 1 or (j.started_at or 0) - j.created_at > late for j in jobs]
        orphans = [Completion(lease=j.lease) for j, o in zip(jobs, orphan, strict=True) if o]
        fresh = [Release(lease=j.lease) for j, o in zip(jobs, orphan, strict=True) if not o]
        if orphans:
            self.store.job_complete(orphans)
        if fresh:
            self.store.job_release(fresh)

    def _finish_seeds(self) -> None:
        assert self.store is not None
        with self._shared.lock:
            seeds, self._shared.seeds = list(self._shared.seeds.values()), {}
        if not seeds:
            return
        if self._start_done.is_set():
            self.store.job_complete([Completion(lease=lease) for lease in seeds])
        else:
            self.store.job_release([Release(lease=lease) for lease in seeds])

    def _claim(self) -> bool:
        assert self.store is not None and self.settings is not None
        if self._state is not CrawlState.RUNNING or not self._asked.is_set():
            return False
        capacity = self.crawler.settings.getint("CONCURRENT_REQUESTS") + self.settings.prefetch
        room = capacity - len(self._shared.leases)
        if room <= 0 or (room < capacity // 4 and len(self._ready) > 1):
            return False  # claim in batches while the buffer still has work
        jobs = self.store.job_claim(
            ClaimParams(queues=[self.queue], worker_id=self.worker_id, limit=room)
        )
        if not jobs:
            return False
        with self._shared.lock:
            self._shared.leases.update((j.id, j.lease) for j in jobs)
        self._ready.extend(jobs)
        self.stats.inc_value("crawlq/claimed", len(jobs))
        self._tell_reactor()
        return True
