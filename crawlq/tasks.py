"""The ``@app.task`` decorator's product: a ``Task`` that knows how to schedule itself."""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, Unpack, overload

from crawlq.config import DEFAULT_LEASE_SECONDS, DEFAULT_MAX_ATTEMPTS
from crawlq.exceptions import ConfigurationError, PayloadError
from crawlq.hooks import Hook, check_hook
from crawlq.jobs import SPEC_FIELD_NAMES, ConflictPolicy, JobSpec, ScheduleResult, SpecTemplate
from crawlq.payload import (
    MAX_COUNT,
    check_count,
    check_name,
    check_priority,
    check_seconds,
    encode_arguments,
)
from crawlq.retry import Backoff
from crawlq.specs import ScheduleOptions, spec_fields, split_options

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


def _positional_counts(signature: inspect.Signature) -> tuple[int, int] | None:
    """(required, all) parameters after the first (ctx), if every parameter is a plain
    positional-or-keyword one; else None."""
    params = list(signature.parameters.values())
    if not params or any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params):
        return None
    rest = params[1:]
    return sum(p.default is p.empty for p in rest), len(rest)


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

    def template(self, task: str) -> JobSpec:
        """The spec every job of ``task`` starts from: each option that is also a JobSpec
        field (queue, priority, max_attempts, timeout, on_conflict) by name, and ``lease``
        as ``lease_seconds``. A call's ``ScheduleOptions`` and arguments go on top."""
        shared = SPEC_FIELD_NAMES & set(TaskOptions.__dataclass_fields__)
        defaults = {name: getattr(self, name) for name in shared}
        return JobSpec(task=task, lease_seconds=self.lease, **defaults)


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


class Registry(Protocol):
    """What a task needs of the app it is registered on (``crawlq.App`` is one)."""

    max_payload_bytes: int

    def schedule_many(self, specs: Iterable[JobSpec]) -> list[ScheduleResult]: ...


class TaskDecorator(Protocol):
    """What ``@app.task(...)`` with options returns: it registers the function."""

    @overload
    def __call__(self, fn: Callable[Concatenate[Any, P], R], /) -> Task[P, R]: ...

    @overload
    def __call__(self, fn: Callable[..., R], /) -> Task[..., R]: ...  # type: ignore[overload-cannot-match]

    def __call__(self, fn: Callable[..., R], /) -> Task[..., R]: ...


class Task(Generic[P, R]):
    """A registered task. Call it to run the function directly; ``schedule`` to queue it.

    The function's first parameter is the job context; the others are its arguments,
    which must be JSON values. ``P`` is the function's parameters after the context, so
    a type checker checks ``schedule``'s and ``spec``'s arguments against them; schedule
    options go through ``with_options``.
    """

    def __init__(
        self,
        app: Registry,
        fn: Callable[Concatenate[Any, P], R],
        name: str,
        options: TaskOptions,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.options = options
        self.template = options.template(name)
        """The spec of a call without arguments or options (``TaskOptions.template``)."""
        self._template = SpecTemplate(self.template)
        """What a call's spec is made from (``from_template``)."""
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())[1:]
        self.arg_names: tuple[str, ...] = tuple(p.name for p in params)
        self.params = {p.name: p for p in params}
        self._positional = _positional_counts(self.signature)
        """(fewest, most) positional arguments after ctx when every parameter is a plain
        positional-or-keyword one: a call with that many and no keywords binds, and
        ``check_call`` need not ask ``inspect`` (None: it always asks)."""
        self.is_async = inspect.iscoroutinefunction(fn)
        self.logger = logging.getLogger(f"crawlq.task.{name}")

    def check_call(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Refuse arguments the function cannot take, before anything is scheduled."""
        counts = self._positional
        if counts is not None and not kwargs and counts[0] <= len(args) <= counts[1]:
            return
        try:
            self.signature.bind(None, *args, **kwargs)
        except TypeError as exc:
            raise PayloadError(
                f"task {self.name!r} cannot be called with these arguments: {exc} "
                f"(it takes ctx, {', '.join(self.arg_names) or 'nothing else'})"
            ) from None

    def __repr__(self) -> str:
        return f"<Task {self.name} queue={self.options.queue}>"

    def __call__(self, ctx: Any, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(ctx, *args, **kwargs)

    def spec_for(
        self,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Unpack[ScheduleOptions],
    ) -> JobSpec:
        """The JobSpec of one call: options and arguments checked, arguments encoded, not
        yet scheduled. Arguments come as a list and a dict, so none clashes with an
        option; every other way of scheduling ends here."""
        fields = spec_fields(self.name, options)
        kwargs = kwargs or {}
        self.check_call(args, kwargs)
        plain_args, plain_kwargs = encode_arguments(
            self.name, args, kwargs, names=self.arg_names, max_bytes=self.app.max_payload_bytes
        )
        fields["args"], fields["kwargs"] = plain_args, plain_kwargs  # a dict of its own
        return self._template.make(fields)

    def from_template(self, **fields: Any) -> JobSpec:
        """The task's template with ``fields`` (JobSpec fields, already checked) set: the
        fast way to build many specs (the crawler's links)."""
        return self._template.make(fields)

    def with_options(self, **options: Unpack[ScheduleOptions]) -> BoundTask[P, R]:
        """This task with schedule options set for the jobs it schedules:
        ``task.with_options(delay=30, key=url).schedule(url)``."""
        return BoundTask(self, options)

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> JobSpec:
        """The JobSpec of one call (see ``spec_for``), with the task's arguments."""
        rest, options = split_options(kwargs, self.params)
        return self.spec_for(args, rest, **options)

    def schedule(self, *args: P.args, **kwargs: P.kwargs) -> ScheduleResult:
        """Schedule one job of this call; ``with_options`` sets when (``delay``, ``at``),
        its unique ``key``, ``priority``, ``crawl``, ``seen`` and ``limit_key``
        (``crawlq.specs.ScheduleOptions``). A keyword named like an option that the
        function has no parameter for is still taken as that option, as before
        ``with_options`` (a type checker flags it)."""
        return self.app.schedule_many([self.spec(*args, **kwargs)])[0]

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> ScheduleResult:
        """Schedule one job now, Celery style: every keyword goes to the task."""
        return self.app.schedule_many([self.spec_for(args, kwargs)])[0]

    def schedule_many(
        self, calls: Iterable[Sequence[Any]], **options: Unpack[ScheduleOptions]
    ) -> list[ScheduleResult]:
        """Schedule one job per argument list, each with ``options``, in one transaction."""
        return self.app.schedule_many([self.spec_for(a, **options) for a in calls])


class BoundTask(Generic[P, R]):
    """A task with schedule options bound (``Task.with_options``); every keyword of its
    ``schedule`` and ``spec`` goes to the task."""

    def __init__(self, task: Task[P, R], options: ScheduleOptions) -> None:
        self.task = task
        self.options = options

    def __repr__(self) -> str:
        return f"<BoundTask {self.task.name} {dict(self.options)}>"

    def with_options(self, **options: Unpack[ScheduleOptions]) -> BoundTask[P, R]:
        """These options with ``options`` on top."""
        return BoundTask(self.task, {**self.options, **options})

    def spec(self, *args: P.args, **kwargs: P.kwargs) -> JobSpec:
        """The JobSpec of one call with these options, not yet scheduled."""
        return self.task.spec_for(args, kwargs, **self.options)

    def schedule(self, *args: P.args, **kwargs: P.kwargs) -> ScheduleResult:
        """Schedule one job of this call with these options."""
        return self.task.app.schedule_many([self.spec(*args, **kwargs)])[0]

    def schedule_many(self, calls: Iterable[Sequence[Any]]) -> list[ScheduleResult]:
        """One job per argument list, in one transaction."""
        return self.task.schedule_many(calls, **self.options)
