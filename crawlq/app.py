"""The App: a registry of tasks bound to one store."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, Unpack, cast, overload

from crawlq.config import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_STORE_URL, store_command
from crawlq.crawls import (
    OPEN_CRAWL_STATES,
    CrawlInfo,
    CrawlSpec,
    CrawlState,
    check_placement,
    check_seen_has_crawl,
    no_such_crawl,
)
from crawlq.exceptions import (
    ConfigurationError,
    CrawlClosed,
    CrawlNotFound,
    CrawlOpen,
    TaskNotFound,
)
from crawlq.fingerprint import fingerprint_of
from crawlq.hooks import FailureEvent, Hook, check_hook, run_hooks
from crawlq.jobs import Job, JobSpec, QueueStats, ScheduleResult, WorkerInfo
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import MAX_EXACT, check_count, check_name, check_seconds, encode_arguments
from crawlq.results import job_id_of, result_of, wait_finished
from crawlq.setups import Setups
from crawlq.specs import ScheduleOptions, check_when
from crawlq.stores import Store, open_store
from crawlq.tasks import Task, TaskDecorator, default_name, make_options

__all__ = ["App", "check_when"]

if TYPE_CHECKING:
    from crawlq.schedules import Schedules

P = ParamSpec("P")
R = TypeVar("R")


class App:
    """Tasks and the store their jobs live in.

    ``store`` is a store URL (``sqlite:///jobs.db``, the default ``sqlite:///crawlq.db``)
    or an open ``Store``. A URL is opened on first use, so importing a module that builds
    an App touches nothing; ``crawlq --store`` can still point the app elsewhere.
    ``max_payload_bytes`` caps a job's encoded arguments (default 512 KiB).
    """

    def __init__(
        self,
        store: str | Store = DEFAULT_STORE_URL,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        check_count("max_payload_bytes", max_payload_bytes, 1)
        self._store_url = store if isinstance(store, str) else None
        self._store: Store | None = None if isinstance(store, str) else store
        self._store_lock = threading.Lock()
        self.max_payload_bytes = max_payload_bytes
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.failure_hooks: list[Hook] = []
        self.dead_hooks: list[Hook] = []
        self.setups = Setups()
        """Functions that set this app up (``setup``): run again on the app a process
        runtime's child imports."""

    # -- the store -------------------------------------------------------------------

    @property
    def store_url(self) -> str | None:
        return self._store_url

    def use_store(self, store: str | Store) -> None:
        """Point the app at another store; only before it has been opened."""
        if self._store is not None:
            raise ConfigurationError("the app's store is already open; call use_store first")
        self._store_url = store if isinstance(store, str) else None
        self._store = None if isinstance(store, str) else store

    @property
    def store(self) -> Store:
        """The store, opened on first use."""
        return self._store if self._store is not None else self.open()

    def open(self, *, create: bool = True) -> Store:
        """Open the store now if it is not open yet, and return it. ``create=False`` is
        for a caller that only looks at what the store holds: a missing SQLite file is
        refused, not created (see ``open_store``)."""
        if self._store is None:
            with self._store_lock:
                if self._store is None:
                    assert self._store_url is not None
                    self._store = open_store(self._store_url, create=create)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- tasks -----------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[Concatenate[Any, P], R], /) -> Task[P, R]: ...

    @overload
    def task(self, fn: Callable[..., R], /) -> Task[..., R]: ...  # type: ignore[overload-cannot-match]

    @overload
    def task(
        self, fn: None = None, /, *, name: str | None = None, **options: Any
    ) -> TaskDecorator: ...

    def task(
        self, fn: Callable[..., Any] | None = None, /, *, name: str | None = None, **options: Any
    ) -> Task[Any, Any] | TaskDecorator:
        """Register a function as a task: ``@app.task`` or ``@app.task(max_attempts=5)``.

        Options are those of ``crawlq.tasks.TaskOptions``; an unknown one is refused here.
        Without ``name=`` the task is named ``module.function`` as ``import`` names the
        module, also when it runs as a script (``crawlq.tasks.default_name``).
        """

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            task_name = name or default_name(f)
            if task_name in self.tasks:
                raise ConfigurationError(
                    f"a task named {task_name!r} is already registered; pass name=... to "
                    "tell them apart"
                )
            task: Task[Any, Any] = Task(self, f, task_name, make_options(task_name, options))
            self.tasks[task_name] = task
            return task

        return cast(TaskDecorator, register) if fn is None else register(fn)

    def setup(self, fn: Callable[[App], object]) -> Callable[[App], object]:
        """Run ``fn(app)`` now, and again on the app each child process of the process
        runtime imports (by ``module:name``, so ``fn`` is a module-level function). An
        extension that registers tasks on an app it did not define (the crawler's
        ``install``) sets the app up this way; see ``crawlq.setups``."""
        self.setups.run(self, fn)
        return fn

    def periodic(
        self, cron: str | None = None, /, **options: Any
    ) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function as a task that runs on a schedule: ``@app.periodic("0 */6
        * * *", tz="Europe/Berlin")`` (cron, five fields or six with seconds first) or
        ``@app.periodic(every=timedelta(hours=6))``. Schedule options: ``args``,
        ``kwargs`` and ``key`` of its jobs, ``tz``, ``catch_up`` ("once" or "skip"),
        ``overlap``, ``grace`` and ``schedule_name``; every other option is the task's,
        as for ``@app.task``. Stacked on a task, it adds a schedule to it. Workers of
        the app store the schedule when they start; see ``crawlq.periodic``."""
        return self.schedules.decorator(cron, options)

    @functools.cached_property
    def schedules(self) -> Schedules:
        """The periodic schedules: declared in code, and held by the store."""
        from crawlq.schedules import Schedules

        return Schedules(self)

    def on_failure(self, hook: Hook) -> Hook:
        """Register ``hook(event)`` for every failed attempt of every task (a decorator);
        see ``crawlq.hooks``."""
        self.failure_hooks.append(check_hook("on_failure", hook) or hook)
        return hook

    def on_dead(self, hook: Hook) -> Hook:
        """Register ``hook(event)`` for every job of every task that goes dead (a
        decorator); see ``crawlq.hooks``."""
        self.dead_hooks.append(check_hook("on_dead", hook) or hook)
        return hook

    def failed(self, event: FailureEvent) -> None:
        """Run the hooks of a failed attempt: the task's, then the app's."""
        task = self.tasks.get(event.job.task)
        on_failure = task.options.on_failure if task is not None else None
        run_hooks([*filter(None, [on_failure]), *self.failure_hooks], event)
        if event.dead:
            on_dead = task.options.on_dead if task is not None else None
            run_hooks([*filter(None, [on_dead]), *self.dead_hooks], event)

    def get_task(self, name: str) -> Task[Any, Any]:
        try:
            return self.tasks[name]
        except KeyError:
            raise TaskNotFound(
                f"no task named {name!r} on this app; known: {sorted(self.tasks) or 'none'}"
            ) from None

    def queues(self) -> tuple[str, ...]:
        """The queues of every registered task, sorted."""
        return tuple(sorted({t.options.queue for t in self.tasks.values()}))

    # -- scheduling ------------------------------------------------------------------

    def build_spec(
        self,
        task: Task[Any, Any],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        **options: Unpack[ScheduleOptions],
    ) -> JobSpec:
        """Check arguments and options of one call and return its JobSpec
        (``task.spec_for``)."""
        return task.spec_for(args, kwargs, **options)

    def schedule_many(self, specs: Iterable[JobSpec]) -> list[ScheduleResult]:
        """Schedule many jobs in one transaction; one result per spec."""
        batch = list(specs)
        check_seen_has_crawl(batch)
        return self.store.job_schedule(batch)

    # -- looking and acting ----------------------------------------------------------

    def get_job(self, job_id: int) -> Job | None:
        return self.store.job_get(check_count("job id", job_id, 1))

    def wait(self, job: int | ScheduleResult, *, timeout: float | None = None) -> Job:
        """Block until the job (an id, or what ``task.schedule`` returned) is done, dead
        or cancelled, and return it. Woken by the store's notification of its end, not by
        polling. ``WaitTimeout`` (a ``TimeoutError``) after ``timeout`` seconds (None:
        wait as long as it takes); ``JobNotFound`` if there is no such job."""
        return wait_finished(self.store, job_id_of(job), timeout)

    def result(self, job: int | ScheduleResult, *, timeout: float | None = None) -> Any:
        """Wait for the job as ``wait`` does and return what its task returned (as JSON);
        ``JobFailed`` (with the job's last error) if it is dead, ``JobCancelled`` if it
        was cancelled, ``WaitTimeout`` if it did not finish within ``timeout`` s."""
        return result_of(self.wait(job, timeout=timeout))

    def cancel(self, *job_ids: int) -> list[int]:
        """Cancel pending or running jobs; returns the ids that were cancelled."""
        return self.store.job_cancel([check_count("job id", i, 1) for i in job_ids])

    def reschedule(
        self, *job_ids: int, delay: float | None = None, at: datetime | float | None = None
    ) -> list[int]:
        """Move pending jobs to ``at``, or ``delay`` seconds from now (neither: due now),
        as a schedule with ``on_conflict="replace"`` would; a job held by its paused crawl
        or its limit key stays held. Returns the ids moved (running and finished jobs are
        not)."""
        if delay is not None and at is not None:
            raise ConfigurationError("give delay= or at=, not both")
        delay, run_at, _ = check_when(delay, at, None, None)
        ids = [check_count("job id", i, 1) for i in job_ids]
        if run_at is None and delay:
            run_at = self.store.now() + delay
        return self.store.job_reschedule(ids, run_at)

    def stats(self) -> list[QueueStats]:
        return self.store.queue_stats()

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, alive ones first (see ``Store.worker_list``)."""
        return self.store.worker_list()

    # -- crawls ---------------------------------------------------------------------

    def crawl(
        self,
        name: str,
        start: Iterable[JobSpec] = (),
        *,
        meta: Mapping[str, Any] | None = None,
        on_finish: Task[Any, Any] | JobSpec | None = None,
        on_finish_kwargs: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
    ) -> CrawlInfo:
        """Create a crawl and schedule its first jobs (``task.spec(...)``) into it, at once.

        The crawl finishes when none of its jobs is pending or running, once; then
        ``on_finish`` (a task, with ``on_finish_kwargs``, or a spec) is scheduled with
        ``crawl_id=`` set in its keyword arguments. ``limits`` are the defaults of the
        limit keys its jobs are the first to use.
        """
        check_name(name, "a crawl's name")
        _, plain_meta = encode_arguments(
            f"crawl {name} (meta)", (), meta or {}, max_bytes=self.max_payload_bytes
        )
        finish: JobSpec | None
        if isinstance(on_finish, Task):
            # checked with a stand-in crawl_id: the task must accept one; the store sets it
            kwargs = {**(on_finish_kwargs or {}), "crawl_id": 0}
            stand_in = on_finish.spec_for((), kwargs)
            kept = {k: v for k, v in stand_in.kwargs.items() if k != "crawl_id"}
            finish = replace(stand_in, kwargs=kept)
        elif on_finish_kwargs is not None:
            raise ConfigurationError("on_finish_kwargs go with on_finish=task, not with a spec")
        else:
            finish = on_finish
        crawl = CrawlSpec(name=name, meta=plain_meta, on_finish=finish, limits=limits)
        return self.store.crawl_create(crawl, list(start))

    def get_crawl(self, crawl_id: int) -> CrawlInfo:
        """One crawl; ``CrawlNotFound`` if there is none with this id."""
        info = self.store.crawl_get(check_count("crawl id", crawl_id, 1))
        if info is None:
            raise self._no_such_crawl(crawl_id)
        return info

    def crawls(
        self, *, state: CrawlState | None = None, limit: int | None = None
    ) -> list[CrawlInfo]:
        """Crawls in id order (only those in ``state`` if given)."""
        if limit is not None:
            check_count("limit", limit, -MAX_EXACT)
        return self.store.crawl_list(state=state, limit=limit)

    def pause_crawl(self, crawl_id: int) -> CrawlInfo:
        """Hold the crawl's pending jobs until ``resume_crawl``; pausing twice is allowed."""
        return self._crawl_change(crawl_id, self.store.crawl_pause, "paused", CrawlState.PAUSED)

    def resume_crawl(self, crawl_id: int) -> CrawlInfo:
        """Let a paused crawl's jobs run again; resuming a running crawl changes nothing."""
        return self._crawl_change(crawl_id, self.store.crawl_resume, "resumed", CrawlState.RUNNING)

    def cancel_crawl(self, crawl_id: int) -> CrawlInfo:
        """Cancel the crawl's pending jobs; running ones finish and add nothing."""
        return self._crawl_change(
            crawl_id, self.store.crawl_cancel, "cancelled", CrawlState.CANCELLED
        )

    def delete_crawl(self, crawl_id: int, *, force: bool = False) -> CrawlInfo:
        """Delete a crawl with its jobs, results and seen set; the crawl as it was.

        An open (running or paused) crawl is refused with ``CrawlOpen`` unless ``force``:
        then it is cancelled first (running pages finish but add nothing, their outcome
        is dropped) and deleted.
        """
        info = self.get_crawl(crawl_id)
        if info.state in OPEN_CRAWL_STATES:
            if not force:
                raise CrawlOpen(
                    f"crawl {crawl_id} is {info.state}: cancel it first (crawl-cancel "
                    f"{crawl_id}), or delete it anyway with --force (force=True)"
                )
            self.store.crawl_cancel(crawl_id)  # no page added while the jobs go
        if not self.store.crawl_delete(crawl_id):
            raise self._no_such_crawl(crawl_id)  # deleted meanwhile
        return info

    def _no_such_crawl(self, crawl_id: int) -> CrawlNotFound:
        """The error for a missing crawl, whose hint names this app's store when it has a URL."""
        if self._store_url is None:
            return no_such_crawl(crawl_id)
        return no_such_crawl(crawl_id, store_command("crawls", self._store_url))

    def _crawl_change(
        self, crawl_id: int, change: Callable[[int], bool], verb: str, target: CrawlState
    ) -> CrawlInfo:
        try:
            changed = change(check_count("crawl id", crawl_id, 1))
        except CrawlNotFound:
            raise self._no_such_crawl(crawl_id) from None
        info = self.get_crawl(crawl_id)
        if not changed and info.state is not target and info.state not in OPEN_CRAWL_STATES:
            raise CrawlClosed(f"crawl {crawl_id} is {info.state}: it cannot be {verb}")
        return info

    def seen_add(self, crawl_id: int, keys: Iterable[str]) -> list[bool]:
        """Add URLs (or keys) to the crawl's seen set; True for each that was new.

        URLs are compared in canonical form (``crawlq.fingerprint``).
        """
        crawl_id = check_count("crawl id", crawl_id, 1)
        return self.store.seen_add(crawl_id, [fingerprint_of(k) for k in keys])

    # -- limits ----------------------------------------------------------------------

    def set_limit(
        self, key: str, *, max_running: int | None = None, min_interval: float = 0.0
    ) -> None:
        """Override the limits of one key (a host), on every worker."""
        check_placement(None, key, None)
        self.store.limit_set(key, Limits(max_running=max_running, min_interval=min_interval))

    def set_default_limit(self, queue: str, limits: Limits | None) -> None:
        """The limits a new key of ``queue``'s jobs takes (None removes the default)."""
        self.store.limit_set_default(check_name(queue, "queue name"), limits)

    def block_key(self, key: str, seconds: float) -> None:
        """Start no job of ``key`` for ``seconds`` from now, on every worker."""
        check_placement(None, key, None)
        seconds = check_seconds("block seconds", seconds, zero=True)
        store = self.store
        store.limit_block(key, store.now() + seconds)

    def limits(self, *keys: str) -> list[KeyLimit | None]:
        """The state of each key (None for a key the store has no record of)."""
        return self.store.limit_get(keys)
