"""The options of one scheduled job, declared once, and how they become JobSpec fields.

``ScheduleOptions`` is what every way of scheduling takes (``task.with_options(...)``,
``task.spec_for(..., **options)``, ``ctx.schedule``, ``App.build_spec``); a task's own
settings (queue, attempts, lease...) come from its ``TaskOptions`` through the task's
template spec (``TaskOptions.template``). An option whose name is a JobSpec field is
copied to that field after its check, so a new one is one line here and one in
``JobSpec``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypedDict

from crawlq.crawls import check_key_text, check_placement
from crawlq.exceptions import ConfigurationError
from crawlq.fingerprint import fingerprint_of
from crawlq.jobs import SPEC_FIELD_NAMES
from crawlq.payload import check_moment, check_priority, check_seconds


class ScheduleOptions(TypedDict, total=False):
    """The options of one call; None (or leaving one out) keeps the default."""

    delay: float | None
    """Seconds from the store's now until the job is due (0 to 100 years)."""
    at: datetime | float | None
    """When the job is due: a datetime or epoch seconds (instead of ``delay``)."""
    key: str | None
    """Unique in its queue while live; a second schedule follows the task's
    ``on_conflict``."""
    priority: int | None
    """Higher runs first (default: the task's ``priority``)."""
    crawl: int | None
    """The crawl the job joins (a running job's children join its crawl)."""
    limit_key: str | None
    """The key (a host) whose limits the job is submitted to."""
    seen: str | None
    """A URL or key: schedule only if the crawl has not seen it (needs a crawl)."""


OPTION_NAMES = frozenset(ScheduleOptions.__annotations__)
"""The names ``task.schedule(...)`` also takes as options when the function has no
parameter of that name (the spelling from before ``with_options``)."""


def check_when(
    delay: object, at: object, key: object, priority: object
) -> tuple[float | None, float | None, int | None]:
    """The options of one call that every store must keep alike: ``delay`` seconds from 0
    to 100 years (a negative delay is refused: use ``at`` for a past moment), ``at`` from
    1970 to 9999 (as epoch seconds), ``key`` text without NUL, ``priority`` within
    ±(2**53-1). Returns delay, run_at and priority checked; ConfigurationError if not."""
    if key is not None:
        check_key_text(key, "key")  # type: ignore[arg-type]
    return (
        None if delay is None else check_seconds("delay", delay, zero=True),
        None if at is None else check_moment(at),
        None if priority is None else check_priority(priority),
    )


def spec_fields(task: str, options: ScheduleOptions) -> dict[str, Any]:
    """The JobSpec fields ``options`` of a call of ``task`` set, checked
    (ConfigurationError naming the task if one is wrong). Options left out or None keep
    the task's template value."""
    if not options:
        return {}
    unknown = options.keys() - OPTION_NAMES
    if unknown:
        raise ConfigurationError(
            f"unknown schedule option(s) {sorted(unknown)} for task {task!r}: known are "
            f"{sorted(OPTION_NAMES)}"
        )
    given: dict[str, Any] = {k: v for k, v in options.items() if v is not None}
    if not given:
        return given
    if "delay" in given and "at" in given:
        raise ConfigurationError(f"task {task!r} was given both delay= and at=; give one of them")
    try:
        delay, run_at, priority = check_when(
            given.get("delay"), given.pop("at", None), given.get("key"), given.get("priority")
        )
    except ConfigurationError as exc:
        raise ConfigurationError(f"task {task!r}: {exc}") from None
    check_placement(given.get("crawl"), given.get("limit_key"), given.get("seen"))
    seen = given.pop("seen", None)
    if seen is not None:
        given["fingerprint"] = fingerprint_of(seen)
    if delay is not None:
        given["delay"] = delay
    if run_at is not None:
        given["run_at"] = run_at
    if priority is not None:
        given["priority"] = priority
    assert given.keys() <= SPEC_FIELD_NAMES, "each option names a JobSpec field or is mapped above"
    return given


def split_options(
    kwargs: Mapping[str, Any], takes: Mapping[str, Any], names: frozenset[str] = OPTION_NAMES
) -> tuple[Mapping[str, Any], ScheduleOptions]:
    """``kwargs`` of a call without the schedule options among them: those in ``names``
    that the function does not take (``takes``: its parameters) are options."""
    if kwargs.keys().isdisjoint(names):
        return kwargs, {}
    options = {k: v for k, v in kwargs.items() if k in names and k not in takes}
    rest = {k: v for k, v in kwargs.items() if k not in options}
    return rest, ScheduleOptions(**options)  # type: ignore[typeddict-item]
