"""The App: a registry of tasks bound to one store."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, overload

from crawlq.config import DEFAULT_MAX_PAYLOAD_BYTES, DEFAULT_STORE_URL, WorkerSettings
from crawlq.exceptions import ConfigurationError, TaskNotFound
from crawlq.jobs import Job, JobSpec, QueueStats, ScheduleResult, WorkerInfo
from crawlq.payload import encode_arguments
from crawlq.stores import Store, open_store
from crawlq.tasks import Task, make_options

if TYPE_CHECKING:
    from crawlq.worker.worker import Worker

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
        if max_payload_bytes < 1:
            raise ConfigurationError("max_payload_bytes must be a positive number of bytes")
        self._store_url = store if isinstance(store, str) else None
        self._store: Store | None = None if isinstance(store, str) else store
        self._store_lock = threading.Lock()
        self.max_payload_bytes = max_payload_bytes
        self.tasks: dict[str, Task[Any, Any]] = {}

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
        if self._store is None:
            with self._store_lock:
                if self._store is None:
                    assert self._store_url is not None
                    self._store = open_store(self._store_url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    # -- tasks -----------------------------------------------------------------------

    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...

    @overload
    def task(
        self, fn: None = None, /, *, name: str | None = None, **options: Any
    ) -> Callable[[Callable[P, R]], Task[P, R]]: ...

    def task(
        self, fn: Callable[P, R] | None = None, /, *, name: str | None = None, **options: Any
    ) -> Task[P, R] | Callable[[Callable[P, R]], Task[P, R]]:
        """Register a function as a task: ``@app.task`` or ``@app.task(max_attempts=5)``.

        Options are those of ``crawlq.tasks.TaskOptions``; an unknown one is refused here.
        """

        def register(f: Callable[P, R]) -> Task[P, R]:
            task_name = name or f"{f.__module__}.{f.__qualname__}"
            if task_name in self.tasks:
                raise ConfigurationError(
                    f"a task named {task_name!r} is already registered; pass name=... to "
                    "tell them apart"
                )
            task: Task[P, R] = Task(self, f, task_name, make_options(task_name, options))
            self.tasks[task_name] = task
            return task

        return register if fn is None else register(fn)

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
        *,
        delay: float | None = None,
        at: datetime | float | None = None,
        key: str | None = None,
        priority: int | None = None,
    ) -> JobSpec:
        """Check arguments and options of one call and return its JobSpec."""
        if delay is not None and at is not None:
            raise ConfigurationError(
                f"task {task.name!r} was given both delay= and at=; give one of them"
            )
        if key is not None and not isinstance(key, str):
            raise ConfigurationError(f"key must be a str, not {type(key).__name__}")
        task.check_call(args, kwargs)
        plain_args, plain_kwargs = encode_arguments(
            task.name, args, kwargs, names=task.arg_names, max_bytes=self.max_payload_bytes
        )
        options = task.options
        return JobSpec(
            queue=options.queue,
            task=task.name,
            args=plain_args,
            kwargs=plain_kwargs,
            key=key,
            priority=options.priority if priority is None else int(priority),
            delay=float(delay or 0.0),
            run_at=at.timestamp() if isinstance(at, datetime) else at,
            max_attempts=options.max_attempts,
            lease_seconds=options.lease,
            timeout=options.timeout,
            on_conflict=options.on_conflict,
        )

    def schedule_many(self, specs: Iterable[JobSpec]) -> list[ScheduleResult]:
        """Schedule many jobs in one transaction; one result per spec."""
        return self.store.job_schedule(list(specs))

    # -- looking and acting ----------------------------------------------------------

    def get_job(self, job_id: int) -> Job | None:
        return self.store.job_get(job_id)

    def cancel(self, *job_ids: int) -> list[int]:
        """Cancel pending or running jobs; returns the ids that were cancelled."""
        return self.store.job_cancel(job_ids)

    def stats(self) -> list[QueueStats]:
        return self.store.queue_stats()

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, alive ones first (see ``Store.worker_list``)."""
        return self.store.worker_list()

    def worker(self, settings: WorkerSettings | None = None) -> Worker:
        """A worker for this app's tasks (``worker.run()`` blocks until it stops)."""
        from crawlq.worker.worker import Worker

        return Worker(self, settings or WorkerSettings())
