"""Periodic schedules on the Redis store (``crawlq.stores.periodic``): a mixin of
``RedisStore``, with the scripts ``periodic_*.lua`` (key layout in ``keys.py``).

A fire reads due schedules (``periodic_read.lua``: up to ``limit`` of them, from a spot
of the due set picked at random, so that concurrent schedulers mostly take different
ones), plans them in Python, and applies the plan in one script (``periodic_fire.lua``)
that checks each schedule is still as read: schedulers that read the same schedules
race, and the first script to run fires them; the others find them moved on and change
nothing."""

from __future__ import annotations

import json
import random
from typing import Any

from crawlq.jobs import Outcome
from crawlq.payload import dumps
from crawlq.periodic import FireOutcome, FireRecord, Periodic, PeriodicInfo
from crawlq.stores.checks import check_finite
from crawlq.stores.codec import spec_row
from crawlq.stores.periodic import Planner
from crawlq.stores.redis.core import RedisCore, now_arg, number
from crawlq.types import Timestamp


def _opt_float(text: str | None) -> float | None:
    return None if text is None else float(text)


def _info(h: dict[str, Any]) -> PeriodicInfo:
    return PeriodicInfo(
        periodic=Periodic.from_definition(h["name"], h["definition"]),
        revision=int(h["revision"]),
        paused=h["paused"] == "1",
        next_fire=float(h["next_fire"]),
        last_fire=_opt_float(h.get("last_fire")),
        last_job=None if h.get("last_job") is None else int(h["last_job"]),
        last_job_live=bool(h["live"]),
        created_at=float(h["created_at"]),
        updated_at=float(h["updated_at"]),
    )


def _record(name: str, fire_at: str, outcome: str, job: Any, fired_at: str) -> FireRecord:
    return FireRecord(
        name=name,
        fire_at=float(fire_at),
        outcome=FireOutcome(outcome),
        job_id=int(job) if job is not False else None,
        fired_at=float(fired_at),
    )


class RedisPeriodic(RedisCore):
    """The ``PeriodicStore`` operations of ``RedisStore``."""

    def _read_schedules(
        self, operation: str, *args: str, now: Timestamp | None = None
    ) -> tuple[float, list[PeriodicInfo]]:
        now_text, rows = json.loads(self._run(operation, "periodic_read", [now_arg(now), *args]))
        return float(now_text), [_info(h) for h in rows]

    def periodic_put(
        self, periodic: Periodic, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> Outcome:
        args = [
            now_arg(now),
            periodic.name,
            periodic.definition,
            number(check_finite("next_fire", next_fire)),
        ]
        return Outcome(self._run("saving a periodic schedule", "periodic_put", args))

    def periodic_get(self, name: str) -> PeriodicInfo | None:
        _, infos = self._read_schedules("reading a periodic schedule", "get", name)
        return infos[0] if infos else None

    def periodic_list(self) -> list[PeriodicInfo]:
        return self._read_schedules("listing periodic schedules", "list")[1]

    def _change(self, operation: str, now: Timestamp | None, *args: str) -> int:
        return int(self._run(operation, "periodic_change", [now_arg(now), *args]))

    def periodic_remove(self, name: str) -> bool:
        return bool(self._change("removing a periodic schedule", None, "remove", name))

    def periodic_pause(self, name: str, *, now: Timestamp | None = None) -> bool:
        return bool(self._change("pausing a periodic schedule", now, "pause", name))

    def periodic_resume(
        self, name: str, *, next_fire: Timestamp, now: Timestamp | None = None
    ) -> bool:
        fire = number(check_finite("next_fire", next_fire))
        return bool(self._change("resuming a periodic schedule", now, "resume", name, fire))

    def periodic_fire_due(
        self, plan: Planner, *, limit: int, now: Timestamp | None = None
    ) -> list[FireRecord]:
        seed = str(random.randrange(2**31))
        t, due = self._read_schedules("reading due schedules", "due", str(limit), seed, now=now)
        if not due:
            return []
        rows = [
            [
                f.name,
                f.fire_at,
                f.revision,
                f.next_fire,
                f.outcome.value,
                None if f.spec is None else spec_row(f.spec),
            ]
            for f in plan(due, t)
        ]
        args = [now_arg(now), dumps(rows)]
        fired = json.loads(self._run("firing periodic schedules", "periodic_fire", args))
        return [_record(*r) for r in fired]

    def periodic_next(self) -> Timestamp | None:
        value = json.loads(self._run("reading the next fire time", "periodic_read", ["", "next"]))
        return None if value is False else float(value)

    def periodic_fires(self, name: str, *, limit: int = 1000) -> list[FireRecord]:
        args = ["", "fires", name, str(max(1, int(limit)))]
        pairs = json.loads(self._run("reading a schedule's fire times", "periodic_read", args))
        return [_record(name, at, *json.loads(text)) for at, text in pairs]

    def periodic_prune(self, *, older_than: float, now: Timestamp | None = None) -> int:
        return self._change("pruning periodic fire records", now, "prune", repr(older_than))
