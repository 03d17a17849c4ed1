"""What one-call scheduling on Redis is made of: crawlq's ``task.schedule`` against a Huey
task, alternated on one private Redis, per job: wall time, client CPU, the server's time,
and the rest (the round trip and waits); then the server's time for variants of crawlq's
function library (what the commands cost, what the script around them costs).

    .venv-peers/bin/python bench/peers/redis_one_call.py          # 5,000 calls, 2 rounds
    .venv-peers/bin/python bench/peers/redis_one_call.py -n 20000 --rounds 3

Server time is commandstats' ``usec``: FCALL's own (it holds the commands the function
calls), or the sum of every command for Huey (one LPUSH a job). Runs from the peers'
virtualenv (it imports Huey). Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import redis  # noqa: E402
import servers  # noqa: E402  (tests/servers.py: a private Redis on 127.0.0.1)
from huey import RedisHuey  # noqa: E402

import crawlq  # noqa: E402
from crawlq.stores.redis import lua  # noqa: E402

COMMANDS = """
  local t = redis.call('TIME')
  local id = redis.call('INCR', 'v:ids')
  redis.call('HSET', 'v:job:' .. id, 'queue', 'default', 'state', 'pending', 'attempts', '0',
    'created_at', '1.5', 'task', 'm.noop', 'args', '[1]', 'kwargs', '{}', 'priority', '0',
    'run_at', '1.5', 'max_attempts', '3', 'lease_seconds', '60')
  redis.call('ZADD', 'v:jobs', id, id)
  redis.call('SADD', 'v:queues', 'default')
  redis.call('ZADD', 'v:level', 1.5, 'a' .. id)
  redis.call('ZADD', 'v:prios', 0, '0')
  redis.call('HINCRBY', 'v:counts', 'pending', 1)
  redis.call('HINCRBY', 'v:counts', 'total_enqueued', 1)
  redis.call('PUBLISH', 'v:wake', '1.5')
  redis.call('ZRANGE', 'v:waiters', 0, -1, 'WITHSCORES')
  return id
"""
"""The 11 commands job_schedule_plain.lua sends for one job, with constant arguments."""


def server_usec(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    if "cmdstat_fcall" in stats:
        return float(stats["cmdstat_fcall"]["usec"])
    return float(sum(v["usec"] for k, v in stats.items() if "config" not in k))


def split(client: redis.Redis, name: str, call: Callable[[int], Any], n: int) -> str:
    for i in range(300):  # connections made, scripts loaded
        call(i)
    client.config_resetstat()
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(n):
        call(i)
    wall, cpu = (time.perf_counter() - wall) / n * 1e6, (time.process_time() - cpu) / n * 1e6
    server = server_usec(client) / n
    rest = wall - cpu - server
    return f"| {name} | {1e6 / wall:,.0f} | {wall:.0f} | {cpu:.0f} | {server:.1f} | {rest:.0f} |"


def variants(client: redis.Redis, n: int) -> list[str]:
    """FCALL µs of job_schedule_plain and of variants in a copy of crawlq's library."""
    body = lua.BODIES["job_schedule_plain"]
    functions = {
        "job_schedule_plain as it is": None,
        "empty function": "return 1",
        "begin() only": "begin(ARGV)\nreturn 1",
        "job_schedule_plain without commit()": "begin(ARGV)\n" + body.replace("commit(now)", ""),
        "its 11 commands, constant arguments": COMMANDS,
    }
    extra = "".join(
        f"redis.register_function('v_{i}', function(KEYS, ARGV)\n{src}\nend)\n"
        for i, src in enumerate(functions.values())
        if src is not None
    )
    client.function_load(lua.library_source().replace(lua.LIBRARY, "v") + extra, replace=True)
    args = ["bq", "", "default", "m.noop", "[1]", "{}", "0", "", "0", "3", "60", ""]
    rows = []
    for i, (label, src) in enumerate(functions.items()):
        name = "v_job_schedule_plain" if src is None else f"v_{i}"
        client.config_resetstat()
        for _ in range(n):
            client.fcall(name, 0, *args)
        usec = client.info("commandstats")["cmdstat_fcall"]["usec_per_call"]
        rows.append(f"| {label} | {usec} |")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="calls per measurement (5,000)")
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds (2)")
    args = parser.parse_args()
    server = servers.redis()
    client = redis.Redis.from_url(server.url)
    app = crawlq.App(store=server.url)

    @app.task(name="bench.noop")
    def noop(ctx: crawlq.JobContext, i: int) -> None:
        return None

    huey = RedisHuey("bench", url=server.url)

    @huey.task()  # type: ignore[misc]
    def huey_noop(i: int) -> None:
        return None

    print("| system | jobs/s | wall µs/job | client CPU µs/job | server µs/job | rest µs/job |")
    print("|---|---:|---:|---:|---:|---:|")
    for _ in range(args.rounds):
        print(split(client, "crawlq", noop.schedule, args.n))
        print(split(client, "huey", huey_noop, args.n))
    app.close()
    print("\n| function (in a copy of crawlq's library) | FCALL µs |\n|---|---:|")
    for _ in range(args.rounds):
        client.flushall()
        print("\n".join(variants(client, args.n)))


if __name__ == "__main__":
    main()
