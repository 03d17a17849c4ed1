"""``Launcher``: runs each leased job as Scrapyd does, renews its lease while the spider
process lives, and records how it ended."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from twisted.internet import reactor as _reactor
from twisted.internet import task
from twisted.internet.error import ProcessDone

from crawlq.config import DEFAULT_RETENTION_SECONDS
from crawlq.exceptions import CrawlqError
from crawlq.jobs import Job, JobState, Lease, WorkerInfo
from crawlq.retry import Backoff, decide
from crawlq.scrapyd.config import ScrapydSettings, app_for, log_to_scrapyd, worker_id
from crawlq.scrapyd.poller import JOB_KEY, off_reactor
from crawlq.stores.base import Completion, Failure, Release, Store
from crawlq.worker.acks import Acker
from crawlq.worker.heartbeat import Heartbeat
from crawlq.worker.liveness import identity, reclaim
from crawlq.worker.maintenance import EXPIRE_EVERY, PRUNE_EVERY, prune, return_leases

from scrapyd.interfaces import IEnvironment  # isort: skip  (after the check in queue.py)
from scrapyd.launcher import Launcher as ScrapydLauncher  # isort: skip
from scrapyd.launcher import ScrapyProcessProtocol, get_crawl_args  # isort: skip

if TYPE_CHECKING:
    from crawlq.app import App

logger = logging.getLogger("crawlq.scrapyd")
reactor: Any = _reactor  # twisted types the global reactor by its interfaces only

TAIL_BYTES = 4000
"""How much of the end of a failed spider's log becomes the job's error."""
BACKOFF = Backoff()
"""The retry backoff of a failed spider run."""


class SpiderProcess(ScrapyProcessProtocol):  # type: ignore[misc]
    """Scrapyd's process protocol, which also keeps how the process ended and the end of
    what it wrote on stderr."""

    def __init__(self, *args: Any, log_file: str | None = None) -> None:
        super().__init__(*args)
        self.log_file = log_file
        self.exit_code: int | None = None
        self.ended_by: str = ""
        self.stderr: deque[bytes] = deque(maxlen=64)

    def errReceived(self, data: bytes) -> None:
        self.stderr.append(data)
        super().errReceived(data)

    def processEnded(self, status: Any) -> None:
        value = status.value
        self.exit_code = 0 if isinstance(value, ProcessDone) else value.exitCode
        if getattr(value, "signal", None):
            self.ended_by = f"killed by signal {value.signal}"
        else:
            self.ended_by = f"exit status {self.exit_code}"
        super().processEnded(status)

    def tail(self) -> str:
        """The end of the spider's log file, or of its stderr without one."""
        text = b""
        if self.log_file:
            try:
                with open(self.log_file, "rb") as log:
                    log.seek(max(0, os.path.getsize(self.log_file) - TAIL_BYTES))
                    text = log.read()
            except OSError:
                text = b""
        if not text:
            text = b"".join(self.stderr)[-TAIL_BYTES:]
        return text.decode("utf-8", "replace")


class _OpenedOnUse:
    """The app's store, opened by the first call that needs it (and again by the next
    call if that failed): the acker and the heartbeat retry their calls, so a store
    that is down when Scrapyd starts only delays them."""

    def __init__(self, app: App) -> None:
        self._app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app.store, name)


@dataclass
class _Running:
    job: Job
    claimed: float
    """Monotonic time of the claim: the store was reachable then."""
    lost: bool = False


class Launcher(ScrapydLauncher):  # type: ignore[misc]
    """``launcher = crawlq.scrapyd.Launcher``: Scrapyd's launcher, plus leases.

    Each spider process holds the lease of its job, renewed (about three times per
    ``crawlq_lease``) while the process lives. Exit status 0 completes the job; any other
    end fails it (retried after a backoff until ``crawlq_max_attempts``, then dead) with
    the end of the spider's log as the error. A renewal the store refuses means the job
    was cancelled (``cancel.json`` on any server: the spider gets SIGINT, as Scrapyd's
    cancel sends) or its lease passed to another server (SIGTERM); so does a store that
    stays unreachable for longer than the lease. If this server is killed, its jobs'
    leases lapse and other servers run them again.
    """

    def __init__(self, config: Any, app: Any) -> None:
        super().__init__(config, app)
        log_to_scrapyd()
        self.settings = ScrapydSettings.from_config(config)
        self.crawlq = app_for(self.settings)
        self.worker_id = worker_id(self.settings)
        self.running: dict[int, _Running] = {}
        """slot -> the job its process runs (touched in the reactor thread only)."""
        self._leases_lock = threading.Lock()
        self._leases: dict[int, Lease] = {}
        """slot -> lease to renew (read by the heartbeat thread)."""
        self.done = 0
        self.failed = 0
        self._acker: Acker | None = None
        self._heartbeat: Heartbeat | None = None
        self._loops: list[task.LoopingCall] = []
        self._maintaining = False
        self._next_prune = 0.0

    # -- service -------------------------------------------------------------------

    def startService(self) -> None:
        store = cast(Store, _OpenedOnUse(self.crawlq))  # a store that is down is no reason
        self._acker = Acker(store, lambda: None)
        self._heartbeat = Heartbeat(
            store,
            self._held_leases,
            self.settings.lease,
            lambda job_id: reactor.callFromThread(self._lease_lost, job_id),
            registry=self._beat_registry,
        )
        self._acker.start()
        self._heartbeat.start()
        off_reactor(self._register)
        fence = task.LoopingCall(self._fence)
        maintain = task.LoopingCall(self._maintain)
        self._loops = [fence, maintain]
        fence.start(1.0, now=False)
        maintain.start(EXPIRE_EVERY, now=True)
        super().startService()

    def stopService(self) -> None:
        """Stop the spiders and give their jobs back (another server runs them)."""
        for loop in self._loops:
            if loop.running:
                loop.stop()
        for slot, run in list(self.running.items()):
            process = self.processes.get(slot)
            if process is not None and not run.lost:
                run.lost = True
                self._signal(process, signal.SIGTERM)
        with self._leases_lock:
            leases = list(self._leases.values())
            self._leases.clear()
        if self._heartbeat is not None:
            self._heartbeat.stop()
        if self._acker is not None:
            for lease in leases:
                self._acker.put(Release(lease=lease))
            self._acker.stop()
        try:
            self.crawlq.store.worker_stop(self.worker_id, done=self.done, failed=self.failed)
        except CrawlqError as exc:
            logger.warning("could not record this server's stop: %s", exc)
        super().stopService()

    # -- processes -----------------------------------------------------------------

    def _spawn_process(self, message: dict[str, Any], slot: int) -> None:
        job: Job | None = message.pop(JOB_KEY, None)
        environment = self.app.getComponent(IEnvironment)
        message.setdefault("settings", {})
        message["settings"].update(environment.get_settings(message))
        env = environment.get_environment(message, slot)
        args = [sys.executable, "-m", self.runner, "crawl", *get_crawl_args(message)]
        process = SpiderProcess(
            message["_project"],
            message["_spider"],
            message["_job"],
            env,
            args,
            log_file=message["settings"].get("LOG_FILE"),
        )
        process.deferred.addBoth(self._process_finished, slot)
        if job is not None:
            self.running[slot] = _Running(job, time.monotonic())
            with self._leases_lock:
                self._leases[slot] = job.lease
        reactor.spawnProcess(process, sys.executable, args=args, env=env)
        self.processes[slot] = process

    def _process_finished(self, result: Any, slot: int) -> None:
        process = self.processes.get(slot)
        run = self.running.pop(slot, None)
        with self._leases_lock:
            self._leases.pop(slot, None)
        if run is not None and not run.lost and isinstance(process, SpiderProcess):
            self._record(run.job, process)
        super()._process_finished(result, slot)

    def _record(self, job: Job, process: SpiderProcess) -> None:
        assert self._acker is not None
        if process.exit_code == 0:
            self.done += 1
            self._acker.put(Completion(lease=job.lease))
            return
        self.failed += 1
        error = f"spider process ended with {process.ended_by}; its log ends:\n{process.tail()}"
        decision = decide(
            exc=RuntimeError(process.ended_by),
            error=error,
            attempts=job.attempts,
            max_attempts=job.max_attempts,
            backoff=BACKOFF,
        )
        logger.error(
            "job %s (%s/%s) failed on attempt %d of %d: %s; %s",
            process.job,
            process.project,
            process.spider,
            job.attempts,
            job.max_attempts,
            process.ended_by,
            "dead" if decision.delay is None else f"will be retried in {decision.delay:.1f} s",
        )
        self._acker.put(
            Failure(
                lease=job.lease,
                error=decision.error,
                retry_delay=decision.delay,
                reason=decision.reason,
                exception=f"RuntimeError: {process.ended_by}",
            )
        )

    @staticmethod
    def _signal(process: Any, sig: int) -> None:
        try:
            process.transport.signalProcess(sig)
        except Exception as exc:  # the process is already gone
            logger.debug("could not signal process %s: %s", process.pid, exc)

    # -- leases --------------------------------------------------------------------

    def _held_leases(self) -> list[Lease]:
        with self._leases_lock:
            return list(self._leases.values())

    def _slot_of(self, job_id: int) -> int | None:
        for slot, run in self.running.items():
            if run.job.id == job_id:
                return slot
        return None

    def _lease_lost(self, job_id: int) -> None:
        """The store refused to renew a lease: cancelled, or given to another server."""
        slot = self._slot_of(job_id)
        if slot is None:
            return
        run = self.running[slot]
        run.lost = True
        with self._leases_lock:
            self._leases.pop(slot, None)
        looked = off_reactor(self.crawlq.store.job_get, job_id)
        looked.addCallback(self._stop_lost, slot, job_id)
        looked.addErrback(lambda _: self._stop_lost(None, slot, job_id))

    def _stop_lost(self, job: Job | None, slot: int, job_id: int) -> None:
        process = self.processes.get(slot)
        if process is None:
            return
        if job is not None and job.state is JobState.CANCELLED:
            logger.warning("job %s was cancelled: stopping its spider (SIGINT)", process.job)
            self._signal(process, signal.SIGINT)
        else:
            logger.error(
                "job %s: its lease is no longer ours (expired, or the job was claimed "
                "again); stopping its spider here (SIGTERM)",
                process.job,
            )
            self._signal(process, signal.SIGTERM)

    def _fence(self) -> None:
        """Stop the spiders whose lease may have passed to another server: the store has
        not been reached for longer than the lease."""
        if self._heartbeat is None:
            return
        now = time.monotonic()
        reached = self._heartbeat.last_success
        for slot, run in list(self.running.items()):
            if run.lost or now - max(reached, run.claimed) <= run.job.lease_seconds:
                continue
            run.lost = True
            with self._leases_lock:
                self._leases.pop(slot, None)
            logger.error(
                "job %s: the store has been unreachable for longer than its lease of %s s, "
                "so another server may run it now; stopping its spider here (SIGTERM)",
                run.job.id,
                run.job.lease_seconds,
            )
            process = self.processes.get(slot)
            if process is not None:
                self._signal(process, signal.SIGTERM)

    # -- this server's record and maintenance --------------------------------------

    def _info(self) -> WorkerInfo:
        return WorkerInfo(
            id=self.worker_id,
            host=self.settings.node,
            pid=os.getpid(),
            process=identity(os.getpid()),
            queues=(),
            runtime="process",
            concurrency=self.max_proc,
        )

    def _register(self) -> None:
        store = self.crawlq.store
        try:
            store.worker_register(self._info())
            dead = reclaim(store, host=self.settings.node, me=self.worker_id)
        except CrawlqError as exc:
            logger.warning("could not register this server in the crawlq store: %s", exc)
            return
        if dead:
            logger.warning("took back the jobs of servers whose process has gone: %s", dead)

    def _beat_registry(self) -> None:
        """Heartbeat this server's record (heartbeat thread); register again if it was
        declared dead (its leases were then returned: their renewals are refused)."""
        try:
            alive = self.crawlq.store.worker_heartbeat(
                self.worker_id,
                running=len(self._held_leases()),
                done=self.done,
                failed=self.failed,
                rss_bytes=None,
            )
            if not alive:
                logger.error("the crawlq store declared this server dead: registering again")
                self._register()
        except CrawlqError as exc:
            logger.warning("heartbeat of this server failed, will retry: %s", exc)

    def _maintain(self) -> None:
        if self._maintaining:
            return
        self._maintaining = True
        done = off_reactor(self._maintain_now)
        done.addErrback(lambda failure: logger.warning("maintenance failed: %s", failure.value))
        done.addBoth(lambda _: setattr(self, "_maintaining", False))

    def _maintain_now(self) -> None:
        store = self.crawlq.store
        return_leases(store, self.worker_id)
        now = time.monotonic()
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_EVERY
            prune(store, self.worker_id, DEFAULT_RETENTION_SECONDS)
