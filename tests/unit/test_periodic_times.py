"""Periodic schedules: fire times (cron, every, daylight saving time), the plan of a due
schedule, ``@app.periodic`` and ``app.schedules`` on a SQLite app, and a worker that
fires a schedule."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

import crawlq
from crawlq import App
from crawlq.config import WorkerSettings
from crawlq.exceptions import ConfigurationError
from crawlq.jobs import JobSpec, Outcome
from crawlq.periodic import CatchUp, FireOutcome, Periodic, PeriodicInfo, parse_every, plan

BERLIN = ZoneInfo("Europe/Berlin")
SPEC = JobSpec(queue="q", task="t")


def cron(expr: str, tz: str = "UTC") -> Periodic:
    return Periodic(name="p", spec=SPEC, cron=expr, tz=tz)


def local_times(p: Periodic, start: datetime, end: datetime) -> list[str]:
    return [
        datetime.fromtimestamp(t, BERLIN).isoformat()
        for t in p.fire_times(start.timestamp(), end.timestamp())
    ]


def test_every_counts_from_the_epoch() -> None:
    p = Periodic(name="p", spec=SPEC, every=timedelta(hours=6))  # type: ignore[arg-type]
    t = datetime(2026, 5, 1, 7, 30, tzinfo=UTC).timestamp()
    assert p.next_after(t) == datetime(2026, 5, 1, 12, tzinfo=UTC).timestamp()
    assert p.next_after(p.next_after(t)) == datetime(2026, 5, 1, 18, tzinfo=UTC).timestamp()
    assert Periodic(name="p", spec=SPEC, every=1).next_after(10.0) == 11.0
    assert Periodic(name="p", spec=SPEC, every=1).next_after(10.5) == 11.0


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("30s", 30.0), ("15m", 900.0), ("6h", 21600.0), ("1h30m", 5400.0)],
)
def test_every_durations(text: str, seconds: float) -> None:
    assert parse_every(text) == seconds


def test_cron_with_a_seconds_field_and_a_zone() -> None:
    p = cron("*/15 * * * * *")
    assert p.fire_times(0.0, 60.0) == [15.0, 30.0, 45.0, 60.0]
    six = cron("0 */6 * * *", "Europe/Berlin")
    start = datetime(2026, 1, 10, 1, 0, tzinfo=BERLIN)
    assert local_times(six, start, start + timedelta(hours=12)) == [
        "2026-01-10T06:00:00+01:00",
        "2026-01-10T12:00:00+01:00",
    ]


def test_spring_forward_a_skipped_fixed_time_fires_once_right_after_the_jump() -> None:
    """29 March 2026, Berlin: 02:00 CET becomes 03:00 CEST."""
    start = datetime(2026, 3, 28, 12, 0, tzinfo=BERLIN)
    end = datetime(2026, 3, 30, 12, 0, tzinfo=BERLIN)
    assert local_times(cron("30 2 * * *", "Europe/Berlin"), start, end) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    hourly = local_times(
        cron("0 * * * *", "Europe/Berlin"), start.replace(day=29, hour=0), end.replace(hour=4)
    )
    assert hourly[:4] == [
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-29T04:00:00+02:00",
        "2026-03-29T05:00:00+02:00",
    ]


def test_fall_back_a_repeated_fixed_time_fires_once_and_wildcards_follow_real_time() -> None:
    """25 October 2026, Berlin: 03:00 CEST becomes 02:00 CET; 02:xx happens twice."""
    start = datetime(2026, 10, 24, 12, 0, tzinfo=BERLIN)
    end = datetime(2026, 10, 26, 12, 0, tzinfo=BERLIN)
    assert local_times(cron("30 2 * * *", "Europe/Berlin"), start, end) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]
    night = datetime(2026, 10, 25, 1, 0, tzinfo=BERLIN)
    assert local_times(cron("30 * * * *", "Europe/Berlin"), night, night + timedelta(hours=3)) == [
        "2026-10-25T01:30:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:30:00+01:00",
    ]


@pytest.mark.parametrize(
    ("fields", "fragment"),
    [
        ({"cron": "61 * * * *"}, "not a cron expression"),
        ({"cron": "* * *"}, "not a cron expression"),
        ({"cron": "0 * * * *", "every": 5}, "exactly one"),
        ({}, "exactly one"),
        ({"every": 0}, "every must be a positive number"),
        ({"every": "5 parsecs"}, "not a duration"),
        ({"every": 5, "tz": "Mars/Olympus"}, "not a known time zone"),
        ({"every": 5, "catch_up": "twice"}, "use 'once' or 'skip'"),
        ({"every": 5, "grace": -1}, "grace must be"),
    ],
)
def test_bad_schedules_are_refused_with_a_clear_line(
    fields: dict[str, object], fragment: str
) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        Periodic(name="p", spec=SPEC, **fields)  # type: ignore[arg-type]


def test_a_definition_round_trips() -> None:
    p = Periodic(
        name="p",
        spec=JobSpec(queue="q", task="t", args=[1], kwargs={"a": "b"}, key="k", priority=2),
        cron="0 3 * * *",
        tz="Europe/Berlin",
        catch_up=CatchUp.SKIP,
        overlap=False,
        grace=5,
    )
    assert Periodic.from_definition("p", p.definition) == p


def info(p: Periodic, next_fire: float, live: bool = False) -> PeriodicInfo:
    return PeriodicInfo(
        periodic=p,
        revision=1,
        paused=False,
        next_fire=next_fire,
        last_fire=None,
        last_job=None,
        last_job_live=live,
        created_at=0.0,
        updated_at=0.0,
    )


def test_plan() -> None:
    p = Periodic(name="p", spec=SPEC, every=10, grace=5)
    on_time = plan(info(p, 100.0), 103.0)
    assert (on_time.outcome, on_time.next_fire, on_time.spec) == (FireOutcome.FIRED, 110.0, SPEC)
    late = plan(info(p, 100.0), 156.0)  # 100..150 missed; grace reaches back to 151
    assert (late.outcome, late.next_fire) == (FireOutcome.FIRED, 160.0)
    skip = Periodic(name="p", spec=SPEC, every=10, grace=5, catch_up=CatchUp.SKIP)
    assert plan(info(skip, 100.0), 156.0).outcome is FireOutcome.MISSED
    alone = Periodic(name="p", spec=SPEC, every=10, overlap=False)
    held = plan(info(alone, 100.0, live=True), 101.0)
    assert (held.outcome, held.spec) == (FireOutcome.SKIPPED, None)


def test_the_decorator_registers_a_task_and_declares_its_schedule(app: App) -> None:
    @app.periodic("0 */6 * * *", tz="Europe/Berlin", args=["x"], key="k", queue="cron", priority=7)
    def refresh(ctx: crawlq.JobContext, what: str) -> str:
        return what

    @app.periodic(every=timedelta(minutes=5), schedule_name="often", args=["y"])
    @app.periodic(every=60, catch_up="skip", overlap=False, args=["z"])
    @app.task(name="poll")
    def poll(ctx: crawlq.JobContext, what: str) -> None: ...

    assert app.get_task(refresh.name) is refresh and refresh.options.queue == "cron"
    declared = app.schedules.declared
    assert sorted(declared) == sorted([refresh.name, "poll", "often"])
    nightly = declared[refresh.name]
    assert (nightly.cron, nightly.tz, nightly.spec.args, nightly.spec.key) == (
        "0 */6 * * *",
        "Europe/Berlin",
        ["x"],
        "k",
    )
    assert (nightly.spec.queue, nightly.spec.priority) == ("cron", 7)
    assert (declared["poll"].catch_up, declared["poll"].overlap) == (CatchUp.SKIP, False)
    assert declared["often"].every == 300.0
    assert app.schedules.sync() == {
        refresh.name: Outcome.CREATED,
        "poll": Outcome.CREATED,
        "often": Outcome.CREATED,
    }
    assert set(app.schedules.sync().values()) == {Outcome.UNCHANGED}
    assert [i.name for i in app.schedules.stored()] == sorted(declared)


def test_decorator_mistakes(app: App) -> None:
    with pytest.raises(crawlq.PayloadError, match="cannot be called"):

        @app.periodic(every=5, args=[1, 2])
        def one(ctx: crawlq.JobContext, a: int) -> None: ...

    @app.periodic(every=5, name="two")
    def two(ctx: crawlq.JobContext) -> None: ...

    with pytest.raises(ConfigurationError, match="schedule_name"):
        app.periodic(every=6)(two)
    with pytest.raises(ConfigurationError, match="registered already"):
        app.periodic(every=6, schedule_name="x", queue="other")(two)
    with pytest.raises(ConfigurationError, match="unknown option"):
        app.periodic(every=6, colour="red")(lambda ctx: None)


def test_pause_resume_remove_and_unknown_names(app: App) -> None:
    @app.periodic(every=3600)
    def hourly(ctx: crawlq.JobContext) -> None: ...

    app.schedules.sync()
    app.schedules.pause(hourly.name)
    assert app.schedules.get(hourly.name).paused
    app.schedules.resume(hourly.name)
    resumed = app.schedules.get(hourly.name)
    assert not resumed.paused and resumed.next_fire > time.time()
    app.schedules.remove(hourly.name)
    for act in (app.schedules.pause, app.schedules.resume, app.schedules.remove):
        with pytest.raises(ConfigurationError, match="no periodic schedule named"):
            act(hourly.name)


def test_a_worker_fires_a_schedule_every_second(app: App) -> None:
    ran: list[int] = []

    @app.periodic("* * * * * *", name="tick")
    def tick(ctx: crawlq.JobContext) -> None:
        ran.append(ctx.job_id)

    worker = crawlq.Worker(app, WorkerSettings(concurrency=2, poll_timeout=0.1))
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        deadline = time.monotonic() + 20
        while len(ran) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
        thread.join(30)
    assert len(ran) >= 3
    fires = app.schedules.fires("tick")
    assert [f.outcome for f in fires] == [FireOutcome.FIRED] * len(fires)
    assert [f.fire_at - fires[0].fire_at for f in fires] == [float(i) for i in range(len(fires))]
