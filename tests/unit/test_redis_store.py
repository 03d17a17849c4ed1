"""What only the Redis store has to prove: server settings, prefixes, restarts, wake-ups,
error translation and its key layout. Behaviour shared with every store is proven by the
conformance suite in tests/stores."""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from string import Formatter
from typing import Any, TypeVar

import pytest

import crawlq
from crawlq.crawls import CrawlSpec
from crawlq.jobs import JobSpec, JobState
from crawlq.limits import Limits
from crawlq.stores import open_store
from crawlq.stores.base import (
    ClaimParams,
    Completion,
    Failure,
    JobFilter,
    Release,
    Store,
    WaitParams,
)
from tests import servers

redis = pytest.importorskip("redis")
from crawlq.stores.redis import keys  # noqa: E402  (needs redis)
from crawlq.stores.redis.lua import FUNCTIONS, LIBRARY, SCRIPTS  # noqa: E402  (needs redis)
from crawlq.stores.redis.store import RedisStore  # noqa: E402

T = TypeVar("T")


def spec(queue: str = "q", **fields: Any) -> JobSpec:
    return JobSpec(queue=queue, task="t", **fields)


def open_on(url: str, prefix: str, *options: str) -> Store:
    return open_store(f"{url}?prefix={prefix}" + "".join(f"&{o}" for o in options))


@pytest.fixture
def server() -> servers.PrivateRedis:
    return servers.redis()


@pytest.fixture
def prefix(tmp_path: Path) -> str:
    return servers.isolated_name(tmp_path, "u")


@contextmanager
def throwaway_redis(*options: str) -> Iterator[str]:
    """A redis-server of this test's own, started with ``options``; yields its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        servers.unavailable("Redis", "apt-get install redis-server")
    assert binary is not None
    port = servers.free_port()
    with tempfile.TemporaryDirectory(prefix="crawlq-redis-") as directory:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", directory]
        proc = subprocess.Popen(
            [*argv, "--daemonize", "no", *options],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            servers.wait_for_port(port, 30)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            proc.kill()
            proc.wait(30)


# -- server settings ---------------------------------------------------------------------


def test_an_evicting_server_is_refused() -> None:
    with throwaway_redis("--maxmemory-policy", "allkeys-lru", "--appendonly", "yes") as url:
        with pytest.raises(crawlq.ConfigurationError) as err:
            open_on(url, "p")
    message = str(err.value)
    assert "maxmemory-policy allkeys-lru" in message
    assert "CONFIG SET maxmemory-policy noeviction" in message and "redis.conf" in message


def test_a_server_that_persists_nothing_is_reported_or_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with throwaway_redis("--appendonly", "no", "--save", "") as url:
        with caplog.at_level(logging.WARNING, logger="crawlq.stores.redis"):
            open_on(url, "p").close()
        [record] = caplog.records
        assert record.levelno == logging.WARNING
        assert "persists nothing" in record.getMessage()
        assert "appendonly yes" in record.getMessage()
        with pytest.raises(crawlq.ConfigurationError, match="appendonly yes"):
            open_on(url, "p", "require_persistence=1")


def test_a_warning_about_the_server_shows_once_a_day_per_store_and_never_to_lookers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with throwaway_redis("--appendonly", "no", "--save", "") as url:
        client = redis.Redis.from_url(url)

        def warnings(*options: str, create: bool = True) -> list[str]:
            caplog.clear()
            query = "&".join(["prefix=p", *options])
            with caplog.at_level(logging.WARNING, logger="crawlq.stores.redis"):
                open_store(f"{url}?{query}", create=create).close()
            return [r.getMessage() for r in caplog.records]

        assert warnings(create=False) == []  # a caller that only looks is never warned
        [first] = warnings()
        assert "persists nothing" in first and "once a day per store" in first
        assert warnings() == []  # the next opener, on any machine, stays quiet
        assert warnings("socket_timeout=5") == []
        assert 86000 < client.ttl("p:warned:nothing") <= 86400
        with pytest.raises(crawlq.ConfigurationError, match="require_persistence"):
            warnings("require_persistence=1")  # refusing is not warning: every time
        client.delete("p:warned:nothing")  # as if a day had passed
        assert len(warnings()) == 1
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="crawlq.stores.redis"):
            open_on(url, "other").close()  # another store on the server has its own day
        assert len(caplog.records) == 1


def test_snapshots_only_are_reported_and_append_only_is_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with throwaway_redis("--appendonly", "no", "--save", "3600 1") as url:
        with caplog.at_level(logging.WARNING, logger="crawlq.stores.redis"):
            open_on(url, "p", "require_persistence=1").close()
        assert "snapshots only" in caplog.text
        caplog.clear()
        redis.Redis.from_url(url).config_set("appendonly", "yes")
        with caplog.at_level(logging.WARNING, logger="crawlq.stores.redis"):
            open_on(url, "p", "require_persistence=1").close()
        assert caplog.records == []


def test_a_server_without_config_is_reported_as_unchecked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with throwaway_redis("--rename-command", "CONFIG", "") as url:
        with caplog.at_level(logging.WARNING, logger="crawlq.stores.redis"):
            store = open_on(url, "p")
        assert "could not check" in caplog.text and "noeviction" in caplog.text
        [result] = store.job_schedule([spec()])
        assert store.job_get(result.job_id) is not None
        store.close()


@pytest.mark.parametrize(
    ("query", "match"),
    [
        ("prefix=p&colour=blue", "unknown Redis store option"),
        ("prefix=", "prefix"),
        ("require_persistence=maybe", "yes/no"),
        ("socket_timeout=soon", "number of seconds"),
    ],
)
def test_bad_url_options_are_refused(server: servers.PrivateRedis, query: str, match: str) -> None:
    with pytest.raises(crawlq.ConfigurationError, match=match):
        open_store(f"{server.url}?{query}")


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.delitem(sys.modules, "crawlq.stores.redis.store")
    with pytest.raises(crawlq.ConfigurationError, match=r"pip install 'crawlq\[redis\]'"):
        open_store("redis://127.0.0.1:1/0")


# -- prefixes ----------------------------------------------------------------------------


def test_prefixes_isolate_two_stores_on_one_server(
    server: servers.PrivateRedis, prefix: str
) -> None:
    a = open_on(server.url, prefix + "a")
    b = open_on(server.url, prefix + "b")
    [made] = a.job_schedule([spec(key="k")])
    assert b.job_list(JobFilter()) == [] and b.queue_stats() == []
    assert b.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=5)) == []
    [other] = b.job_schedule([spec(key="k")])
    assert other.outcome is crawlq.Outcome.CREATED, "keys are unique per prefix"
    assert [j.id for j in a.job_list(JobFilter())] == [made.job_id]
    client = redis.Redis.from_url(server.url, decode_responses=True)
    names = list(client.scan_iter(match=f"{prefix}a*"))
    assert names and all(n.startswith(f"{prefix}a:") for n in names)
    a.close()
    b.close()


def _template_regex(template: str, prefix: str) -> re.Pattern[str]:
    parts = [
        re.escape(literal) + ("" if name is None else re.escape(prefix) if name == "p" else ".+")
        for literal, name, _, _ in Formatter().parse(template)
    ]
    return re.compile("^" + "".join(parts) + "$")


def test_every_key_follows_the_documented_layout(server: servers.PrivateRedis, prefix: str) -> None:
    """Run every operation, then check each key against keys.TEMPLATES."""
    from crawlq.stores.redis import keys

    store = open_on(server.url, prefix)
    store.job_schedule([spec(key="a:b", priority=-2), spec("q:p:1", priority=7), spec()])
    jobs = store.job_claim(ClaimParams(queues=["q", "q:p:1"], worker_id="w", limit=3))
    store.job_schedule([spec(key="a:b", delay=5)])
    store.job_complete([Completion(lease=jobs[0].lease, children=[spec("kids")])])
    store.job_cancel([jobs[1].id])
    store.job_schedule([spec("q:p:1", priority=7, delay=60)])
    for worker in ("w", "w:x", "gone"):
        store.worker_register(
            crawlq.WorkerInfo(
                id=worker, host="h", pid=1, queues=("q",), runtime="thread", concurrency=1
            )
        )
    store.worker_stop("gone", done=0, failed=0)
    store.maintenance_acquire("reap", "w", 10.0)
    on_finish = spec("done")
    crawl = store.crawl_create(
        CrawlSpec(name="c", on_finish=on_finish, limits=Limits(max_running=1)),
        [spec(limit_key="h:1", fingerprint=bytes(16)), spec(limit_key="h:1")],
    )
    store.seen_add(crawl.id, [b"x" * 16])
    store.result_add(crawl.id, [(b"y" * 16, "{}")])
    store.cache_set("robots:h:1", "User-agent: *", 60.0)
    store.limit_set("h:2", Limits(min_interval=1.0))
    store.limit_block("h:3", 1e12)
    store.limit_set_default("q", Limits(max_running=2))
    regexes = [_template_regex(t, prefix) for t in keys.TEMPLATES.values()]
    client = redis.Redis.from_url(server.url, decode_responses=True)
    names = sorted(client.scan_iter(match=f"{prefix}:*"))
    assert len(names) > 10
    assert [n for n in names if not any(r.match(n) for r in regexes)] == []
    assert keys.key("level", prefix, queue="q:p:1", priority=7) in names
    expected: list[tuple[str, dict[str, object]]] = [
        ("crawl", {"crawl": crawl.id}),
        ("seen", {"crawl": crawl.id}),
        ("crawl_pending", {"crawl": crawl.id}),
        ("limit", {"lkey": "h:1"}),
        ("limit_waiting", {"lkey": "h:1"}),
        ("limit", {"lkey": "h:3"}),
        ("limit_keys", {}),
        ("limit_defaults", {}),
        ("crawls", {}),
        ("crawl_ids", {}),
        ("result_keys", {"crawl": crawl.id}),
        ("results", {"crawl": crawl.id}),
        ("cache", {"ckey": "robots:h:1"}),
    ]
    for name, parts in expected:
        assert keys.key(name, prefix, **parts) in names, name
    store.close()


def test_cache_entries_expire_natively_a_minute_after_their_ttl(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """Expired entries do not pile up: each key has a native expiry, on the server's clock,
    of ttl plus a grace (a caller's ``now`` can be any time, so the stored expires_at
    decides; the native expiry only frees the memory)."""
    from crawlq.stores.redis import keys

    store = open_on(server.url, prefix)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    store.cache_set("a", "v", 10.0)
    assert store.cache_add("b", "v", 0.5, now=1_000_000.0)
    assert 69_000 < client.pttl(keys.key("cache", prefix, ckey="a")) <= 70_000
    assert 60_000 < client.pttl(keys.key("cache", prefix, ckey="b")) <= 60_500
    store.cache_set("a", "w", 3600.0)  # an overwrite sets a new expiry
    assert client.pttl(keys.key("cache", prefix, ckey="a")) > 3_600_000
    store.close()


def test_every_way_out_of_running_leaves_the_workers_set(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """{p}:wjobs:{worker} holds exactly the worker's running jobs, so worker_reap finds
    them without scanning {p}:running."""
    from crawlq.stores.redis import keys

    store = open_on(server.url, prefix)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    held = keys.key("worker_jobs", prefix, worker="w")
    store.job_schedule([spec(lease_seconds=5) for _ in range(6)], now=100.0)
    jobs = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=6, now=100.0))
    assert client.smembers(held) == {str(j.id) for j in jobs}
    a, b, c, d, e, f = jobs
    store.job_complete([Completion(lease=a.lease)])
    store.job_fail([Failure(lease=b.lease, error="x", retry_delay=None)])
    store.job_fail([Failure(lease=c.lease, error="x", retry_delay=1.0)])
    store.job_release([Release(lease=d.lease)])
    store.job_cancel([e.id])
    assert client.smembers(held) == {str(f.id)}
    assert store.job_expire_leases(now=106.0) == [f.id]
    assert not client.exists(held)
    store.close()


def test_every_script_opens_with_its_header() -> None:
    from importlib import resources

    from crawlq.stores.redis.store import SCRIPTS

    folder = resources.files("crawlq.stores.redis").joinpath("scripts")
    for name in SCRIPTS:
        head = folder.joinpath(f"{name}.lua").read_text().split("\n\n")[0:3]
        text = "\n".join(head)
        assert text.startswith(f"-- {name}.lua: "), name
        for part in ("-- KEYS:", "-- ARGV:", "-- Returns:", "-- Touches:"):
            assert part in text, (name, part)


# -- how the Lua reaches the server (lua.py) ---------------------------------------------


def _calls(client: Any, command: str) -> int:
    return int(client.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def _round_trip(store: Store, priority: int) -> None:
    """Schedule, claim and complete one job of ``priority``."""
    store.job_schedule([spec(priority=priority)])
    (job,) = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=5))
    assert store.job_complete([Completion(lease=job.lease)]) == [True]


def test_every_script_is_one_function_of_one_library(
    server: servers.PrivateRedis, prefix: str
) -> None:
    store = open_on(server.url, prefix)
    _round_trip(store, 0)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    (library,) = [  # RESP2: flat lists of name, value
        dict(zip(lib[::2], lib[1::2], strict=True))
        for lib in client.function_list()
        if LIBRARY in lib
    ]
    names = [dict(zip(f[::2], f[1::2], strict=True))["name"] for f in library["functions"]]
    assert sorted(names) == sorted(FUNCTIONS.values())
    assert len(FUNCTIONS) == len(SCRIPTS) and LIBRARY.startswith("crawlq_")
    assert isinstance(store, RedisStore) and store._lua._scripts == {}, (
        "a store that calls functions builds no EVALSHA source (each holds the prelude)"
    )
    store.close()


def test_a_call_starts_with_fresh_tables(server: servers.PrivateRedis, prefix: str) -> None:
    """The library's helpers live across calls; what one call remembers (the priorities
    and queues it has seen, crawl states) must not: the next job of a priority whose level
    the last claim emptied is claimable."""
    store = open_on(server.url, prefix)
    for _ in range(3):
        _round_trip(store, 5)
    store.close()


def test_without_functions_the_same_scripts_go_by_evalsha(
    server: servers.PrivateRedis, prefix: str
) -> None:
    client = redis.Redis.from_url(server.url)
    store = open_on(server.url, prefix, "functions=0")
    evalsha, fcall = _calls(client, "evalsha"), _calls(client, "fcall")
    _round_trip(store, 5)
    client.script_flush()  # NOSCRIPT -> SCRIPT LOAD -> EVALSHA
    _round_trip(store, 5)
    assert _calls(client, "evalsha") >= evalsha + 6
    assert _calls(client, "fcall") == fcall
    assert isinstance(store, RedisStore)
    built = set(store._lua._scripts)
    assert "job_schedule_plain" in built and built < set(SCRIPTS), "only the scripts run"
    store.close()


@pytest.mark.parametrize(
    ("option", "command"), [("functions=1", "fcall"), ("functions=0", "evalsha")]
)
def test_a_turn_is_one_script_call(
    server: servers.PrivateRedis, prefix: str, option: str, command: str
) -> None:
    """``job_complete_claim``: the completions with their children, then the claim that
    sees them, in one call of job_complete_claim.lua (its parts inlined, ``lua.py``)."""
    client = redis.Redis.from_url(server.url)
    store = open_on(server.url, prefix, option)
    store.job_schedule([spec(), spec()])
    (job,) = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=1))
    child = spec(args=["child"], priority=9)
    params = ClaimParams(queues=["q"], worker_id="w", limit=2)
    answers, jobs = store.job_complete_claim(
        [Completion(lease=job.lease, children=[child])], params
    )
    assert answers == [True] and [j.args for j in jobs] == [["child"], []]
    calls = _calls(client, command)  # the script is loaded now (EVALSHA: NOSCRIPT first)
    stale, more = store.job_complete_claim([Completion(lease=job.lease)], params)
    assert (stale, more) == ([False], [])
    assert _calls(client, command) == calls + 1
    store.close()


def test_a_server_that_refuses_info_gets_the_scripts(
    server: servers.PrivateRedis, prefix: str
) -> None:
    admin = redis.Redis.from_url(server.url)
    user = f"noinfo-{prefix}"
    admin.acl_setuser(
        user, enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
        categories=["+@all"], commands=["-info"],
    )  # fmt: skip
    try:
        store = open_on(server.url.replace("redis://", f"redis://{user}:pw@"), prefix)
        assert isinstance(store, RedisStore) and not store._lua.functions
        _round_trip(store, 0)
        store.close()
    finally:
        admin.acl_deluser(user)


# -- restarts and errors -----------------------------------------------------------------


def _until_available(call: Callable[[], T], timeout: float = 10.0) -> T:
    """Call until the store answers instead of raising StoreUnavailable."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except crawlq.StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_the_same_store_works_after_a_server_restart(
    server: servers.PrivateRedis, prefix: str
) -> None:
    store = open_on(server.url, prefix)
    assert isinstance(store, RedisStore)
    store.job_schedule([spec(args=[i]) for i in range(300)])
    claimed = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=40))
    assert store.job_complete([Completion(lease=j.lease, result=j.id) for j in claimed[:20]])
    before = store.job_list(JobFilter())
    store.job_wait(WaitParams(queues=["q"], timeout=1.0))  # opens a pub/sub connection

    server.restart()  # SIGKILL, then start again from the append-only file
    client = redis.Redis.from_url(server.url)
    started = time.monotonic()
    after = _until_available(lambda: store.job_list(JobFilter()))
    assert time.monotonic() - started < 10
    assert after == before, "no acknowledged change is lost"
    assert client.function_delete(LIBRARY), "the library survived the restart (append-only file)"

    leases = [Completion(lease=j.lease) for j in claimed[20:]]
    assert store.job_complete(leases) == [True] * 20, "leases survive the restart"
    rest = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=500))
    assert len(rest) == 260 and client.function_list(LIBRARY), "loaded again on first use"
    store.job_wait(WaitParams(queues=["q"], timeout=0.05))  # a fresh pub/sub connection
    stats = store.queue_stats()[0]
    assert (stats.running, stats.done, stats.due) == (260, 40, 0)
    store.close()


def test_function_calls_keep_connections_of_their_own(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """Function calls go out on connections the store keeps (``LuaRunner._fcall``): as
    many as calls ran at once; an error reply keeps its connection; a connection the
    server dropped fails one call (which did not run: nothing is lost or doubled) and
    reconnects on its next use; ``close`` closes them all."""
    store = open_on(server.url, prefix)
    assert isinstance(store, RedisStore) and store._lua.functions
    client = redis.Redis.from_url(server.url, decode_responses=True)
    threads = [
        threading.Thread(target=lambda: [store.job_schedule([spec()]) for _ in range(50)])
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = len(store._lua._idle)
    assert 1 <= kept <= 6, kept

    client.function_flush()  # the next call's error reply: the library is loaded again
    store.job_schedule([spec()])
    assert len(store._lua._idle) == kept, "the error reply kept its connection"

    for conn in store._lua._idle:  # the server drops every connection of the runner
        assert conn._sock is not None
        host, port = conn._sock.getsockname()[:2]
        assert client.client_kill_filter(addr=f"{host}:{port}") == 1
    scheduled, failed = 301, 0
    while failed < 2 * kept + 1:
        try:
            store.job_schedule([spec()])
            scheduled += 1
        except crawlq.StoreUnavailable:
            failed += 1
            continue
        if scheduled >= 301 + 2 * kept:
            break
    assert 1 <= failed <= kept, ("each dropped connection fails one call at most", failed, kept)
    assert store.queue_stats()[0].due == scheduled, "nothing lost, nothing run twice"

    def ours() -> int:
        return sum(c["cmd"] == "fcall" for c in client.client_list(_type="normal"))

    assert ours() >= 1
    store.close()
    assert store._lua._idle == []
    deadline = time.monotonic() + 5
    while ours() and time.monotonic() < deadline:  # the server sees a close a moment later
        time.sleep(0.01)
    assert ours() == 0, client.client_list(_type="normal")
    client.close()


def test_driver_errors_become_store_errors_with_their_cause(
    server: servers.PrivateRedis, prefix: str
) -> None:
    with pytest.raises(crawlq.StoreUnavailable) as unreachable:
        open_store(f"redis://127.0.0.1:{servers.free_port()}/0")
    assert isinstance(unreachable.value.__cause__, redis.ConnectionError)

    store = open_on(server.url, prefix)
    redis.Redis.from_url(server.url).hset(f"{prefix}:ids", "not", "a counter")
    with pytest.raises(crawlq.StoreError) as failed:
        store.job_schedule([spec()])
    assert isinstance(failed.value.__cause__, redis.ResponseError)
    assert not isinstance(failed.value, crawlq.StoreUnavailable)
    store.close()

    with throwaway_redis("--appendonly", "yes") as url:
        store = open_on(url, "p")
        assert store.job_schedule([spec()])
    with pytest.raises(crawlq.StoreUnavailable) as gone:
        store.job_claim(ClaimParams(queues=["q"], worker_id="w"))
    assert isinstance(gone.value.__cause__, redis.ConnectionError)
    with pytest.raises(crawlq.StoreUnavailable):
        store.job_wait(WaitParams(queues=["q"], timeout=1.0))
    store.close()


# -- waiting -----------------------------------------------------------------------------


def _wait_in_thread(store: Store, timeout: float) -> tuple[threading.Thread, list[float]]:
    """Start ``store.job_wait`` in a thread; the list gets the monotonic time it returned."""
    returned: list[float] = []

    def wait() -> None:
        store.job_wait(WaitParams(queues=["other", "q"], timeout=timeout))
        returned.append(time.monotonic())

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)
    assert returned == [], "nothing was due: the wait must not return early"
    return thread, returned


def test_an_idle_wait_wakes_up_soon_after_another_store_schedules(
    server: servers.PrivateRedis, prefix: str
) -> None:
    waiting, scheduling = open_on(server.url, prefix), open_on(server.url, prefix)
    for _ in range(3):
        thread, returned = _wait_in_thread(waiting, 10.0)
        scheduling.job_schedule([spec()])
        sent = time.monotonic()
        thread.join(5)
        assert returned and returned[0] - sent < 0.1
        assert waiting.job_claim(ClaimParams(queues=["q"], worker_id="w"))
    waiting.close()
    scheduling.close()


def test_a_job_scheduled_for_later_wakes_the_wait_when_it_is_due(
    server: servers.PrivateRedis, prefix: str
) -> None:
    waiting, scheduling = open_on(server.url, prefix), open_on(server.url, prefix)
    thread, returned = _wait_in_thread(waiting, 10.0)
    scheduling.job_schedule([spec(delay=3600)])
    time.sleep(0.2)
    assert returned == [], "a job due in an hour is no reason to wake up now"
    scheduling.job_schedule([spec(delay=0.3)])
    sent = time.monotonic()
    thread.join(5)
    assert returned and 0.25 <= returned[0] - sent < 1.0
    waiting.close()
    scheduling.close()


def test_a_wait_returns_at_once_when_work_is_due(server: servers.PrivateRedis, prefix: str) -> None:
    store = open_on(server.url, prefix)
    store.job_schedule([spec()])
    started = time.monotonic()
    store.job_wait(WaitParams(queues=["q"], timeout=5.0))
    assert time.monotonic() - started < 0.1
    [job] = store.job_claim(ClaimParams(queues=["q"], worker_id="w"))
    assert job.state is JobState.RUNNING
    started = time.monotonic()
    store.job_wait(WaitParams(queues=["q"], timeout=0.3))
    assert time.monotonic() - started >= 0.25, "a running job is not work to wait for"
    store.close()


def test_a_long_wait_outlasts_the_socket_timeout(server: servers.PrivateRedis, prefix: str) -> None:
    store = open_on(server.url, prefix, "socket_timeout=0.2")
    started = time.monotonic()
    store.job_wait(WaitParams(queues=["q"], timeout=0.6))
    assert time.monotonic() - started >= 0.55
    store.close()


# -- what the scripts compare ------------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "outcome"),
    [
        ([1, {"a": 2.0}], [1.0, {"a": 2}], crawlq.Outcome.UNCHANGED),
        ([True], [1], crawlq.Outcome.UNCHANGED),
        ([{"a": 1, "b": 2}], [{"b": 2, "a": 1}], crawlq.Outcome.UNCHANGED),
        ([None, "x"], [None, "x"], crawlq.Outcome.UNCHANGED),
        ([[1, 2]], [(1, 2)], crawlq.Outcome.UPDATED),
        ([(1, 2)], [(1, 2)], crawlq.Outcome.UPDATED),
        ([1], [2], crawlq.Outcome.UPDATED),
        (["1"], [1], crawlq.Outcome.UPDATED),
        ([None], [0], crawlq.Outcome.UPDATED),
        ([[1, 2]], [[2, 1]], crawlq.Outcome.UPDATED),
        ([{"a": 1}], [{"a": 1, "b": None}], crawlq.Outcome.UPDATED),
        ([2**60], [2**60 + 1], crawlq.Outcome.UPDATED),
    ],
)
def test_on_conflict_compares_arguments_as_the_sqlite_store_does(
    server: servers.PrivateRedis,
    prefix: str,
    tmp_path: Path,
    first: list[object],
    second: list[object],
    outcome: crawlq.Outcome,
) -> None:
    """The scripts compare digests of the arguments: they must agree with the Python
    equality that crawlq.stores.conflict.merge, and so the SQLite store, applies to a
    stored (JSON) request and a new one."""
    answers = []
    for store in (open_on(server.url, prefix), open_store(f"sqlite:///{tmp_path / 'jobs.db'}")):
        [created] = store.job_schedule([spec(key="k", args=first, delay=5)], now=1000.0)
        [again] = store.job_schedule([spec(key="k", args=second, delay=5)], now=1000.0)
        job = store.job_get(created.job_id)
        assert job is not None and again.job_id == created.job_id
        answers.append((again.outcome, job.args))
        store.close()
    assert answers[0] == answers[1]
    assert answers[0][0] is outcome


# -- crawls, seen sets and limit keys ----------------------------------------------------


def test_a_seen_set_holds_raw_fingerprints_at_under_100_bytes_each(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """keys.py documents about 72 bytes per entry (MEMORY USAGE, 100,000 members)."""
    from crawlq.stores.redis import keys

    store = open_on(server.url, prefix)
    crawl = store.crawl_create(CrawlSpec(name="c"), [])
    fingerprints = [i.to_bytes(16, "big") for i in range(20_000)]
    for i in range(0, len(fingerprints), 5000):
        assert store.seen_add(crawl.id, fingerprints[i : i + 5000]) == [True] * 5000
    client = redis.Redis.from_url(server.url)
    name = keys.key("seen", prefix, crawl=crawl.id)
    assert client.srandmember(name) in set(fingerprints)
    assert client.memory_usage(name, samples=0) / len(fingerprints) < 100
    info = store.crawl_get(crawl.id)
    assert info is not None and info.seen == 20_000
    store.close()


def test_jobs_without_crawl_or_limit_key_write_nothing_of_either(
    server: servers.PrivateRedis, prefix: str
) -> None:
    store = open_on(server.url, prefix)
    store.job_schedule([spec(), spec(key="k")], now=10.0)
    jobs = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=1, now=10.0))
    store.job_complete([Completion(lease=jobs[0].lease, children=[spec()])], now=11.0)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    names = set(client.scan_iter(match=f"{prefix}:*"))
    assert not [n for n in names if re.match(rf"{prefix}:(crawl|seen|cpend|limit|lwait)", n)]
    for job in store.job_list(JobFilter()):
        fields = client.hkeys(f"{prefix}:job:{job.id}")
        assert not {"crawl_id", "limit_key", "sub", "own_run_at"} & set(fields)
    store.close()


def test_a_blocked_key_keeps_one_job_in_the_claim_index(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """The claim only looks at the claim index: a key's waiting jobs sit in its own zset."""
    from crawlq.stores.redis import keys

    store = open_on(server.url, prefix)
    store.limit_block("slow", 1e9)
    store.job_schedule([spec(limit_key="slow") for _ in range(2000)], now=10.0)
    store.job_schedule([spec() for _ in range(3)], now=10.0)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    assert client.zcard(keys.key("level", prefix, queue="q", priority=0)) == 4
    assert client.zcard(keys.key("limit_waiting", prefix, lkey="slow")) == 1999
    claimed = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=10, now=20.0))
    assert len(claimed) == 3 and all(j.limit_key is None for j in claimed)
    [state] = store.limit_get(["slow"])
    assert state is not None and state.next_start == 1e9 and state.pending == 2000
    stats = store.queue_stats(now=20.0)[0]
    assert (stats.due, stats.scheduled, stats.waiting, stats.running) == (0, 1, 1999, 3)
    store.close()


def test_a_priority_zset_is_a_skiplist_from_its_first_job(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """A small claim-index zset would be a listpack, whose inserts parse every score: it is
    made a skiplist, and the member that makes it one is gone before the call ends."""
    store = open_on(server.url, prefix)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    level = keys.key("level", prefix, queue="q", priority=0)
    for round_ in range(2):  # the second time the zset is made again after it emptied
        store.job_schedule([spec(limit_key=f"host{n}") for n in range(5)], now=10.0)
        store.job_schedule([spec(args=[n]) for n in range(3)], now=10.0)
        assert client.object("encoding", level) == "skiplist"
        members = client.zrange(level, 0, -1)
        assert len(members) == 8 and all(len(m) < 20 for m in members), (round_, members)
        claimed = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=20, now=20.0))
        assert len(claimed) == 8
        assert not client.exists(level)
        store.job_complete([Completion(lease=j.lease) for j in claimed], now=21.0)
    store.close()


def test_waiting_jobs_order_by_priority_run_at_and_id_across_signs_and_fractions(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """The waiting zset encodes run_at as order-preserving hex: negative, zero, tiny and
    huge times sort as numbers do."""
    store = open_on(server.url, prefix)
    store.limit_set("k", Limits(max_running=1))
    times = [-1e9, -2.5, -1e-300, 0.0, 1e-300, 0.5, 3.0, 2.75, 1e15, 3.0]
    specs = [spec(limit_key="k", run_at=t, args=[n]) for n, t in enumerate(times)]
    specs += [spec(limit_key="k", run_at=5.0, priority=1, args=[100])]
    store.job_schedule([spec(limit_key="k", run_at=-3e9)], now=-3e9)
    [first] = store.job_claim(ClaimParams(queues=["q"], worker_id="w", now=-3e9))
    results = store.job_schedule(specs, now=-2e9)  # all wait: the key is at its cap
    store.job_complete([Completion(lease=first.lease)], now=2e15)
    order = []
    for _ in range(len(specs)):
        [job] = store.job_claim(ClaimParams(queues=["q"], worker_id="w", now=2e15))
        order.append(job.args[0])
        store.job_complete([Completion(lease=job.lease)], now=2e15)
    by_time = sorted(range(len(times)), key=lambda n: (times[n], results[n].job_id))
    assert order == [100, *by_time]
    store.close()


def test_a_crawls_pending_set_holds_exactly_its_pending_jobs(
    server: servers.PrivateRedis, prefix: str
) -> None:
    from crawlq.stores.redis import keys

    store = open_on(server.url, prefix)
    crawl = store.crawl_create(CrawlSpec(name="c"), [spec() for _ in range(4)], now=10.0)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    pending = keys.key("crawl_pending", prefix, crawl=crawl.id)
    jobs = store.job_list(JobFilter())
    assert client.smembers(pending) == {str(j.id) for j in jobs}
    a, b = store.job_claim(ClaimParams(queues=["q"], worker_id="w", limit=2, now=10.0))
    store.job_cancel([jobs[3].id], now=10.0)
    assert client.smembers(pending) == {str(jobs[2].id)}
    store.job_fail([Failure(lease=a.lease, error="x", retry_delay=1.0)], now=11.0)
    assert client.smembers(pending) == {str(jobs[2].id), str(a.id)}
    assert store.crawl_cancel(crawl.id, now=12.0)
    assert not client.exists(pending)
    store.job_complete([Completion(lease=b.lease, children=[spec(crawl=crawl.id)])], now=13.0)
    info = store.crawl_get(crawl.id)
    assert info is not None and (info.pending, info.running, info.done) == (0, 0, 1)
    assert info.cancelled == 3
    store.close()


def test_prune_pages_through_limit_keys(
    server: servers.PrivateRedis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from crawlq.stores.redis import queues as module

    monkeypatch.setattr(module, "PRUNE_BUDGET", 3)
    store = open_on(server.url, prefix)
    for n in range(10):
        store.limit_block(f"k{n:02}", 50.0 if n % 2 else 500.0, now=0.0)
    store.limit_set("k99", Limits(max_running=1), now=0.0)
    store.job_prune(retention=0.0, now=100.0)
    kept = [k.key for k in store.limit_list()]
    assert kept == ["k00", "k02", "k04", "k06", "k08", "k99"]
    store.close()


def test_a_new_front_wakes_the_wait(server: servers.PrivateRedis, prefix: str) -> None:
    """A key at its cap has nothing due; when its running job ends, the next job of the
    key becomes its front and the wake-up reaches waiting workers at once."""
    waiting, other = open_on(server.url, prefix), open_on(server.url, prefix)
    other.limit_set("k", Limits(max_running=1))
    other.job_schedule([spec(limit_key="k"), spec(limit_key="k")])
    [first] = other.job_claim(ClaimParams(queues=["q"], worker_id="w"))
    assert waiting.job_next_due(["q"]) is None
    thread, returned = _wait_in_thread(waiting, 10.0)
    other.job_complete([Completion(lease=first.lease)])
    sent = time.monotonic()
    thread.join(5)
    assert returned and returned[0] - sent < 0.1
    assert waiting.job_claim(ClaimParams(queues=["q"], worker_id="w"))
    waiting.close()
    other.close()


def test_resuming_a_crawl_wakes_the_wait(server: servers.PrivateRedis, prefix: str) -> None:
    waiting, other = open_on(server.url, prefix), open_on(server.url, prefix)
    crawl = other.crawl_create(CrawlSpec(name="c"), [spec()])
    assert other.crawl_pause(crawl.id)
    thread, returned = _wait_in_thread(waiting, 10.0)
    assert other.crawl_resume(crawl.id)
    sent = time.monotonic()
    thread.join(5)
    assert returned and returned[0] - sent < 0.1
    waiting.close()
    other.close()


# -- a worker's wait: the wake list and the claim behind it (job_wait_claim) -------------


def _waiting(store: Store, timeout: float) -> tuple[threading.Thread, list[list[Any]]]:
    """Start ``store.job_wait_claim`` for worker "w" in a thread, once it blocks; the list
    gets what it returned (or the error it raised)."""
    got: list[list[Any]] = []

    def wait() -> None:
        params = ClaimParams(queues=["other", "q"], worker_id="w", limit=4)
        try:
            got.append(store.job_wait_claim(params, timeout))
        except crawlq.StoreError as exc:
            got.append([exc])

    thread = threading.Thread(target=wait)
    thread.start()
    time.sleep(0.2)
    assert got == [], "nothing was due: the wait must not return early"
    return thread, got


@pytest.mark.parametrize(
    ("option", "command", "calls"), [("functions=1", "fcall", 2), ("functions=0", "evalsha", 1)]
)
def test_a_wake_up_brings_its_job_claimed_in_the_same_round_trip(
    server: servers.PrivateRedis, prefix: str, option: str, command: str, calls: int
) -> None:
    """The waiter's scripts after it blocks: only job_wait_end.lua, behind the pop (and,
    with functions, the other store's schedule): no claim of its own, no pub/sub."""
    client = redis.Redis.from_url(server.url, decode_responses=True)
    store, other = open_on(server.url, prefix, option), open_on(server.url, prefix)
    waiters = keys.key("waiters", prefix, queue="q")
    params = ClaimParams(queues=["q"], worker_id="w", limit=4)
    assert store.job_wait_claim(params, 0.05) == []  # the scripts are loaded now
    thread, got = _waiting(store, 10.0)
    assert client.zrange(waiters, 0, -1) == ["w"]
    before = _calls(client, command), _calls(client, "subscribe")
    [result] = other.job_schedule([spec()])
    thread.join(5.0)
    assert [[j.id for j in jobs] for jobs in got] == [[result.job_id]]
    assert (_calls(client, command), _calls(client, "subscribe")) == (before[0] + calls, before[1])
    assert client.zrange(waiters, 0, -1) == [], "the claim behind the pop deregistered it"
    assert not client.exists(keys.key("wait_list", prefix, worker="w"))
    store.close()
    other.close()


def test_a_waiter_that_went_away_leases_nothing(server: servers.PrivateRedis, prefix: str) -> None:
    """The claim pipelined behind the pop dies with the worker's connection: a job that
    becomes pending after that stays pending, for any worker to claim."""
    client = redis.Redis.from_url(server.url, decode_responses=True)
    store, other = open_on(server.url, prefix), open_on(server.url, prefix)
    thread, got = _waiting(store, 10.0)
    (blocked,) = [c for c in client.client_list() if c["cmd"] == "blpop"]
    client.client_kill_filter(_id=blocked["id"])
    thread.join(5.0)
    assert len(got) == 1 and isinstance(got[0][0], crawlq.StoreUnavailable)
    [result] = other.job_schedule([spec()])
    job = other.job_get(result.job_id)
    assert job is not None and job.state is JobState.PENDING
    wake_list = keys.key("wait_list", prefix, worker="w")
    assert 0 < client.pttl(wake_list) <= 60_000, "an unread wake list expires"
    assert [j.id for j in other.job_claim(ClaimParams(queues=["q"], worker_id="x"))] == [
        result.job_id
    ]
    store.close()
    other.close()


def test_a_registration_that_ran_out_gets_no_wake_up(
    server: servers.PrivateRedis, prefix: str
) -> None:
    client = redis.Redis.from_url(server.url, decode_responses=True)
    store = open_on(server.url, prefix)
    waiters = keys.key("waiters", prefix, queue="q")
    client.zadd(waiters, {"gone": 1.0})  # ran out long ago
    store.job_schedule([spec()])
    assert client.zrange(waiters, 0, -1) == []
    assert not client.exists(keys.key("wait_list", prefix, worker="gone"))
    store.close()


def test_without_fractional_blpop_a_wait_subscribes_then_claims(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """Redis 5 (BLPOP takes whole seconds): the gate's default, job_wait then a claim."""
    client = redis.Redis.from_url(server.url, decode_responses=True)
    store, other = open_on(server.url, prefix), open_on(server.url, prefix)
    assert isinstance(store, RedisStore)
    store._hand_off = False
    blpops = _calls(client, "blpop")
    thread, got = _waiting(store, 10.0)
    [result] = other.job_schedule([spec()])
    thread.join(5.0)
    assert [[j.id for j in jobs] for jobs in got] == [[result.job_id]]
    assert _calls(client, "blpop") == blpops
    assert client.zrange(keys.key("waiters", prefix, queue="q"), 0, -1) == []
    store.close()
    other.close()


# -- plain jobs: job_schedule_plain.lua ------------------------------------------------


@contextmanager
def _commands_logged(client: Any) -> Iterator[list[list[str]]]:
    """The commands the server ran meanwhile, as SLOWLOG keeps them (all of them while
    the threshold is 0)."""
    before = client.config_get("slowlog-log-slower-than")["slowlog-log-slower-than"]
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    logged: list[list[str]] = []
    try:
        yield logged
    finally:
        client.config_set("slowlog-log-slower-than", before)
        entries = client.slowlog_get(128)
        logged.extend(
            [a.decode() if isinstance(a, bytes) else a for a in e["command"].split()]
            if isinstance(e["command"], str | bytes)
            else e["command"]
            for e in reversed(entries)
        )


def _dump(client: Any, prefix: str) -> dict[str, Any]:
    """Every key under ``prefix`` (renamed to ``P``) with its type and whole value."""
    read = {
        "string": client.get,
        "hash": client.hgetall,
        "set": client.smembers,
        "list": lambda k: client.lrange(k, 0, -1),
        "zset": lambda k: client.zrange(k, 0, -1, withscores=True),
    }
    out = {}
    for name in client.scan_iter(match=f"{prefix}:*"):
        kind = client.type(name)
        out["P" + name.removeprefix(prefix)] = (kind, read[kind](name))
    return out


PLAIN_SPECS = [
    spec(),
    spec(args=[1, "é", {"a": [None, True, 1.5]}], kwargs={"x": "ü"}, priority=7),
    spec("r", priority=-3, delay=0.1, max_attempts=1, lease_seconds=0.1, timeout=2.5),
    spec(run_at=12.345678901234567, lease_seconds=1e-05, timeout=86400.0),
    spec("r", run_at=5.0, priority=7, lease_seconds=123456.789),
]


def test_plain_jobs_take_the_lean_script_and_write_what_the_general_one_does(
    server: servers.PrivateRedis, tmp_path: Path
) -> None:
    """A batch of plain jobs (no key, crawl, limit key or fingerprint) goes to
    job_schedule_plain.lua; every key it writes, and every wake-up, is what
    job_schedule.lua writes for the same specs (called directly on another prefix)."""
    from crawlq.jobs import Outcome
    from crawlq.payload import dumps
    from crawlq.stores.codec import spec_row

    lean, general = (servers.isolated_name(tmp_path, n) for n in ("l", "g"))
    client = redis.Redis.from_url(server.url, decode_responses=True)
    stores = {p: open_on(server.url, p) for p in (lean, general)}
    assert isinstance(stores[general], RedisStore)
    until = time.time() + 60
    for p in (lean, general):  # a worker blocked on its wake list (job_wait_begin.lua)
        client.zadd(f"{p}:q:q:waiters", {"w": until})
    pubsub = client.pubsub()
    pubsub.psubscribe(f"{lean}:wake:*", f"{general}:wake:*")
    for now in (100.0, 200.5):
        with _commands_logged(client) as logged:
            results = stores[lean].job_schedule(PLAIN_SPECS, now=now)
        assert {c[1] for c in logged if c[0] == "FCALL"} == {FUNCTIONS["job_schedule_plain"]}
        assert [r.outcome for r in results] == [Outcome.CREATED] * len(PLAIN_SPECS)
        assert [type(r.job_id) for r in results] == [int] * len(PLAIN_SPECS)
        rows = dumps([spec_row(s) for s in PLAIN_SPECS])
        store = stores[general]
        assert isinstance(store, RedisStore)
        expected = store._run("scheduling jobs", "job_schedule", [repr(now), rows])
        assert [[str(r.job_id), r.outcome.value] for r in results] == expected
    assert client.lrange(f"{lean}:wwake:w", 0, -1) == ["12.345678901234567"] * 2
    assert _dump(client, lean) == _dump(client, general)
    messages: dict[str, list[tuple[str, str]]] = {lean: [], general: []}
    while (m := pubsub.get_message(timeout=0.5)) is not None:
        if m["type"] == "pmessage":
            who, _, channel = m["channel"].partition(":")
            messages[who].append((channel, m["data"]))
    assert messages[lean] == messages[general] and len(messages[lean]) == 4
    pubsub.close()
    for store in stores.values():
        store.close()


def test_a_batch_with_any_keyed_crawl_or_limit_spec_takes_the_general_script(
    server: servers.PrivateRedis, prefix: str
) -> None:
    """Mixed batches keep job_schedule.lua's rules for every spec (one refusal refuses
    all; a key already live is updated, not created)."""
    from crawlq.jobs import Outcome

    store = open_on(server.url, prefix)
    first = store.job_schedule([spec(), spec(key="k")], now=10.0)
    again = store.job_schedule([spec(), spec(key="k", priority=3)], now=10.0)
    assert [r.outcome for r in first] == [Outcome.CREATED, Outcome.CREATED]
    assert [r.outcome for r in again] == [Outcome.CREATED, Outcome.UPDATED]
    assert again[1].job_id == first[1].job_id
    store.close()
