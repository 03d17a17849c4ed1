"""Periodic schedules: what fires when, and what a due schedule does at its fire time.

A ``Periodic`` is a schedule's definition: its windows (a cron expression in a time
zone, or a fixed interval) and the job each fire time schedules. Stores keep it with its
next fire time (``crawlq.stores.periodic``); every worker acts as a scheduler
(``crawlq.worker.scheduler``) and the store's unique (schedule, fire time) write decides
which one fires each time. Everything here is pure: no I/O, no clock.

Windows
    - ``cron``: five fields (minute hour day month weekday) or six, with seconds first
      (``"*/10 * * * * *"``: every ten seconds), parsed and walked by cronsim, in the
      time zone ``tz`` (an IANA name, default UTC).
    - ``every``: seconds between fire times, counted from the epoch (1970-01-01 UTC): an
      ``every`` of 6 h fires at 00:00, 06:00, 12:00 and 18:00 UTC, whenever it was
      added, on every machine alike.

Daylight saving time (cron in a zone that has it), as Debian's cron does:
    - A fire time at a fixed hour and minute in the hour that does not exist (the clock
      jumps from 02:00 to 03:00) fires once, at the first instant after the jump (03:00).
    - A fire time at a fixed hour and minute in the hour that happens twice (the clock
      goes back from 03:00 to 02:00) fires once, at its first occurrence.
    - An expression with ``*`` (or a step) in the minute or hour field follows real time:
      ``0 * * * *`` fires every real hour, so twice in the repeated hour and not in the
      missing one. Six-field expressions always follow real time.

Late and missed windows
    A fire time found due at most ``grace`` seconds late (default 60) fires as usual: a
    busy or briefly stopped scheduler still fires every window. Fire times more than
    ``grace`` late were missed (no worker ran): ``catch_up="once"`` (default) fires one
    job for all of them, ``catch_up="skip"`` fires none; either way the schedule then
    goes on with the windows of the last ``grace`` seconds and later.

Overlap
    ``overlap=False``: a fire time whose previous job (the last one this schedule
    scheduled) is still pending or running schedules nothing (recorded as ``skipped``).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import ConflictPolicy, JobSpec
from crawlq.payload import check_name, check_seconds
from crawlq.types import Timestamp

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

# zoneinfo (which reads sysconfig) and cronsim are imported where a schedule first needs
# them: a worker or producer whose app has no schedule does not load them.

DEFAULT_GRACE = 60.0
"""Seconds a fire time may be found late and still fire as itself (see the module)."""


class CatchUp(StrEnum):
    """What a schedule does for fire times missed while no worker ran."""

    ONCE = "once"
    """One job for all the missed fire times (the first of them is recorded)."""
    SKIP = "skip"
    """No job: the missed fire times are recorded as ``missed``."""


class FireOutcome(StrEnum):
    """What one fire time of a schedule did; one record per fire time (the ledger)."""

    FIRED = "fired"
    """A job was scheduled (its id is recorded)."""
    SKIPPED = "skipped"
    """``overlap=False`` and the previous job was still pending or running."""
    MISSED = "missed"
    """The fire time passed while no worker ran, and ``catch_up="skip"``."""


def parse_every(value: float | timedelta | str) -> float:
    """Seconds from a number, a ``timedelta`` or text such as ``90``, ``30s``, ``15m``,
    ``6h``, ``1d`` or ``1h30m``; ConfigurationError for anything else."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, str):
        value = _duration_text(value)
    return check_seconds("every", value)


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def _duration_text(text: str) -> float:
    rest = text.strip().lower()
    try:
        return float(rest)
    except ValueError:
        pass
    total, number = 0.0, ""
    for char in rest:
        if char.isdigit() or char == ".":
            number += char
        elif char in _UNITS and number:
            total += float(number) * _UNITS[char]
            number = ""
        else:
            number = "!"
            break
    if number or not rest:
        raise ConfigurationError(
            f"every={text!r} is not a duration: give seconds, or a number with a unit "
            "(s, m, h, d, w), e.g. 30s, 15m, 6h, 1h30m"
        )
    return total


def duration_text(seconds: float) -> str:
    """``6h``, ``1h30m``, ``90s`` -> ``1m30s``, ``0.5s``: what ``parse_every`` reads."""
    if seconds != int(seconds) or seconds < 60:
        return f"{seconds:g}s"
    rest, parts = int(seconds), []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return "".join(parts)


def _zone(tz: str) -> ZoneInfo:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigurationError(
            f"tz={tz!r} is not a known time zone: give an IANA name such as UTC or Europe/Berlin"
        ) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class Periodic:
    """A periodic schedule: ``cron`` (in ``tz``) or ``every`` seconds, the job it
    schedules at each fire time (``spec``: its task, queue, arguments, key, priority and
    options; its delay and run_at are ignored: the job is due at once), and the
    ``catch_up``, ``overlap`` and ``grace`` policies (see the module)."""

    name: str
    spec: JobSpec
    cron: str | None = None
    every: float | None = None
    tz: str = "UTC"
    catch_up: CatchUp = CatchUp.ONCE
    overlap: bool = True
    grace: float = DEFAULT_GRACE
    _zone: ZoneInfo | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_name(self.name, "schedule name")
        if (self.cron is None) == (self.every is None):
            raise ConfigurationError(
                f"schedule {self.name!r}: give a cron expression or an interval (every=, "
                "--every), exactly one"
            )
        if self.spec.crawl is not None or self.spec.fingerprint is not None:
            raise ConfigurationError(
                f"schedule {self.name!r}: a periodic job cannot join a crawl (schedule "
                "a task that creates one)"
            )
        try:
            object.__setattr__(self, "catch_up", CatchUp(self.catch_up))
        except ValueError:
            raise ConfigurationError(
                f"schedule {self.name!r}: catch_up={self.catch_up!r}: use 'once' or 'skip'"
            ) from None
        check_seconds("grace", self.grace, zero=True)
        object.__setattr__(self, "_zone", _zone(self.tz))
        if self.every is not None:
            object.__setattr__(self, "every", parse_every(self.every))
        else:
            self._check_cron()
        object.__setattr__(self, "spec", replace(self.spec, delay=0.0, run_at=None))

    def _check_cron(self) -> None:
        from cronsim import CronSim, CronSimError

        assert self.cron is not None
        fields = self.cron.split()
        try:
            if len(fields) not in (5, 6):
                raise CronSimError("wrong number of fields")
            CronSim(self.cron, datetime(2000, 1, 1, tzinfo=UTC))
        except CronSimError as exc:
            raise ConfigurationError(
                f"schedule {self.name!r}: {self.cron!r} is not a cron expression ({exc}): "
                "give 5 fields (minute hour day month weekday) or 6 with seconds first, "
                "e.g. '0 */6 * * *'"
            ) from None

    def describe(self) -> str:
        """``cron 0 */6 * * * Europe/Berlin`` or ``every 1h30m``."""
        if self.cron is not None:
            return f"cron {self.cron} {self.tz}"
        assert self.every is not None
        return f"every {duration_text(self.every)}"

    def next_after(self, t: Timestamp) -> Timestamp:
        """The first fire time strictly after ``t``."""
        if self.every is not None:
            window = (math.floor(t / self.every) + 1) * self.every
            return window if window > t else window + self.every
        from cronsim import CronSim

        assert self.cron is not None and self._zone is not None
        zone = UTC if self.tz == "UTC" else self._zone
        return next(CronSim(self.cron, datetime.fromtimestamp(t, zone))).timestamp()

    def fire_times(self, start: Timestamp, end: Timestamp) -> list[Timestamp]:
        """The fire times in (start, end], in order."""
        times: list[Timestamp] = []
        t = self.next_after(start)
        while t <= end:
            times.append(t)
            t = self.next_after(t)
        return times

    @property
    def definition(self) -> str:
        """The definition as stored: canonical JSON (equal definitions, equal text)."""
        spec = self.spec
        fields = {
            "cron": self.cron,
            "every": self.every,
            "tz": self.tz,
            "catch_up": self.catch_up.value,
            "overlap": self.overlap,
            "grace": float(self.grace),
            "spec": {
                "queue": spec.queue,
                "task": spec.task,
                "args": list(spec.args),
                "kwargs": dict(spec.kwargs),
                "key": spec.key,
                "priority": spec.priority,
                "max_attempts": spec.max_attempts,
                "lease_seconds": float(spec.lease_seconds),
                "timeout": None if spec.timeout is None else float(spec.timeout),
                "on_conflict": spec.on_conflict.value,
                "limit_key": spec.limit_key,
            },
        }
        return json.dumps(fields, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_definition(cls, name: str, text: str) -> Periodic:
        """The schedule ``definition`` stored (decoded once per process: the scheduler
        reads the same definitions at every fire)."""
        return _decoded(name, text)

    @classmethod
    def _decode(cls, name: str, text: str) -> Periodic:
        """The stored text was written from a checked Periodic (``definition``), so it
        is not checked again: a fire of 10,000 due schedules decodes each one."""
        fields = json.loads(text)
        spec = fields.pop("spec")
        spec["on_conflict"] = ConflictPolicy(spec["on_conflict"])
        fields["catch_up"] = CatchUp(fields["catch_up"])
        periodic = object.__new__(cls)
        for key, value in (("name", name), ("spec", JobSpec(**spec)), *fields.items()):
            object.__setattr__(periodic, key, value)
        object.__setattr__(periodic, "_zone", _zone(periodic.tz))
        return periodic


@functools.lru_cache(maxsize=65536)
def _decoded(name: str, text: str) -> Periodic:
    return Periodic._decode(name, text)


@dataclass(frozen=True, kw_only=True, slots=True)
class PeriodicInfo:
    """A schedule as the store holds it."""

    periodic: Periodic
    revision: int
    """Grows by one each time the definition changes (a fire planned on an older
    revision changes nothing)."""
    paused: bool
    next_fire: Timestamp
    """The next fire time not yet fired (it may be past: due)."""
    last_fire: Timestamp | None
    last_job: int | None
    """The id of the last job the schedule scheduled."""
    last_job_live: bool
    """Whether that job was pending or running when the schedule was read."""
    created_at: Timestamp
    updated_at: Timestamp

    @property
    def name(self) -> str:
        return self.periodic.name


@dataclass(frozen=True, kw_only=True, slots=True)
class Firing:
    """What a due schedule does at ``fire_at`` (its stored ``next_fire``), planned
    outside the store; the store applies it only if the schedule still has this
    ``revision`` and ``next_fire``, is not paused, and ``fire_at`` is not in its ledger."""

    name: str
    fire_at: Timestamp
    revision: int
    next_fire: Timestamp
    outcome: FireOutcome
    spec: JobSpec | None
    """The job to schedule (with outcome ``FIRED``), due at once."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FireRecord:
    """One entry of a schedule's ledger: at most one per (schedule, fire time)."""

    name: str
    fire_at: Timestamp
    outcome: FireOutcome
    job_id: int | None
    fired_at: Timestamp
    """When it was recorded (the store's clock)."""


def plan(info: PeriodicInfo, now: Timestamp) -> Firing:
    """What the due schedule ``info`` does at its next fire time, seen at ``now``."""
    periodic = info.periodic
    fire_at = info.next_fire
    late = now - fire_at > periodic.grace
    if late:
        next_fire = periodic.next_after(max(fire_at, now - periodic.grace))
    else:
        next_fire = periodic.next_after(fire_at)
    if late and periodic.catch_up is CatchUp.SKIP:
        outcome = FireOutcome.MISSED
    elif not periodic.overlap and info.last_job_live:
        outcome = FireOutcome.SKIPPED
    else:
        outcome = FireOutcome.FIRED
    return Firing(
        name=info.name,
        fire_at=fire_at,
        revision=info.revision,
        next_fire=next_fire,
        outcome=outcome,
        spec=periodic.spec if outcome is FireOutcome.FIRED else None,
    )


def plan_all(infos: Sequence[PeriodicInfo], now: Timestamp) -> list[Firing]:
    """``plan`` for each due schedule, in order (the ``Planner`` of the scheduler)."""
    return [plan(info, now) for info in infos]
