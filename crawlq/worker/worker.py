"""The worker loop: claim for free slots, run, report; stop gracefully on SIGTERM.

It talks to the store only through the ``JobStore`` protocol and to its runtime only
through the ``Runtime`` protocol.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any

from crawlq.config import DEAD_AFTER, WorkerSettings
from crawlq.exceptions import ConfigurationError, StoreError
from crawlq.hooks import FailureEvent
from crawlq.jobs import Job, Lease, WorkerInfo
from crawlq.stores.base import (
    ClaimParams,
    Completion,
    Failure,
    JobStore,
    Release,
)
from crawlq.worker.acks import Acker
from crawlq.worker.execute import Outcome, timed_out
from crawlq.worker.heartbeat import Heartbeat
from crawlq.worker.liveness import identity, reclaim
from crawlq.worker.maintenance import EXPIRE_EVERY, PRUNE_EVERY, prune, return_leases
from crawlq.worker.memory import resident_bytes
from crawlq.worker.orphans import leased_to
from crawlq.worker.prefetch import Prefetch
from crawlq.worker.runtimes import RUNTIMES, Runtime, RuntimeContext
from crawlq.worker.scheduler import Scheduler

if TYPE_CHECKING:
    from crawlq.app import App

logger = logging.getLogger("crawlq.worker")

BURST_WAIT = 60.0
"""Longest wait of a burst worker for a job its limit key keeps back (``min_interval``, a
block); a job that may start later than that, or is due later by its own run_at, is left
for the next run."""
LOOK_BEYOND_EVERY = 60.0
"""Seconds between two looks, when idle, for due jobs in queues this worker does not
serve (``_look_beyond_queues``)."""


@dataclass
class _Held:
    """A job this worker holds a lease on."""

    job: Job
    claimed: float
    """Monotonic time of the claim: the store was reachable then."""
    deadline: float | None = None
    """Monotonic time after which the attempt times out; set when it starts."""
    started: float | None = None
    """Monotonic time its slot started it."""


@dataclass
class WorkerCounters:
    """What this worker has done so far."""

    claimed: int = 0
    done: int = 0
    failed: int = 0
    released: int = 0
    """Running jobs given back at shutdown (pending again, the attempt not counted)."""
    snoozed: int = 0
    """Attempts that raised ``Snooze`` (pending again after its delay, not counted)."""
    timed_out: int = 0
    lost: int = 0
    fenced: int = 0
    """Jobs stopped because the store was unreachable for longer than their lease."""
    outcomes: dict[str, int] = field(default_factory=dict)

    def describe(self) -> str:
        """``claimed 9, done 6, failed 3, released 0`` and the other counts that are not 0."""
        text = (
            f"claimed {self.claimed}, done {self.done}, failed {self.failed}, "
            f"released {self.released}"
        )
        counts = (("snoozed", self.snoozed), ("timed out", self.timed_out), ("lost", self.lost))
        return ", ".join([text, *(f"{name} {n}" for name, n in counts if n)])


def failure_event(job: Job, failure: Failure) -> FailureEvent:
    return FailureEvent(
        job=job,
        exception=failure.exception,
        error=failure.error,
        reason=failure.reason,
        retry_delay=failure.retry_delay,
    )


def log_failure(job: Job, failure: Failure) -> None:
    """One line for a failed attempt: ERROR, or INFO when the task itself asked for a retry
    (``Retry``) or raised ``Discard``; then the traceback, at INFO for a job that went dead
    on an ERROR and at DEBUG otherwise."""
    asked = failure.reason == "discarded" or (
        failure.reason == "retry" and failure.retry_delay is not None
    )
    dead = failure.retry_delay is None
    fate = (
        f"dead (reason {failure.reason})"
        if dead
        else f"will be retried in {failure.retry_delay:.1f} s"
    )
    logger.log(
        logging.INFO if asked else logging.ERROR,
        "job %s (task %s) failed on attempt %d of %d: %s; %s",
        job.id,
        job.task,
        job.attempts,
        job.max_attempts,
        failure.exception or failure.reason,
        fate,
    )
    if failure.error.strip() != failure.exception:
        level = logging.INFO if dead and not asked else logging.DEBUG
        logger.log(level, "job %s attempt %d: %s", job.id, job.attempts, failure.error.rstrip())


class Worker:
    """Runs the jobs of an app's queues until stopped (or, in burst mode, until idle).

    ``app_ref`` (``module:attribute``) is how the process runtime's children import the
    app; without it they look for the app among the imported modules.
    """

    def __init__(self, app: App, settings: WorkerSettings, *, app_ref: str | None = None) -> None:
        self.app = app
        self.settings = settings
        self.queues = settings.queues or app.queues()
        if not self.queues:
            raise ConfigurationError(
                "the worker has no queue to take jobs from: register tasks on the app "
                "(@app.task) or name queues with --queue"
            )
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.id = f"{self.host}:{self.pid}:{secrets.token_hex(3)}"
        self.store: JobStore = app.store
        self.counters = WorkerCounters()
        self._held: dict[int, _Held] = {}
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._hurry = threading.Event()
        self.stuck = False
        """True when the worker stopped itself because a job's thread ran past its
        timeout and would not stop (the thread runtime); it should be restarted."""
        self._runtime: Runtime = RUNTIMES[settings.runtime](
            RuntimeContext(
                app=app, worker_id=self.id, settings=settings, hooks=self, app_ref=app_ref
            )
        )
        self._acker = Acker(self.store, self._wakeup.set, inline=True)
        self._prefetch = Prefetch(
            settings.prefetch,
            settings.concurrency,
            batches=self.store.capabilities.batched_claims,
        )
        shortest = min((t.options.lease for t in app.tasks.values()), default=30.0)
        self._heartbeat = Heartbeat(
            self.store, self._leases, shortest, self._lost, registry=self._beat_registry
        )
        self._scheduler = Scheduler(app, self.id, settings.retention)
        self._next_expire = 0.0
        self._next_prune = 0.0
        self._next_look_beyond = 0.0
        self._named_beyond: set[str] = set()
        self._kept_since: float | None = None
        """Monotonic time since which completions wait for a claim (``_keep``)."""
        self._room = (settings.concurrency, 1)
        """(capacity, room) of the last turn: a job's end wakes the loop once ``room`` of
        ``capacity`` is free (``Prefetch.room``)."""
        self._unsure = False
        """A claim call failed: it may have leased jobs that never reached this worker
        (``crawlq.worker.orphans``)."""

    # -- control ---------------------------------------------------------------------

    def stop(self, *, now: bool = False) -> None:
        """Stop claiming; running jobs get the shutdown grace unless ``now``."""
        if now:
            self._hurry.set()
        self._stopping.set()
        self._wakeup.set()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = not self._stopping.is_set()
        logger.warning(
            "received %s: %s",
            signal.Signals(signum).name,
            "stopping after running jobs finish (send again to release them now)"
            if first
            else "releasing running jobs now",
        )
        self.stop(now=not first)

    def _install_signals(self) -> dict[int, Any]:
        """Handle SIGTERM and SIGINT (main thread only); returns the previous handlers."""
        if threading.current_thread() is not threading.main_thread():
            return {}
        return {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}

    # -- the loop --------------------------------------------------------------------

    def run(self) -> None:
        """Work until stopped; returns after a clean shutdown."""
        previous = self._install_signals()
        logger.info(
            "worker %s taking jobs from %s with %d %s slots, %s",
            self.id,
            ", ".join(self.queues),
            self.settings.concurrency,
            self.settings.runtime,
            self._prefetch.describe(),
        )
        self._register()
        self._reclaim()
        self._runtime.start()
        self._acker.start()
        self._heartbeat.start()
        self._scheduler.start()
        try:
            while not self._stopping.is_set():
                if self._step():
                    break
        finally:
            self._shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _step(self) -> bool:
        """One turn of the loop; True when a burst worker has run out of work."""
        self._maintain()
        self._enforce_timeouts()
        self._fence()
        if self._unsure:
            self._give_back_orphans()
        if self._runtime.stuck():
            logger.error(
                "a job's thread ran past its timeout and has not stopped since; stopping this "
                "worker so that it can be restarted (the process runtime kills such jobs: "
                "--runtime process)"
            )
            self.stuck = True
            return True
        extra = self._prefetch.extra()
        capacity, room = self.settings.concurrency + extra, self._prefetch.room(extra)
        with self._lock:
            free = capacity - len(self._held)
            idle = not self._held
            self._room = capacity, room
        # The outcomes of the jobs that ended since the last turn are recorded by this
        # loop (a job's end wakes no acker thread while it runs): completions in the
        # claim's round trip, before it looks; the others just before. A turn claims
        # once ``room`` is free (short jobs wait for the prefetch's room: Prefetch.room;
        # a job's end wakes this loop once it is free); until then completions wait for
        # that claim, for at most the poll timeout.
        outcomes = self._acker.take()
        completions = [o for o in outcomes if isinstance(o, Completion)]
        others = [o for o in outcomes if not isinstance(o, Completion)]
        if free < room:
            if completions and self._keep(completions):
                completions = []
            self._acker.record([*others, *completions])
            self._wait_wakeup(self._wait_timeout())
            return False
        self._kept_since = None
        self._acker.record(others)
        # Quiet before the claim: nothing held and every outcome recorded but the
        # completions the claim records first (outcomes are handed to the acker under the
        # lock that releases a held job), so a claim that then finds nothing means no due
        # job is left, retries included.
        quiet = idle and self._acker.unrecorded == len(completions)
        jobs = self._claim(free, completions)
        if jobs is None:
            return False  # the claim failed (and waited); the next turn tries again
        if len(jobs) < free and self._slots_busy():
            # Every slot busy and nothing more due for the prefetch: wait for a job to
            # end, then record it in the next claim's round trip. (Waiting for work in
            # the store would leave the ends to the acker, a transaction each, and the
            # next claim to the wake-up: a key's next job, due when one of its jobs
            # ends, would start a store round trip and a thread hand-off later.)
            self._wait_wakeup(self._wait_timeout())
            return False
        if jobs:
            return False
        if idle:
            self._look_beyond_queues()
        if self.settings.burst and idle:
            if not quiet or self._unsure:
                if self._acker.retrying:  # the acker thread records the last outcomes
                    self._wait_wakeup(0.05)
                return False  # else the next turn records them, or gives back orphans
            if not self._kept_back():
                return True
        if self.settings.burst and not idle:
            # Nothing to claim and jobs held: wait for one of them to end (the next turn
            # records it and looks again), not for new jobs, which a burst worker is
            # not waiting for.
            self._wait_wakeup(self._wait_timeout())
            return False
        self._wait_for_work(free)
        return False

    def _keep(self, completions: list[Completion]) -> bool:
        """Give ``completions`` back to the acker for the next claim's round trip; False
        (not kept) once completions have waited for a claim for the poll timeout."""
        now = time.monotonic()
        if self._kept_since is None:
            self._kept_since = now
        elif now - self._kept_since >= self.settings.poll_timeout:
            self._kept_since = None
            return False
        self._acker.keep(completions)
        return True

    def _wait_wakeup(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for a wake-up (a job's end, a lost lease, a stop)."""
        self._wakeup.wait(timeout)
        self._wakeup.clear()

    def _slots_busy(self) -> bool:
        """Whether every slot has a job (the held ones beyond are prefetched)."""
        with self._lock:
            return len(self._held) >= self.settings.concurrency

    def _kept_back(self) -> bool:
        """Burst: are jobs of our queues kept back by their limit key only, for a while
        (``min_interval``, a block of at most ``BURST_WAIT`` s, ``max_running`` with jobs
        of the queue running elsewhere)? Jobs due later by their own run_at are not."""
        try:
            if self.store.job_next_gated(self.queues, within=BURST_WAIT) is not None:
                return True
            served = set(self.queues)
            stats = self.store.queue_stats()
        except StoreError as exc:
            logger.warning("could not look for jobs kept back by limits, retrying: %s", exc)
            return True
        return any(s.waiting and s.running for s in stats if s.queue in served)

    def _claim(self, limit: int, completions: list[Completion]) -> list[Job] | None:
        """Record ``completions`` (taken from the acker) and claim up to ``limit`` jobs, in
        one store call; if that fails, the acker's thread records them, and the claim is
        tried alone. None if the claim failed (after a short wait)."""
        params = ClaimParams(queues=self.queues, worker_id=self.id, limit=limit)
        started = time.monotonic()
        try:
            if completions:
                try:
                    applied, jobs = self.store.job_complete_claim(completions, params)
                except StoreError as exc:
                    logger.debug("could not complete jobs with the claim: %s", exc)
                    self._unsure = True
                    self._acker.hand_back(completions)
                    jobs = self.store.job_claim(params)
                else:
                    self._acker.settle("complete", completions, applied)
            else:
                jobs = self.store.job_claim(params)
        except StoreError as exc:
            logger.warning("could not claim jobs, retrying: %s", exc)
            self._unsure = True
            self._away(lambda: self._stopping.wait(0.5))
            return None
        self._prefetch.claimed(time.monotonic() - started)
        self._hold(jobs)
        return jobs

    def _hold(self, jobs: list[Job], *, start: bool = True) -> None:
        """Jobs just claimed: held, and handed to the runtime; released at once instead
        when not to ``start`` (the worker was told to stop while it waited)."""
        claimed = time.monotonic()
        with self._lock:
            for job in jobs:
                self._held[job.id] = _Held(job, claimed)
        self.counters.claimed += len(jobs)
        if not start:
            self._release([job.id for job in jobs])
            return
        for job in jobs:
            self._runtime.submit(job)

    def _look_beyond_queues(self) -> None:
        """Idle: say once which queues this worker does not serve have due jobs (a
        task scheduled under another name waits there for ever). Looks at most every
        ``LOOK_BEYOND_EVERY`` s, and names each queue once."""
        now = time.monotonic()
        if now < self._next_look_beyond:
            return
        self._next_look_beyond = now + LOOK_BEYOND_EVERY
        try:
            stats = self.store.queue_stats()
        except StoreError as exc:
            logger.warning("could not read the queue stats, will retry: %s", exc)
            return
        served = set(self.queues)
        due = [(s.queue, s.due) for s in stats if s.due and s.queue not in served]
        new = [(q, n) for q, n in due if q not in self._named_beyond]
        if not new:
            return
        self._named_beyond.update(q for q, _ in new)
        shown = ", ".join(f"{q} ({n} due)" for q, n in new[:5])
        more = f" and {len(new) - 5} more" if len(new) > 5 else ""
        logger.log(
            logging.INFO if self.settings.queues else logging.WARNING,
            "no job is due in the queues of this worker (%s), but jobs are due in queues it "
            "does not serve: %s%s. A worker takes jobs only from its app's task queues or "
            "--queue; a task scheduled under another name (see 'Task names' in the README) "
            "is never claimed here",
            ", ".join(self.queues),
            shown,
            more,
        )

    def _wait_for_work(self, free: int) -> None:
        """Wait for work, and claim for the ``free`` slots as the wait ends (in the
        wake-up's round trip where the store can: ``job_wait_claim``)."""
        params = ClaimParams(queues=self.queues, worker_id=self.id, limit=free)
        jobs: list[Job] = []

        def wait() -> None:
            jobs.extend(self.store.job_wait_claim(params, self._wait_timeout()))

        try:
            self._away(wait)
        except StoreError as exc:
            logger.warning("could not wait for jobs, retrying: %s", exc)
            self._unsure = True
            self._away(lambda: self._stopping.wait(0.5))
        self._hold(jobs, start=not self._stopping.is_set())
        if jobs:
            # An idle worker's latency: let the slot the hand-off woke take the GIL now,
            # not once the next turn's store call blocks (docs/workers.md).
            time.sleep(0)

    def _away(self, wait: Callable[[], object]) -> None:
        """``wait()``, while which the acker's thread records the outcomes of jobs that
        end (this loop, blocked, cannot)."""
        self._acker.away(True)
        try:
            wait()
        finally:
            self._acker.away(False)

    def _wait_timeout(self) -> float:
        timeout = self.settings.poll_timeout
        now = time.monotonic()
        with self._lock:
            deadlines = [h.deadline for h in self._held.values() if h.deadline is not None]
        if deadlines:
            timeout = min(timeout, max(0.001, min(deadlines) - now))
        return timeout

    # -- running a job ---------------------------------------------------------------

    def begin(self, job: Job) -> bool:
        """The runtime is starting ``job`` (runtime hook); False if no longer ours."""
        with self._lock:
            held = self._held.get(job.id)
            if held is None:
                return False  # released at shutdown, or lost, before it started
            held.started = time.monotonic()
            if job.timeout is not None:
                held.deadline = held.started + job.timeout
        return True

    def end(self, job: Job, outcome: Outcome) -> None:
        """The runtime finished ``job`` (runtime hook)."""
        self._finish(job.id, outcome)

    def _finish(self, job_id: int, outcome: Outcome) -> None:
        """Hand an outcome to the acker, unless the job is no longer ours."""
        with self._lock:
            held = self._held.pop(job_id, None)
            if held is None:
                return
            if held.started is not None:
                self._prefetch.ran(time.monotonic() - held.started)
            # Put under the lock: a burst worker that sees no job held must see this
            # outcome in the acker, or it could stop before the retry it schedules.
            self._acker.put(outcome)
            capacity, room = self._room
            wake = (
                room == 1
                or capacity - len(self._held) >= room
                or not isinstance(outcome, Completion)
            )
        if isinstance(outcome, Failure):
            log_failure(held.job, outcome)
            self.app.failed(failure_event(held.job, outcome))
        kind = type(outcome).__name__.lower()
        self.counters.outcomes[kind] = self.counters.outcomes.get(kind, 0) + 1
        if kind == "completion":
            self.counters.done += 1
        elif kind == "failure":
            self.counters.failed += 1
        elif kind == "release":
            self.counters.snoozed += 1
        if wake:
            self._wakeup.set()

    def _enforce_timeouts(self) -> None:
        now = time.monotonic()
        with self._lock:
            late = [h for h in self._held.values() if h.deadline is not None and h.deadline < now]
        for held in late:
            backoff = self.app.tasks[held.job.task].options.backoff
            self.counters.timed_out += 1
            self._finish(held.job.id, timed_out(held.job, backoff))
            self._runtime.cancel(held.job)

    def _fence(self) -> None:
        """Stop the jobs whose lease may have passed to another worker: the store has
        not been reached (claim or heartbeat) for longer than the job's lease."""
        now = time.monotonic()
        reached = self._heartbeat.last_success
        with self._lock:
            gone = [
                h
                for h in self._held.values()
                if now - max(reached, h.claimed) > h.job.lease_seconds
            ]
            for held in gone:
                del self._held[held.job.id]
        for held in gone:
            logger.error(
                "job %s: the store has been unreachable for longer than its lease of %s s, "
                "so another worker may run it now; stopping it here",
                held.job.id,
                held.job.lease_seconds,
            )
        self.counters.fenced += len(gone)
        self._stop_jobs(gone)

    def _stop_jobs(self, gone: list[_Held]) -> None:
        """Stop the jobs of ``gone`` (already dropped from the held ones): their leases
        are no longer ours, so whatever they would report is not wanted."""
        for held in gone:
            if held.started is not None:
                self._runtime.cancel(held.job)
        if gone:
            self._wakeup.set()

    def _give_back_orphans(self, *, directly: bool = False) -> None:
        """After a failed claim call: give back the running jobs the store says this
        worker holds and it does not (``crawlq.worker.orphans``), once every outcome is
        recorded (a job that ended is no longer held, and its outcome must not meet a
        give-back first). Tried again on later turns until it has looked. ``directly``:
        at shutdown, with the acker stopped, release them here."""
        if not self._acker.idle:
            return
        try:
            leased = leased_to(self.store, self.id, self.queues)
        except StoreError as exc:
            logger.warning("could not look for jobs leased here by a failed claim: %s", exc)
            return
        with self._lock:
            if not self._acker.idle:
                return  # a job ended meanwhile: look again once its outcome is recorded
            orphans = [job for job in leased if job.id not in self._held]
        self._unsure = False
        if not orphans:
            return
        logger.warning(
            "giving back %d jobs that a claim whose reply was lost leased to this worker: %s",
            len(orphans),
            [job.id for job in orphans],
        )
        releases = [Release(lease=job.lease) for job in orphans]
        if directly:
            try:
                self.store.job_release(releases)
            except StoreError as exc:
                logger.warning("could not give them back (their lease will expire): %s", exc)
            return
        for release in releases:
            self._acker.put(release)

    # -- leases ----------------------------------------------------------------------

    def _leases(self) -> list[Lease]:
        with self._lock:
            return [h.job.lease for h in self._held.values()]

    def _lost(self, job_id: int) -> None:
        with self._lock:
            held = self._held.pop(job_id, None)
        if held is not None:
            self.counters.lost += 1
            logger.warning(
                "lost the lease of job %s (expired or cancelled); its outcome will be dropped",
                job_id,
            )
            self._wakeup.set()

    # -- the worker's record, and maintenance ------------------------------------------

    def _info(self) -> WorkerInfo:
        return WorkerInfo(
            id=self.id,
            host=self.host,
            pid=self.pid,
            process=identity(self.pid),
            queues=tuple(self.queues),
            runtime=self.settings.runtime,
            concurrency=self.settings.concurrency,
        )

    def _register(self) -> None:
        try:
            self.store.worker_register(self._info())
        except StoreError as exc:
            logger.warning("could not register this worker, will retry: %s", exc)

    def _reclaim(self) -> None:
        """Return at once the jobs of the workers of this machine whose process has gone
        (``crawlq.worker.liveness``), rather than after their heartbeat lapses."""
        try:
            dead = reclaim(self.store, host=self.host, me=self.id)
        except StoreError as exc:
            logger.warning("could not look for crashed workers on this machine: %s", exc)
            return
        if dead:
            logger.warning(
                "took back the jobs of workers declared dead (process gone from this "
                "machine, or heartbeat overdue): %s",
                dead,
            )

    def _beat_registry(self) -> None:
        """Heartbeat this worker's record. If the store declared it dead (it went quiet
        for longer than DEAD_AFTER), its jobs were given back: stop them, register anew."""
        with self._lock:
            running = sum(1 for h in self._held.values() if h.started is not None)
        try:
            alive = self.store.worker_heartbeat(
                self.id,
                running=running,
                done=self.counters.done,
                failed=self.counters.failed,
                rss_bytes=resident_bytes(os.getpid()),
            )
        except StoreError as exc:
            logger.warning("worker heartbeat failed, will retry: %s", exc)
            return
        if alive:
            return
        with self._lock:
            gone = list(self._held.values())
            self._held.clear()
        logger.error(
            "the store declared this worker dead (no heartbeat for %s s) and gave its %d "
            "jobs to other workers; stopping them here and registering again",
            DEAD_AFTER,
            len(gone),
        )
        self.counters.lost += len(gone)
        self._stop_jobs(gone)
        self._register()

    def _maintain(self) -> None:
        """Return expired leases and dead workers' jobs, prune old jobs and records: each
        duty done by one worker at a time, under a lease on the duty."""
        now = time.monotonic()
        try:
            if now >= self._next_expire:
                self._next_expire = now + EXPIRE_EVERY
                return_leases(self.store, self.id)
            if now >= self._next_prune:
                self._next_prune = now + PRUNE_EVERY
                prune(self.store, self.id, self.settings.retention)
        except StoreError as exc:
            logger.warning("maintenance failed, will retry: %s", exc)

    # -- shutdown --------------------------------------------------------------------

    def _shutdown(self) -> None:
        """Release unstarted jobs, give running ones the grace period, release the rest."""
        self._scheduler.stop()
        self._acker.away(True)  # this loop now only waits for the running jobs
        self._release([j.id for j in self._runtime.take_unstarted()])
        deadline = time.monotonic() + self.settings.shutdown_grace
        while not self._hurry.is_set():
            with self._lock:
                if not self._held:
                    break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._wait_wakeup(min(remaining, 0.05))
            self._enforce_timeouts()
        with self._lock:
            leftover = list(self._held)
        if leftover:
            logger.warning("releasing %d running jobs at shutdown: %s", len(leftover), leftover)
        self._release(leftover)
        self._runtime.stop()
        self._heartbeat.stop()
        self._acker.stop()
        if self._unsure:
            self._give_back_orphans(directly=True)
        try:
            self.store.worker_stop(self.id, done=self.counters.done, failed=self.counters.failed)
        except StoreError as exc:
            logger.warning("could not record this worker's stop: %s", exc)
        logger.info("worker %s stopped: %s", self.id, self.counters.describe())

    def _release(self, job_ids: list[int]) -> None:
        for job_id in job_ids:
            with self._lock:
                held = self._held.pop(job_id, None)
            if held is not None:
                self.counters.released += 1
                self._acker.put(Release(lease=held.job.lease))
