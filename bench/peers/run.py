"""crawlq side by side with its peers: the same workloads, on the same machine, against
the same private servers, in one run, printed as a Markdown table.

    .venv/bin/python bench/peers/run.py                      # N=20,000, median of 3
    .venv/bin/python bench/peers/run.py --quick              # N=2,000, 1 run
    .venv/bin/python bench/peers/run.py --peers huey,rq -n 5000 --runs 1

Peers are installed apart from crawlq: `.venv/bin/pip install -r
bench/requirements-peers.txt`. A peer whose package is missing is left out (and said so).
Each peer runs on every store kind it supports (crawlq: SQLite, PostgreSQL, Redis; Huey:
SQLite, Redis; RQ: Redis; pgqueuer: PostgreSQL); one private PostgreSQL and one private
Redis (tests/servers.py, 127.0.0.1 only) serve every system. Workers are real worker
processes started from each system's CLI, stopped (then killed) after each drain. Not a
test: it asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent
for _p in (str(PEERS_DIR.parents[1]), str(PEERS_DIR.parent), str(PEERS_DIR)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_sqlite as bs  # noqa: E402
import bench_stores  # noqa: E402
import common  # noqa: E402

# name: (module, class, distribution on PyPI)
PEERS: dict[str, tuple[str, str, str]] = {
    "crawlq": ("crawlq_peer", "CrawlqPeer", "crawlq"),
    "huey": ("huey_peer", "HueyPeer", "huey"),
    "rq": ("rq_peer", "RqPeer", "rq"),
    "pgqueuer": ("pgqueuer_peer", "PgqueuerPeer", "pgqueuer"),
}
STORES = ("sqlite", "postgres", "redis")
STORE_NAMES = bench_stores.STORE_NAMES
WORKLOADS = {
    "one": "schedule, one call per job",
    "bulk": "schedule, bulk API",
    "drain": "drain: N queued no-op jobs, workers started until all done",
}


def load_peer(name: str) -> tuple[Any, Any] | str:
    """(module, class), or why the peer cannot run."""
    module, cls, dist = PEERS[name]
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return f"{dist} not installed (`.venv/bin/pip install -r bench/requirements-peers.txt`)"
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        return f"bench/peers/{module}.py: {exc}"
    return mod, getattr(mod, cls)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="N=2,000, 1 run")
    parser.add_argument("-n", type=int, help="jobs per figure (default 20,000; quick 2,000)")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3; quick 1)")
    parser.add_argument(
        "--peers", default=",".join(PEERS), help=f"comma-separated subset of {','.join(PEERS)}"
    )
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated subset of sqlite,postgres,redis"
    )
    parser.add_argument(
        "--gate-patience",
        type=float,
        default=2.0,
        help="seconds to wait for a quiet machine before each measurement (default 2)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (logs)")
    args = parser.parse_args(argv)
    n = args.n or (2_000 if args.quick else 20_000)
    runs = args.runs or (1 if args.quick else 3)
    wanted = [p for p in args.peers.split(",") if p]
    for p in wanted:
        if p not in PEERS:
            parser.error(f"unknown peer {p!r}; known: {', '.join(PEERS)}")
    store_filter = {s for s in args.stores.split(",") if s}

    notes: list[str] = []
    loaded: dict[str, tuple[Any, Any]] = {}
    for p in wanted:
        got = load_peer(p)
        if isinstance(got, str):
            notes.append(f"{p}: left out: {got}")
        else:
            loaded[p] = got
    pairs = [
        (p, s) for p in loaded for s in STORES if s in loaded[p][1].STORES and s in store_filter
    ]
    stores = [s for s in STORES if any(s == ps for _, ps in pairs)]

    from tests import servers

    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-peers-"))
    started = time.perf_counter()
    pg: Any = None
    rd: Any = None
    peers: dict[tuple[str, str], Any] = {}
    results: dict[tuple[str, str, str], list[float]] = {}
    failed: dict[tuple[str, str, str], str] = {}
    versions = {"sqlite": f"SQLite {sqlite3.sqlite_version}"}
    try:
        gate = bs.QuietGate(patience=args.gate_patience)
        urls = {"sqlite": ""}
        if "postgres" in stores:
            pg = servers.PrivatePostgres()
            urls["postgres"] = pg.url
            versions["postgres"] = f"PostgreSQL {bench_stores.pg_version(pg.url)}"
        if "redis" in stores:
            rd = servers.PrivateRedis()
            urls["redis"] = rd.url
            versions["redis"] = f"Redis {bench_stores.redis_version(rd.url)}"
        print(f"# working in {tmp}; servers: {urls}", file=sys.stderr, flush=True)

        for p, s in pairs:
            try:
                peers[(p, s)] = loaded[p][1](s, urls[s], tmp / f"{p}-{s}", gate)
            except Exception as exc:
                notes.append(f"{p} on {STORE_NAMES[s]}: could not start: {exc!r}")
                print(traceback.format_exc(), file=sys.stderr)

        for run in range(runs):
            for (p, s), peer in peers.items():
                for wl in WORKLOADS:
                    key = (p, s, wl)
                    if key in failed:
                        continue
                    t = time.perf_counter()
                    try:
                        fn = {
                            "one": peer.schedule_one,
                            "bulk": peer.schedule_bulk,
                            "drain": peer.drain,
                        }[wl]
                        seconds = fn(n)
                        if seconds is not None:
                            results.setdefault(key, []).append(n / seconds)
                        msg = "n/a" if seconds is None else f"{n / seconds:,.0f} jobs/s"
                    except Exception as exc:
                        failed[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                        msg = f"FAILED {failed[key]}"
                        print(traceback.format_exc(), file=sys.stderr)
                    finally:
                        if s == "postgres":
                            bench_stores.pg_drop_schemas(urls["postgres"])
                        elif s == "redis":
                            bench_stores.redis_flush(urls["redis"])
                    print(
                        f"# run {run + 1}/{runs} {p} {s} {wl}: {msg} "
                        f"({time.perf_counter() - t:.1f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
        report(results, failed, peers, loaded, notes, versions, n, runs, argv, tmp, started, gate)
    finally:
        for peer in peers.values():
            try:
                peer.close()
            except Exception:
                print(traceback.format_exc(), file=sys.stderr)
        for server in (pg, rd):
            if server is not None:
                server.close()
        if args.keep:
            print(f"# kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def cell(values: list[float] | None, failed: str | None) -> str:
    if failed:
        return "failed"
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:,.0f}"
    return f"{med:,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def report(
    results: dict[tuple[str, str, str], list[float]],
    failed: dict[tuple[str, str, str], str],
    peers: dict[tuple[str, str], Any],
    loaded: dict[str, tuple[Any, Any]],
    notes: list[str],
    versions: dict[str, str],
    n: int,
    runs: int,
    argv: Sequence[str] | None,
    tmp: Path,
    started: float,
    gate: bs.QuietGate,
) -> None:
    cmd = " ".join([".venv/bin/python", "bench/peers/run.py", *(argv or sys.argv[1:])])
    names = list(loaded)
    stores = [s for s in STORES if any(ps == s for _, ps in peers)]
    pkg = []
    for name in names:
        if name == "crawlq":
            continue
        pkg.append(f"{PEERS[name][2]} {importlib.metadata.version(PEERS[name][2])}")
    print(f"- command: `{cmd}`")
    print(
        f"- machine: {os.cpu_count()} cores ({bs.cpu_model()}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, "
        f"{', '.join(versions[s] for s in STORES if s in versions)}, temp dir on "
        f"{bs.filesystem_of(str(tmp))}"
    )
    print(f"- code: {bs.crawlq_version()}; peers: {', '.join(pkg) or 'none'}")
    print(f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    print(
        f"- N = {n:,} jobs per figure; {runs} run{'s' if runs > 1 else ''} per figure "
        f"(median{', min-max' if runs > 1 else ''}); jobs/s; wall time "
        f"{time.perf_counter() - started:.0f} s"
    )
    print(
        "- servers: SQLite files in the temp dir; one private PostgreSQL (fsync=off) and one "
        "private Redis (appendonly yes, appendfsync everysec) on 127.0.0.1, shared by all"
    )
    print(f"- load: {gate.describe()}")
    for name in names:
        print(f"- {name}: {common.module_config(loaded[name][0])}")
    for note in notes:
        print(f"- note: {note}")
    print()
    others = [p for p in names if p != "crawlq"]
    print(f"| store | workload | {' | '.join(names)} | crawlq / best peer |")
    print(f"|---|---|{'---:|' * len(names)}---:|")
    for s in stores:
        for wl, label in WORKLOADS.items():
            cells = []
            for p in names:
                if (p, s) not in peers:
                    cells.append("—")
                else:
                    cells.append(cell(results.get((p, s, wl)), failed.get((p, s, wl))))
            ratio = ""
            mine = results.get(("crawlq", s, wl))
            best = [
                statistics.median(results[(p, s, wl)])
                for p in others
                if results.get((p, s, wl)) and (p, s, wl) not in failed
            ]
            if mine and best:
                ratio = f"{statistics.median(mine) / max(best):.2f}x"
            print(f"| {STORE_NAMES[s]} | {label} | {' | '.join(cells)} | {ratio} |")
    if failed:
        print()
        for (p, s, wl), why in failed.items():
            print(f"- failed: {p} on {STORE_NAMES[s]}, {WORKLOADS[wl]}: {why}")


if __name__ == "__main__":
    raise SystemExit(main())
