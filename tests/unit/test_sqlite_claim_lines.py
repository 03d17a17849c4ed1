"""The SQLite claim takes a limit key's next jobs with its front (``SQLiteJobs._line``):
the same jobs, with the same rows left behind, as claim rounds of one front a key each;
and so does a claim after completions in the same transaction, which starts from the
fronts that they made due.

The rounds are the same store with each key's line cut to its front, so that a key's
next job is claimed only once a round has made it the key's front. Two stores get the
same random calls: jobs with or without a limit key in two queues, limits, blocks,
claims, completions (alone, or with a claim after them) and the clock. After each claim
both returned the same jobs and no key is over its cap; at the end both files hold the
same jobs and keys.
"""

from __future__ import annotations

import functools
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from crawlq.jobs import Job, JobSpec
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Completion
from crawlq.stores.sqlite.jobs import SQLiteJobs
from crawlq.stores.sqlite.scheduling import DueFront
from crawlq.stores.sqlite.store import SQLiteSettings, SQLiteStore

T = TypeVar("T")
T0 = 1_000_000.0
KEYS = ("a", "b", "c", None)
QUEUES = ("q1", "q2")


def in_rounds(call: Callable[[], T]) -> T:
    """``call`` with every key's next jobs left to later rounds."""
    line = SQLiteJobs.__dict__["_line"]  # the staticmethod itself

    def front_only(conn: Any, front: DueFront, queues: set[str], room: int, now: float) -> Any:
        return [front.order] if front.queue in queues else []

    SQLiteJobs._line = staticmethod(front_only)  # type: ignore[method-assign]
    try:
        return call()
    finally:
        SQLiteJobs._line = line  # type: ignore[method-assign]


def seen(jobs: list[Job]) -> list[tuple[Any, ...]]:
    return [(j.id, j.queue, j.limit_key, j.priority, j.run_at, j.attempts) for j in jobs]


def over_cap(path: Path, claimed: list[Job]) -> list[Any]:
    """The keys of ``claimed`` with more jobs running than their cap."""
    keys = sorted({job.limit_key for job in claimed if job.limit_key is not None})
    with sqlite3.connect(path) as conn:
        return [
            key
            for key in keys
            if conn.execute(
                "SELECT max_running < (SELECT count(*) FROM crawlq_jobs"
                " WHERE limit_key = :key AND state = 'running')"
                " FROM crawlq_limits WHERE key = :key",
                {"key": key},
            ).fetchone()[0]
        ]


def rows(path: Path) -> list[Any]:
    with sqlite3.connect(path) as conn:
        jobs = conn.execute(
            "SELECT id, state, run_at, own_run_at, started_at, attempts FROM crawlq_jobs"
            " ORDER BY id"
        ).fetchall()
        keys = conn.execute(
            "SELECT key, front, running, pending, last_start FROM crawlq_limits ORDER BY key"
        ).fetchall()
    return [jobs, keys]


@pytest.mark.parametrize("seed", range(40))
def test_a_claim_takes_what_rounds_of_one_front_a_key_would(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    lines = SQLiteStore(SQLiteSettings(path=str(tmp_path / "lines.db")))
    rounds = SQLiteStore(SQLiteSettings(path=str(tmp_path / "rounds.db")))
    now = T0
    running: list[Job] = []
    try:
        for key in KEYS[:-1]:
            limits = Limits(max_running=rng.choice((None, 2, 3, 5)))
            lines.limit_set(key, limits, now=now)
            rounds.limit_set(key, limits, now=now)
        for _ in range(60):
            op = rng.random()
            if op < 0.35:
                specs = [
                    JobSpec(
                        queue=rng.choice(QUEUES),
                        task="t",
                        limit_key=rng.choice(KEYS),
                        priority=rng.randint(0, 2),
                        run_at=now + rng.choice((-30.0, -20.0, -5.0, 0.0, 3.0)),
                    )
                    for _ in range(rng.randint(1, 10))
                ]
                assert lines.job_schedule(specs, now=now) == rounds.job_schedule(specs, now=now)
            elif op < 0.45:
                key = rng.choice(KEYS[:-1])
                limits = Limits(
                    max_running=rng.choice((None, 1, 2, 3)), min_interval=rng.choice((0.0, 2.0))
                )
                lines.limit_set(key, limits, now=now)
                rounds.limit_set(key, limits, now=now)
            elif op < 0.5:
                key, until = rng.choice(KEYS[:-1]), now + rng.choice((1.0, 4.0))
                lines.limit_block(key, until, now=now)
                rounds.limit_block(key, until, now=now)
            elif op < 0.8:
                queues = rng.choice((["q1"], ["q2"], ["q1", "q2"], ["q2", "q1"]))
                params = ClaimParams(queues=queues, worker_id="w", limit=rng.randint(1, 8), now=now)
                claimed = lines.job_claim(params)
                assert seen(claimed) == seen(in_rounds(functools.partial(rounds.job_claim, params)))
                assert over_cap(tmp_path / "lines.db", claimed) == []
                running += claimed
            elif op < 0.93 and running:
                ending = [running.pop(rng.randrange(len(running)))]
                if running and rng.random() < 0.5:
                    ending.append(running.pop(rng.randrange(len(running))))
                twins = [rounds.job_get(job.id) for job in ending]  # with their own tokens
                done = [Completion(lease=job.lease) for job in ending]
                twin_done = [Completion(lease=twin.lease) for twin in twins if twin is not None]
                if rng.random() < 0.5:  # then a claim in the same transaction (a worker's)
                    params = ClaimParams(
                        queues=rng.choice((["q1"], ["q1", "q2"])),
                        worker_id="w",
                        limit=rng.randint(1, 8),
                        now=now,
                    )
                    ended, claimed = lines.job_complete_claim(done, params)
                    call = functools.partial(rounds.job_complete_claim, twin_done, params)
                    twin_ended, twin_claimed = in_rounds(call)
                    assert (ended, seen(claimed)) == (twin_ended, seen(twin_claimed))
                    assert over_cap(tmp_path / "lines.db", claimed) == []
                    running += claimed
                else:
                    ended = lines.job_complete(done, now=now)
                    assert ended == rounds.job_complete(twin_done, now=now)
            else:
                now += rng.choice((0.5, 2.0, 5.0))
        assert rows(tmp_path / "lines.db") == rows(tmp_path / "rounds.db")
    finally:
        lines.close()
        rounds.close()
