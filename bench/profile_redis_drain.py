"""Profile the Redis drain: server CPU per job, by the crawl features the jobs carry.

    .venv/bin/python bench/profile_redis_drain.py                       # plain, then all
    .venv/bin/python bench/profile_redis_drain.py --crawl none,limit,key,crawl --runs 2
    .venv/bin/python bench/profile_redis_drain.py --zset-listpack-entries 0

A private redis-server (tests/servers.py: append-only file, fsync every second) per run;
N no-op jobs queued with ``schedule_many`` (500 a call), then one ``crawlq worker --burst
--concurrency 8`` drains them. Each ``--crawl`` value is a comma-free name: ``none``
(plain jobs), ``crawl`` (membership in one crawl kept open by a job 30 days away),
``key`` (a unique key, a URL), ``limit`` (a limit key, one of 100 host names, with no
limit set) or ``all`` (the three, as the peers bench's crawlq+crawl). For the schedule and
the drain it prints jobs/s, the server's CPU per job (``INFO cpu``, the whole server) and
the ``FCALL`` time per job (``INFO commandstats``: the scripts' own time), and the worker
process's CPU per job. ``--zset-listpack-entries`` sets the server's
``zset-max-listpack-entries`` before the jobs are queued (Redis 7; default: the server's,
128): below that many members a sorted set is a listpack, whose every insert and
look-up by score reads the members' scores as text. The crawlq imported is this
checkout's. One run says little on a shared machine: alternate runs of two trees.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import redis  # noqa: E402
from profile_drain import FEATURES, fill  # noqa: E402  (bench/ is sys.path[0])

from tests.servers import PrivateRedis  # noqa: E402

TASKS = """
import crawlq

app = crawlq.App({url!r})


@app.task(name="bench.noop")
def noop(ctx, i):
    return None
"""


def features(name: str) -> tuple[str, ...]:
    """The crawl features of a ``--crawl`` run's jobs (profile_drain.fill's choice)."""
    if name == "all":
        return FEATURES
    if name == "none":
        return ()
    if name not in FEATURES:
        raise SystemExit(f"--crawl: {name!r} is not none, all or one of {', '.join(FEATURES)}")
    return (name,)


def server_times(client: redis.Redis) -> tuple[float, float]:
    """The server's CPU seconds so far, and the seconds its FCALLs took."""
    cpu = client.info("cpu")
    fcall = client.info("commandstats").get("cmdstat_fcall", {}).get("usec", 0)
    return cpu["used_cpu_sys"] + cpu["used_cpu_user"], fcall / 1e6


def figures(n: int, elapsed: float, cpu: float, fcall: float) -> str:
    """Jobs/s, and the server's CPU and FCALL time per job, in microseconds."""
    return (
        f"{n / elapsed:7,.0f} jobs/s, server CPU {cpu / n * 1e6:5.1f} us/job, "
        f"FCALL {fcall / n * 1e6:5.1f}"
    )


def run(args: argparse.Namespace, name: str, workdir: Path) -> None:
    server = PrivateRedis()
    try:
        client = redis.Redis(port=server.port)
        if args.zset_listpack_entries is not None:
            client.config_set("zset-max-listpack-entries", args.zset_listpack_entries)
        module = f"proftasks_{server.port}"
        (workdir / f"{module}.py").write_text(TASKS.format(url=server.url))
        app = __import__(module).app
        client.config_resetstat()
        t0, (cpu0, fcall0) = time.perf_counter(), server_times(client)
        fill(app, args.n, features(name))
        elapsed, (cpu1, fcall1) = time.perf_counter() - t0, server_times(client)
        app.close()
        print(f"{name:6} schedule: {figures(args.n, elapsed, cpu1 - cpu0, fcall1 - fcall0)}")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(workdir), str(REPO)])}
        worker = [sys.executable, "-m", "crawlq", "worker", "--app", f"{module}:app"]
        worker += ["--store", server.url, "--concurrency", "8", "--burst", "--log-level", "warning"]
        client.config_resetstat()
        t0, (cpu0, fcall0), own0 = time.perf_counter(), server_times(client), os.times()
        subprocess.run(worker, env=env, check=True)
        elapsed, (cpu1, fcall1), own1 = time.perf_counter() - t0, server_times(client), os.times()
        worker_cpu = (own1.children_user + own1.children_system) - (
            own0.children_user + own0.children_system
        )
        print(
            f"{name:6} drain:    {figures(args.n, elapsed, cpu1 - cpu0, fcall1 - fcall0)}, "
            f"worker CPU {worker_cpu / args.n * 1e6:5.1f} us/job",
            flush=True,
        )
        client.close()
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20_000, help="jobs (default 20,000)")
    parser.add_argument(
        "--crawl", default="none,all", help="comma-separated runs: none, crawl, key, limit, all"
    )
    parser.add_argument("--runs", type=int, default=1, help="rounds of the --crawl list")
    parser.add_argument("--zset-listpack-entries", type=int, metavar="N")
    args = parser.parse_args()
    names = [n for n in args.crawl.split(",") if n]
    for name in names:
        features(name)  # every name checked before the first run
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)  # each run's task module
        for _ in range(args.runs):
            for name in names:
                run(args, name, Path(tmp))


if __name__ == "__main__":
    main()
