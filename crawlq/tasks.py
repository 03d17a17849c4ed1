"""The ``@app.task`` decorator's product: a ``Task`` that knows how to schedule itself."""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

from crawlq.config import DEFAULT_LEASE_SECONDS, DEFAULT_MAX_ATTEMPTS
from crawlq.exceptions import ConfigurationError, PayloadError
from crawlq.hooks import Hook, check_hook
from crawlq.jobs import ConflictPolicy, JobSpec, ScheduleResult
from crawlq.payload import MAX_COUNT, check_count, check_name, check_priority, check_seconds
from crawlq.retry import Backoff

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.context import JobContext

P = ParamSpec("P")
R = TypeVar("R")

MAIN_MODULES = ("__main__", "__mp_main__")
"""What a script's module is called when run (``python keys.py``, ``python -m keys``) and
in the process runtime's children (``multiprocessing`` spawn)."""


def default_name(fn: Callable[..., Any]) -> str:
    """The name of a task registered without ``name=``: ``module.qualname``, the module
    named as ``import`` names it. A script's functions are named as if it were imported:
    ``python keys.py`` and ``crawlq worker --app keys:app`` both name ``disc`` of keys.py
    ``keys.disc`` (``pkg.keys.disc`` when its directory is a package with
    ``__init__.py``; ``python -m pkg.keys`` likewise). Only code with no file (an
    interactive session) keeps ``__main__``: no other process can import it anyway."""
    return f"{import_name(fn.__module__)}.{fn.__qualname__}"


def import_name(module_name: str) -> str:
    """``module_name``, or for a script's module the name an import would give it."""
    if module_name not in MAIN_MODULES:
        return module_name
    module = sys.modules.get(module_name)
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.name not in MAIN_MODULES:
        return str(spec.name)  # python -m pkg.keys
    path = getattr(module, "__file__", None)
    if not path:
        return module_name
    file = Path(path).resolve()
    parts = [file.stem]
    package = file.parent
    while (package / "__init__.py").is_file():
        parts.insert(0, package.name)
        package = package.parent
    return ".".join(parts)


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskOptions:
    """A task's settings; each can be given to ``@app.task(...)``.

    - ``queue``: the queue its jobs go to (default: the task's name).
    - ``max_attempts``: attempts before the dead-letter queue (default 3).
    - ``backoff``: a ``Backoff``, or a number of seconds as its base (default Backoff()).
    - ``lease``: seconds a claim holds the job between heartbeats (default 30).
    - ``timeout``: seconds an attempt may run before it fails with reason ``timeout``.
    - ``on_conflict``: ``replace`` (default), ``keep`` or ``earliest``, for unique keys.
    - ``priority``: default priority of its jobs; higher runs first (default 0).
    - ``on_failure``, ``on_dead``: functions called with a ``crawlq.hooks.FailureEvent``
      when an attempt fails, and when the job goes dead (see ``crawlq.hooks``).
    """

    queue: str
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff: Backoff = field(default_factory=Backoff)
    lease: float = DEFAULT_LEASE_SECONDS
    timeout: float | None = None
    on_conflict: ConflictPolicy = ConflictPolicy.REPLACE
    priority: int = 0
    on_failure: Hook | None = None
    on_dead: Hook | None = None

    def __post_init__(self) -> None:
        """Every option is checked here, once, with the rules of ``crawlq.payload``."""
        check_name(self.queue, "queue name")
        check_count("max_attempts", self.max_attempts, 1, MAX_COUNT)
        if not isinstance(self.backoff, Backoff):
            raise ConfigurationError(
                f"backoff must be a crawlq.Backoff or a number of seconds, not {self.backoff!r:.40}"
            )
        check_seconds("lease", self.lease)
        if self.timeout is not None:
            check_seconds("timeout", self.timeout)
        check_priority(self.priority)
        check_hook("on_failure", self.on_failure)
        check_hook("on_dead", self.on_dead)


def make_options(name: str, raw: Mapping[str, Any]) -> TaskOptions:
    """Build TaskOptions from decorator keywords, with errors that name the task."""
    check_name(name, "task name")
    known = set(TaskOptions.__dataclass_fields__)
    unknown = set(raw) - known
    if unknown:
        raise ConfigurationError(
            f"unknown option(s) {sorted(unknown)} for task {name!r}: known are {sorted(known)}"
        )
    values = dict(raw)
    values.setdefault("queue", name)
    if "on_conflict" in values:
        try:
            values["on_conflict"] = ConflictPolicy(values["on_conflict"])
        except ValueError:
            raise ConfigurationError(
                f"on_conflict={values['on_conflict']!r} for task {name!r}: use one of "
                + ", ".join(p.value for p in ConflictPolicy)
            ) from None
    try:
        backoff = values.get("backoff")
        if isinstance(backoff, int | float) and not isinstance(backoff, bool):
            values["backoff"] = Backoff(base=backoff)
        return TaskOptions(**values)
    except ConfigurationError as exc:
        raise ConfigurationError(f"task {name!r}: {exc}") from None


class Task(Generic[P, R]):
    """A registered task. Call it to run the function directly; ``schedule`` to queue it.

    The function's first parameter is the job context; the others are its arguments,
    which must be JSON values.
    """

    def __init__(self, app: App, fn: Callable[..., R], name: str, options: TaskOptions) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.options = options
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())[1:]
        self.arg_names: tuple[str, ...] = tuple(p.name for p in params)
        self.is_async = inspect.iscoroutinefunction(fn)
        self.logger = logging.getLogger(f"crawlq.task.{name}")

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Refuse arguments the function cannot take, before anything is scheduled."""
        try:
            self.signature.bind(None, *args, **kwargs)
        except TypeError as exc:
            raise PayloadError(
                f"task {self.name!r} cannot be called with these arguments: {exc} "
                f"(it takes ctx, {', '.join(self.arg_names) or 'nothing else'})"
            ) from None

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue}>"

    def __call__(self, ctx: JobContext, *args: Any, **kwargs: Any) -> R:
        return self.fn(ctx, *args, **kwargs)

    def spec(
        self,
        *args: Any,
        delay: float | None = None,
        at: datetime | float | None = None,
        key: str | None = None,
        priority: int | None = None,
        crawl: int | None = None,
        limit_key: str | None = None,
        seen: str | None = None,
        **kwargs: Any,
    ) -> JobSpec:
        """The JobSpec for one call: checked, encoded, not yet scheduled."""
        return self.spec_for(
            args,
            kwargs,
            delay=delay,
            at=at,
            key=key,
            priority=priority,
            crawl=crawl,
            limit_key=limit_key,
            seen=seen,
        )

    def spec_for(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        delay: float | None = None,
        at: datetime | float | None = None,
        key: str | None = None,
        priority: int | None = None,
        crawl: int | None = None,
        limit_key: str | None = None,
        seen: str | None = None,
    ) -> JobSpec:
        """Like ``spec``, with arguments passed as a list and a dict (no name clashes)."""
        return self.app.build_spec(
            self,
            args,
            kwargs or {},
            delay=delay,
            at=at,
            key=key,
            priority=priority,
            crawl=crawl,
            limit_key=limit_key,
            seen=seen,
        )

    def schedule(
        self,
        *args: Any,
        delay: float | None = None,
        at: datetime | float | None = None,
        key: str | None = None,
        priority: int | None = None,
        crawl: int | None = None,
        limit_key: str | None = None,
        seen: str | None = None,
        **kwargs: Any,
    ) -> ScheduleResult:
        """Schedule one job. ``delay`` (seconds) or ``at`` (a datetime or epoch seconds)
        sets when it is due; ``key`` makes it unique in its queue (see ``on_conflict``);
        ``crawl`` puts it in a crawl, ``seen`` (a URL or key) schedules it only if the
        crawl has not seen it, ``limit_key`` (a host) submits it to that key's limits."""
        spec = self.spec_for(
            args,
            kwargs,
            delay=delay,
            at=at,
            key=key,
            priority=priority,
            crawl=crawl,
            limit_key=limit_key,
            seen=seen,
        )
        return self.app.schedule_many([spec])[0]

    def delay(self, *args: Any, **kwargs: Any) -> ScheduleResult:
        """Schedule one job now, Celery style: every keyword goes to the task."""
        return self.app.schedule_many([self.spec_for(args, kwargs)])[0]

    def schedule_many(
        self, calls: Sequence[Sequence[Any]], *, delay: float | None = None
    ) -> list[ScheduleResult]:
        """Schedule one job per argument list, in one transaction."""
        return self.app.schedule_many([self.spec_for(a, delay=delay) for a in calls])
