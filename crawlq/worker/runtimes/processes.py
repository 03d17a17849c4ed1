"""The process runtime: N child processes, one job at a time each.

For CPU work and for tasks that leak (headless browsers): a child is replaced after
``max_jobs_per_child`` jobs or once its resident memory (its browser's too) is above
``max_memory_per_child``, between two jobs, so no job is lost or failed by recycling. A
job over its timeout, or one the worker lost the lease of, is stopped by killing its
child. A child that dies under a job (SIGKILL, segfault, out of memory) fails that
attempt with reason ``worker_lost``; it is never recorded as done.

Children are started with ``spawn`` and import the app by reference (``module:attr``);
they never talk to the store: a job goes down a pipe as JSON and its outcome (result,
children to schedule, failure) comes back as JSON, and the worker records it.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Job, JobState, spec_from_json, spec_to_json
from crawlq.stores.base import Completion, Failure, Release
from crawlq.stores.codec import records_from_json, records_json
from crawlq.worker.execute import Outcome, backoff_of, execute, lost
from crawlq.worker.memory import tree_resident_bytes
from crawlq.worker.runtimes import SlotQueue

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.worker.runtimes import RuntimeContext

logger = logging.getLogger("crawlq.worker")

READY = b"ready"
START_TIMEOUT = 120.0
"""Seconds a new child may take to import the app and say it is ready."""
STOP_GRACE = 5.0
"""Seconds a child gets to exit after being told to, before it is killed."""


# -- the wire: jobs down, outcomes up, as JSON --------------------------------------


def job_to_wire(job: Job) -> bytes:
    return json.dumps(asdict(job)).encode()


def job_from_wire(data: bytes) -> Job:
    fields = json.loads(data)
    fields["state"] = JobState(fields["state"])
    return Job(**fields)


def outcome_to_wire(outcome: Outcome) -> bytes:
    if isinstance(outcome, Completion):
        children = [spec_to_json(spec) for spec in outcome.children]
        body: dict[str, Any] = {"kind": "complete", "result": outcome.result, "children": children}
        body["records"] = records_json(outcome.records)
    elif isinstance(outcome, Failure):
        body = {"kind": "fail", "error": outcome.error, "retry_delay": outcome.retry_delay}
        body["reason"], body["exception"] = outcome.reason, outcome.exception
        body["records"] = records_json(outcome.records)
    else:
        body = {"kind": "release", "delay": outcome.delay}
    return json.dumps(body).encode()


def outcome_from_wire(job: Job, data: bytes) -> Outcome:
    body = json.loads(data)
    if body["kind"] == "complete":
        children = tuple(spec_from_json(fields) for fields in body["children"])
        records = records_from_json(body["records"])
        return Completion(
            lease=job.lease, result=body["result"], children=children, records=records
        )
    if body["kind"] == "fail":
        return Failure(
            lease=job.lease,
            error=body["error"],
            retry_delay=body["retry_delay"],
            reason=body["reason"],
            exception=body["exception"],
            records=records_from_json(body["records"]),
        )
    return Release(lease=job.lease, delay=body["delay"])


# -- the child ----------------------------------------------------------------------


def find_app_reference(app: App) -> str:
    """``module:attribute`` under which ``app`` can be imported again in a child."""
    found: str | None = None
    for name, module in list(sys.modules.items()):
        if module is None or name.startswith("crawlq.") or name == "__mp_main__":
            continue
        for attr, value in list(vars(module).items()):
            if value is app:
                if name != "__main__":
                    return f"{name}:{attr}"
                found = found or f"__main__:{attr}"
    if found is None:
        raise ConfigurationError(
            "the process runtime imports the app again in each child process, so the app "
            "must be a module-level variable (e.g. `app = crawlq.App(...)` in myjobs.py); "
            "pass its reference with --app myjobs:app"
        )
    return found


def import_app(ref: str) -> App:
    module_name, _, attr = ref.partition(":")
    module = sys.modules["__main__"] if module_name == "__main__" else None
    if module is None:
        module = importlib.import_module(module_name)
    obj: Any = module
    for part in (attr or "app").split("."):
        obj = getattr(obj, part)
    app: App = obj
    return app


def _die_with_parent() -> None:
    """Linux: get SIGKILL when the worker process dies (best effort elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def child_main(
    app_ref: str,
    store_url: str | None,
    worker_id: str,
    log_level: int,
    setups: tuple[str, ...],
    conn: Connection,
) -> None:
    """A child's life: import the app, run again the set-ups the worker's app ran
    (``crawlq.setups``), then run jobs from ``conn`` until told to stop."""
    # The worker decides when its children stop: a Ctrl-C or SIGTERM sent to the whole
    # process group must not interrupt a job here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = import_app(app_ref)
    if store_url is not None:
        app.use_store(store_url)
    app.setups.run_again(app, setups)
    conn.send_bytes(READY)
    while True:
        try:
            data = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the worker is gone
        if not data:
            return
        job = job_from_wire(data)
        outcome = execute(app, job, worker_id)
        conn.send_bytes(outcome_to_wire(outcome))


# -- the worker's side ----------------------------------------------------------------


class _Child:
    """One child process and the worker's end of its pipe."""

    def __init__(self, args: tuple[str, str | None, str, int, tuple[str, ...]], slot: int) -> None:
        """``args``: what ``child_main`` takes before its pipe."""
        mp = multiprocessing.get_context("spawn")
        ours, theirs = mp.Pipe()
        self.proc = mp.Process(
            target=child_main,
            args=(*args, theirs),
            name=f"crawlq-child-{slot}",
            daemon=True,
        )
        self.proc.start()
        theirs.close()
        self.conn = ours
        self.jobs = 0
        self.ready = False

    def wait_ready(self) -> str | None:
        """Wait until the child imported the app; None when ready, else what went wrong."""
        if self.ready:
            return None
        try:
            if self.conn.poll(START_TIMEOUT) and self.conn.recv_bytes() == READY:
                self.ready = True
                return None
        except (EOFError, OSError):
            pass
        self.kill()
        return (
            f"{self.death()} before it was ready: it could not import the app "
            "(its traceback is in the worker's log above)"
        )

    @property
    def pid(self) -> int:
        return self.proc.pid or 0

    def run(self, job: Job) -> bytes | None:
        """Send ``job``, wait for its outcome; None if the child died first."""
        try:
            self.conn.send_bytes(job_to_wire(job))
            return self.conn.recv_bytes()
        except (EOFError, OSError):
            return None

    def death(self) -> str:
        """How the child ended, for the error message."""
        self.proc.join(timeout=1.0)
        code = self.proc.exitcode
        if code is None:
            return "its child process stopped answering"
        if code < 0:
            return f"its child process {self.pid} was killed by {signal.Signals(-code).name}"
        return f"its child process {self.pid} exited with code {code}"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            if self.proc.is_alive():
                os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Ask the child to exit, wait a little, then kill it."""
        with contextlib.suppress(OSError):
            self.conn.send_bytes(b"")
        self.proc.join(timeout=STOP_GRACE)
        if self.proc.is_alive():
            self.kill()
            self.proc.join(timeout=STOP_GRACE)
        self.conn.close()


class ProcessRuntime(SlotQueue):
    def __init__(self, ctx: RuntimeContext) -> None:
        super().__init__()
        self._ctx = ctx
        self.app_ref = ctx.app_ref or find_app_reference(ctx.app)
        self._child_args = (
            self.app_ref,
            ctx.app.store_url,
            ctx.worker_id,
            logger.getEffectiveLevel(),
            ctx.app.setups.references(),
        )
        self._lock = threading.Lock()
        self._running: dict[int, _Child] = {}
        self._children: dict[int, _Child] = {}  # by slot
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self.recycled = 0

    def start(self) -> None:
        for slot in range(self._ctx.settings.concurrency):
            self._children[slot] = _Child(self._child_args, slot)
        for child in self._children.values():
            problem = child.wait_ready()
            if problem is not None:
                for other in self._children.values():
                    other.kill()
                raise ConfigurationError(
                    f"process runtime: a child process importing {self.app_ref!r}: {problem}"
                )
        for slot in range(self._ctx.settings.concurrency):
            thread = threading.Thread(
                target=self._loop, args=(slot,), name=f"crawlq-slot-{slot}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def _loop(self, slot: int) -> None:
        hooks = self._ctx.hooks
        while True:
            with self._lock:
                child = self._children[slot]
            problem = child.wait_ready()
            if problem is not None:
                logger.error("process runtime, slot %d: %s; trying again in 5 s", slot, problem)
                if self._stopping.wait(5.0):
                    return
                self._replace(slot, child)
                continue
            job = self.next_job()
            if job is None:
                return
            if not hooks.begin(job):
                continue
            with self._lock:
                self._running[job.id] = child
            data = child.run(job)
            with self._lock:
                self._running.pop(job.id, None)
            outcome: Outcome
            if data is None:
                why = child.death()
                if not self._stopping.is_set():
                    logger.warning("job %s: %s; starting a new child", job.id, why)
                outcome = lost(job, backoff_of(self._ctx.app, job), why)
            else:
                outcome = outcome_from_wire(job, data)
                child.jobs += 1
            hooks.end(job, outcome)
            if self._stopping.is_set():
                continue
            if data is None:
                self._replace(slot, child)
            else:
                self._maybe_recycle(slot, child)

    def _maybe_recycle(self, slot: int, child: _Child) -> None:
        settings = self._ctx.settings
        why = None
        if settings.max_jobs_per_child and child.jobs >= settings.max_jobs_per_child:
            why = f"it ran {child.jobs} jobs (--max-jobs-per-child {settings.max_jobs_per_child})"
        elif settings.max_memory_per_child:
            rss = tree_resident_bytes(child.pid)
            if rss is not None and rss > settings.max_memory_per_child:
                why = (
                    f"it uses {rss / 2**20:.0f} MiB "
                    f"(--max-memory-per-child {settings.max_memory_per_child / 2**20:.0f} MiB)"
                )
        if why is not None:
            logger.info("recycling child process %s of slot %d: %s", child.pid, slot, why)
            self.recycled += 1
            child.close()
            self._replace(slot, child)

    def _replace(self, slot: int, old: _Child) -> None:
        old.kill()
        with contextlib.suppress(OSError):
            old.conn.close()
        new = _Child(self._child_args, slot)
        with self._lock:
            self._children[slot] = new

    def cancel(self, job: Job) -> None:
        with self._lock:
            child = self._running.get(job.id)
        if child is not None:
            logger.warning("stopping job %s: killing its child process %s", job.id, child.pid)
            child.kill()

    def stuck(self) -> int:
        return 0

    def stop(self) -> None:
        self._stopping.set()
        self.stop_slots(len(self._threads))
        with self._lock:
            running = list(self._running.values())
        for child in running:
            child.kill()  # the worker has released these jobs already
        deadline = time.monotonic() + STOP_GRACE
        for thread in self._threads:
            thread.join(timeout=max(0.1, deadline - time.monotonic()))
        with self._lock:
            children = list(self._children.values())
        for child in children:
            child.close()
