"""crawlq side by side with its peers: the same workloads, on the same machine, against
the same private servers, in one run; a Markdown table and a PNG chart.

    .venv/bin/python bench/peers/run.py --write     # the full run; rewrites docs/benchmarks.md
    .venv/bin/python bench/peers/run.py --quick     # small sizes, 1 run, table on stdout
    .venv/bin/python bench/peers/run.py --peers crawlq,huey --workloads drain,latency
    .venv/bin/python bench/peers/run.py --from-log run.err --write   # a stopped run's table

Peers are installed apart from crawlq: `.venv/bin/pip install -r
bench/requirements-peers.txt`. A peer whose package is missing is left out (and said so).
Each peer runs on every store kind it supports; one private PostgreSQL and one private
Redis (tests/servers.py, 127.0.0.1 only) serve every system. Workers are real worker
processes started from each system's CLI, stopped (then killed) after each measurement.
The "raw loop" column is the store with no queue library (bench/peers/raw_peer.py); the
"crawlq+crawl" column is crawlq again with its crawl features on every job (a crawl, a
unique key, a limit key: bench/peers/crawlq_peer.py), not a peer: the ratio column
"crawlq+crawl / crawlq" shows what those features cost. Not a test: it asserts nothing
about speed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent
REPO = PEERS_DIR.parents[1]
for _p in (str(REPO), str(PEERS_DIR.parent), str(PEERS_DIR)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_sqlite as bs  # noqa: E402
import bench_stores  # noqa: E402
import bytecode  # noqa: E402
import common  # noqa: E402

# name: (module, class, distribution on PyPI)
PEERS: dict[str, tuple[str, str, str]] = {
    "crawlq": ("crawlq_peer", "CrawlqPeer", "crawlq"),
    "crawlq+crawl": ("crawlq_peer", "CrawlqCrawlPeer", "crawlq"),
    "huey": ("huey_peer", "HueyPeer", "huey"),
    "rq": ("rq_peer", "RqPeer", "rq"),
    "celery": ("celery_peer", "CeleryPeer", "celery"),
    "dramatiq": ("dramatiq_peer", "DramatiqPeer", "dramatiq"),
    "arq": ("arq_peer", "ArqPeer", "arq"),
    "saq": ("saq_peer", "SaqPeer", "saq"),
    "procrastinate": ("procrastinate_peer", "ProcrastinatePeer", "procrastinate"),
    "pgqueuer": ("pgqueuer_peer", "PgqueuerPeer", "pgqueuer"),
    "raw": ("raw_peer", "RawPeer", "crawlq"),
}
NOT_PEERS = ("crawlq", "crawlq+crawl", "raw")
"""crawlq itself, its crawl-features variant and the raw loop: not in "best peer"."""
STORES = ("sqlite", "postgres", "redis")
STORE_NAMES = bench_stores.STORE_NAMES
DOC = REPO / "docs" / "benchmarks.md"
CHART = REPO / "docs" / "benchmarks-peers.png"
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"


@dataclass(frozen=True)
class Sizes:
    n: int
    latency_jobs: int
    latency_rate: float
    fanout: int
    fanout_sleep: float
    deep: int
    deep_sample: int


@dataclass(frozen=True)
class Figure:
    key: str
    workload: str  # the measurement that yields it
    label: str
    unit: str
    higher_is_better: bool


WORKLOADS = ("one", "bulk", "drain", "latency", "fanout", "deep")


def figures(z: Sizes) -> list[Figure]:
    return [
        Figure("one", "one", f"schedule {z.n:,}, one call per job", "jobs/s", True),
        Figure("bulk", "bulk", f"schedule {z.n:,}, bulk API", "jobs/s", True),
        Figure("drain", "drain", f"drain {z.n:,} queued no-op jobs", "jobs/s", True),
        Figure(
            "lat50",
            "latency",
            f"latency p50, idle worker, {z.latency_jobs} jobs at {z.latency_rate:g}/s",
            "ms",
            False,
        ),
        Figure("lat99", "latency", "latency p99, same run", "ms", False),
        Figure(
            "fanout",
            "fanout",
            f"fan-out: tree of {z.fanout:,} jobs, each sleeps {z.fanout_sleep * 1000:g} ms "
            "and adds 3",
            "s",
            False,
        ),
        Figure(
            "deep",
            "deep",
            f"deep queue: claim rate with {z.deep:,} pending ({z.deep_sample:,} jobs timed)",
            "jobs/s",
            True,
        ),
        Figure("deepmem", "deep", "deep queue: worker memory (peak RSS)", "MiB", False),
    ]


def measure(peer: Any, workload: str, z: Sizes) -> dict[str, float] | None:
    """Run one measurement; its figures (None: the peer has no such workload)."""
    if workload == "one":
        s = peer.schedule_one(z.n)
        return {"one": z.n / s}
    if workload == "bulk":
        s = peer.schedule_bulk(z.n)
        return None if s is None else {"bulk": z.n / s}
    if workload == "drain":
        return {"drain": z.n / peer.drain(z.n)}
    if workload == "latency":
        lat = peer.latency(z.latency_jobs, z.latency_rate)
        if lat is None:
            return None
        if len(lat) != z.latency_jobs:
            raise RuntimeError(f"{len(lat)} latencies for {z.latency_jobs} jobs")
        ms = sorted(x * 1000.0 for x in lat)
        return {"lat50": bs.percentile(ms, 50), "lat99": bs.percentile(ms, 99)}
    if workload == "fanout":
        s = peer.fanout(z.fanout, z.fanout_sleep)
        return None if s is None else {"fanout": s}
    got = peer.deep(z.deep, z.deep_sample)
    if got is None:
        return None
    rate, rss = got
    return {"deep": rate, "deepmem": rss / 2**20}


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


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, Sizes]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small sizes (N 2,000; 100 latency jobs; fan-out 500; deep 30,000), 1 run",
    )
    parser.add_argument("-n", type=int, help="jobs per schedule and drain figure (20,000)")
    parser.add_argument("--runs", type=int, help="runs per figure (default 3; quick 1)")
    parser.add_argument("--latency-jobs", type=int, help="latency jobs (500)")
    parser.add_argument("--latency-rate", type=float, default=50.0, help="per second (50)")
    parser.add_argument("--fanout", type=int, help="jobs in the fan-out tree (5,000)")
    parser.add_argument("--fanout-sleep", type=float, default=0.05, help="seconds (0.05)")
    parser.add_argument("--deep", type=int, help="pending jobs in the deep queue (1,000,000)")
    parser.add_argument("--deep-sample", type=int, help="deep-queue jobs timed (20,000)")
    parser.add_argument(
        "--peers", default=",".join(PEERS), help=f"comma-separated subset of {','.join(PEERS)}"
    )
    parser.add_argument(
        "--stores", default=",".join(STORES), help="comma-separated subset of sqlite,postgres,redis"
    )
    parser.add_argument(
        "--workloads", default=",".join(WORKLOADS), help=f"subset of {','.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--gate-patience",
        type=float,
        default=2.0,
        help="seconds to wait for a quiet machine before each measurement (default 2)",
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help=f"write the table into {DOC.relative_to(REPO)} and the chart to "
        f"{CHART.relative_to(REPO)} (else: table on stdout only)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp directory (logs)")
    parser.add_argument(
        "--from-log",
        type=Path,
        metavar="FILE",
        help="measure nothing: the table (and with --write the doc and chart) of the figures "
        "an earlier run printed to stderr, e.g. one stopped before its last run",
    )
    args = parser.parse_args(argv)
    q = args.quick
    z = Sizes(
        n=args.n or (2_000 if q else 20_000),
        latency_jobs=args.latency_jobs or (100 if q else 500),
        latency_rate=args.latency_rate,
        fanout=args.fanout or (500 if q else 5_000),
        fanout_sleep=args.fanout_sleep,
        deep=args.deep or (30_000 if q else 1_000_000),
        deep_sample=args.deep_sample or (10_000 if q else 20_000),
    )
    if z.deep < z.deep_sample + common.LEDGER_SKIP:
        parser.error(f"--deep must be at least --deep-sample + {common.LEDGER_SKIP}")
    args.runs = args.runs or (1 if q else 3)
    for p in args.peers.split(","):
        if p and p not in PEERS:
            parser.error(f"unknown peer {p!r}; known: {', '.join(PEERS)}")
    for w in args.workloads.split(","):
        if w and w not in WORKLOADS:
            parser.error(f"unknown workload {w!r}; known: {', '.join(WORKLOADS)}")
    return args, z


Results = dict[tuple[str, str, str], list[float]]  # (peer, store, figure) -> values
Failures = dict[tuple[str, str, str], str]  # (peer, store, workload) -> why


def main(argv: Sequence[str] | None = None) -> int:
    args, z = parse_args(argv)
    wanted = [p for p in args.peers.split(",") if p]
    workloads = [w for w in WORKLOADS if w in args.workloads.split(",")]
    store_filter = {s for s in args.stores.split(",") if s}

    if args.from_log is not None:
        return from_log(args, argv, z)
    notes: list[str] = []
    loaded: dict[str, tuple[Any, Any]] = {}
    for p in wanted:
        got = load_peer(p)
        if isinstance(got, str):
            notes.append(f"{p}: left out: {got}")
        else:
            loaded[p] = got
    crawlq_runs = bool({"crawlq", "crawlq+crawl"} & loaded.keys())
    if crawlq_runs and not bytecode.compile_crawlq(sys.executable):  # as pip install does
        print("crawlq's modules could not be byte-compiled", file=sys.stderr)
        return 1
    pairs = [
        (p, s) for p in loaded for s in STORES if s in loaded[p][1].STORES and s in store_filter
    ]
    stores = [s for s in STORES if any(s == ps for _, ps in pairs)]

    from tests import servers

    tmp = Path(tempfile.mkdtemp(prefix="crawlq-bench-peers-"))
    started = time.perf_counter()
    servers_up: list[Any] = []
    peers: dict[tuple[str, str], Any] = {}
    results: Results = {}
    failed: Failures = {}
    versions = {"sqlite": f"SQLite {sqlite3.sqlite_version}"}
    try:
        gate = bs.QuietGate(patience=args.gate_patience)
        urls = {"sqlite": ""}
        if "postgres" in stores:
            pg = servers.PrivatePostgres()
            servers_up.append(pg)
            urls["postgres"] = pg.url
            versions["postgres"] = f"PostgreSQL {bench_stores.pg_version(pg.url)}"
        if "redis" in stores:
            rd = servers.PrivateRedis()
            servers_up.append(rd)
            urls["redis"] = rd.url
            versions["redis"] = f"Redis {bench_stores.redis_version(rd.url)}"
        print(f"# working in {tmp}; servers: {urls}", file=sys.stderr, flush=True)
        print(f"# versions: {json.dumps(versions)}", file=sys.stderr, flush=True)

        for p, s in pairs:
            try:
                peers[(p, s)] = loaded[p][1](s, urls[s], tmp / f"{p}-{s}", gate)
            except Exception as exc:
                notes.append(f"{p} on {STORE_NAMES[s]}: could not start: {exc!r}")
                print(traceback.format_exc(), file=sys.stderr)

        def cleanup(s: str) -> None:
            if s == "postgres":
                bench_stores.pg_drop_schemas(urls["postgres"])
            elif s == "redis":
                bench_stores.redis_flush(urls["redis"])

        # workload by workload, every system in turn: the figures of one workload are
        # taken close in time, and the light ones before the million-job fills
        for run in range(args.runs):
            for wl in workloads:
                for (p, s), peer in peers.items():
                    if (p, s, wl) in failed:
                        continue
                    run_one(peer, p, s, wl, z, results, failed, cleanup)
                    print(
                        f"# run {run + 1}/{args.runs} {p} {s} {wl}: "
                        f"{progress(results, failed, p, s, wl, z)}",
                        file=sys.stderr,
                        flush=True,
                    )
        text = report(results, failed, peers, loaded, notes, versions, z, args, argv, tmp)
        text = text.replace("{WALL}", f"{time.perf_counter() - started:,.0f}")
        text = text.replace("{LOAD}", gate.describe())
        publish(text, args.write, results, peers, loaded, z)
    finally:
        for peer in peers.values():
            try:
                peer.close()
            except Exception:
                print(traceback.format_exc(), file=sys.stderr)
        for server in servers_up:
            server.close()
        if args.keep:
            print(f"# kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


PROGRESS = re.compile(r"^# run (\d+)/(\d+) (\S+) (\S+) (\S+): (.*)$")
"""A progress line of main's: run, runs, system, store, workload, what it measured."""


def read_log(text: str) -> tuple[Results, Failures, dict[str, str], int, int]:
    """The figures, failures, server versions, runs asked for and runs begun of a run's
    stderr (its progress lines; the values as printed: to 0.01, or to 0.1 in the logs of
    earlier runs, whose ms ratios can be a few per cent off)."""
    results: Results = {}
    failed: Failures = {}
    versions: dict[str, str] = {}
    asked = begun = 0
    for line in text.splitlines():
        if line.startswith("# versions: "):
            versions = json.loads(line.removeprefix("# versions: "))
        m = PROGRESS.match(line)
        if m is None:
            continue
        run, runs, p, s, wl, what = m.groups()
        asked, begun = int(runs), max(begun, int(run))
        if what.startswith("FAILED "):
            failed[(p, s, wl)] = what.removeprefix("FAILED ")
            continue
        for part in what.split(", "):
            words = part.split(" ")
            if len(words) == 3:  # "key value unit"; "n/a" measured nothing
                results.setdefault((p, s, words[0]), []).append(float(words[1].replace(",", "")))
    return results, failed, versions, asked, begun


def from_log(args: argparse.Namespace, argv: Sequence[str] | None, z: Sizes) -> int:
    """main with ``--from-log``: the report of an earlier run's figures, measuring nothing.
    The sizes must be the run's (its command's options)."""
    results, failed, versions, asked, begun = read_log(args.from_log.read_text())
    if not results:
        raise SystemExit(f"{args.from_log}: no progress lines of bench/peers/run.py in it")
    names = [p for p in PEERS if any(k[0] == p for k in [*results, *failed])]
    loaded: dict[str, tuple[Any, Any]] = {}
    notes: list[str] = []
    for p in names:
        got = load_peer(p)
        if isinstance(got, str):
            raise SystemExit(f"{p}: {got}")
        loaded[p] = got
    peers: dict[tuple[str, str], Any] = {(k[0], k[1]): None for k in [*results, *failed]}
    counts = {len(v) for v in results.values()}
    args.runs = max(counts)
    if begun < asked or len(counts) > 1:
        short = sorted({k[2] for k, v in results.items() if len(v) < args.runs})
        notes.append(
            f"the run was stopped in its run {begun} of {asked}: figures with fewer than "
            f"{args.runs} values: {', '.join(short) or 'none'} (their median is of those "
            "it has)"
        )
    notes.append("table made from the run's log (`--from-log`): values as it printed them")
    if not versions:
        notes.append("the servers' versions are not in the log (a run before they were logged)")
    versions = {"sqlite": f"SQLite {sqlite3.sqlite_version}", **versions}
    given = sys.argv[1:] if argv is None else argv
    log_argv = [a for a in given if a not in ("--from-log", str(args.from_log))]
    text = report(results, failed, peers, loaded, notes, versions, z, args, log_argv,
                  Path(tempfile.gettempdir()))  # fmt: skip
    text = text.replace("wall time {WALL} s", "wall time not in the log")
    text = text.replace("{LOAD}", "not in the log")
    publish(text, args.write, results, peers, loaded, z)
    return 0


def publish(
    text: str,
    write: bool,
    results: Results,
    peers: dict[tuple[str, str], Any],
    loaded: dict[str, tuple[Any, Any]],
    z: Sizes,
) -> None:
    """The report on stdout and, with ``write``, into docs/benchmarks.md with its chart."""
    print(text)
    if write:
        write_doc(text)
        chart(results, peers, loaded, z)
        print(f"# wrote {DOC} and {CHART}", file=sys.stderr)


def run_one(
    peer: Any,
    p: str,
    s: str,
    wl: str,
    z: Sizes,
    results: Results,
    failed: Failures,
    cleanup: Callable[[str], None],
) -> None:
    try:
        got = measure(peer, wl, z)
        for key, value in (got or {}).items():
            results.setdefault((p, s, key), []).append(value)
    except Exception as exc:
        failed[(p, s, wl)] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
        print(traceback.format_exc(), file=sys.stderr)
    finally:
        try:
            cleanup(s)
        except Exception:
            print(traceback.format_exc(), file=sys.stderr)


def progress(results: Results, failed: Failures, p: str, s: str, wl: str, z: Sizes) -> str:
    """What a measurement gave, as its progress line says it ("key value unit, ...", or
    "FAILED why"); read_log reads it back."""
    if (p, s, wl) in failed:
        return f"FAILED {failed[(p, s, wl)]}"
    shown = [
        f"{f.key} {results[(p, s, f.key)][-1]:,.2f} {f.unit}"
        for f in figures(z)
        if f.workload == wl and (p, s, f.key) in results
    ]
    return ", ".join(shown) or "n/a"


def cell(values: list[float] | None, failed: str | None, unit: str) -> str:
    if failed:
        return "failed"
    if not values:
        return "n/a"
    fmt = "{:,.1f}" if unit in ("ms", "s") else "{:,.0f}"
    med = fmt.format(statistics.median(values))
    if len(values) == 1:
        return med
    return f"{med} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def ratio(mine: float, other: float, f: Figure) -> float:
    """Above 1: crawlq is better (faster, or lower latency, time or memory)."""
    return mine / other if f.higher_is_better else other / mine


def report(
    results: Results,
    failed: Failures,
    peers: dict[tuple[str, str], Any],
    loaded: dict[str, tuple[Any, Any]],
    notes: list[str],
    versions: dict[str, str],
    z: Sizes,
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    tmp: Path,
) -> str:
    out: list[str] = []
    given = sys.argv[1:] if argv is None else argv
    cmd = " ".join([".venv-peers/bin/python", "bench/peers/run.py", *given])
    names = [n for n in loaded if n != "raw"]
    stores = [s for s in STORES if any(ps == s for _, ps in peers)]
    pkg = [
        f"{PEERS[n][2]} {importlib.metadata.version(PEERS[n][2])}"
        for n in names
        if n not in NOT_PEERS
    ]
    out.append(f"- command: `{cmd}`")
    out.append(
        f"- machine: {os.cpu_count()} cores ({bs.cpu_model()}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}, "
        f"{', '.join(versions[s] for s in STORES if s in versions)}, temp dir on "
        f"{bs.filesystem_of(str(tmp))}"
    )
    out.append(f"- code: {bs.crawlq_version()}; peers: {', '.join(pkg) or 'none'}")
    out.append(f"- date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}")
    out.append(
        f"- {args.runs} run{'s' if args.runs > 1 else ''} per figure, interleaved (run 1 of "
        "everything, then run 2, ...; within a run workload by workload, every system in "
        f"turn): median{' (min-max)' if args.runs > 1 else ''}; "
        "wall time {WALL} s"
    )
    out.append(
        "- servers: SQLite files in the temp dir; one private PostgreSQL (fsync=off) and one "
        "private Redis (appendonly yes, appendfsync everysec) on 127.0.0.1, shared by all"
    )
    out.append("- load: {LOAD}")
    described: set[str] = set()
    for name in loaded:
        mod, cls = loaded[name]
        if mod.__name__ in described:  # a variant of a system described above
            out.append(f"- {name}: {' '.join((cls.__doc__ or '').split())}")
        else:
            out.append(f"- {name}: {common.module_config(mod)}")
            described.add(mod.__name__)
    for note in notes:
        out.append(f"- note: {note}")
    out.append("")
    others = [p for p in names if p not in NOT_PEERS]
    has_raw = "raw" in loaded
    has_crawl = "crawlq" in loaded and "crawlq+crawl" in loaded
    head = [*names, *(["raw loop"] if has_raw else [])]
    tail = [
        "crawlq / best peer",
        *(["crawlq / raw loop"] if has_raw else []),
        *(["crawlq+crawl / crawlq"] if has_crawl else []),
    ]
    out.append(f"| store | figure | unit | {' | '.join(head)} | {' | '.join(tail)} |")
    out.append(f"|---|---|---|{'---:|' * (len(head) + len(tail))}")
    for s in stores:
        for f in figures(z):
            if not any((p, s, f.key) in results or (p, s, f.workload) in failed for p in loaded):
                continue
            cells = []
            for p in [*names, *(["raw"] if has_raw else [])]:
                if (p, s) not in peers:
                    cells.append("—")
                else:
                    cells.append(
                        cell(results.get((p, s, f.key)), failed.get((p, s, f.workload)), f.unit)
                    )
            mine = results.get(("crawlq", s, f.key))
            best = best_peer(results, others, s, f)
            ratios = [""]
            if mine and best:
                ratios[0] = f"{ratio(statistics.median(mine), best[1], f):.2f}x {best[0]}"
            if has_raw:
                raw = results.get(("raw", s, f.key))
                ratios.append(
                    f"{ratio(statistics.median(mine), statistics.median(raw), f):.2f}"
                    if mine and raw
                    else ""
                )
            if has_crawl:
                crawl = results.get(("crawlq+crawl", s, f.key))
                ratios.append(
                    f"{ratio(statistics.median(crawl), statistics.median(mine), f):.2f}"
                    if mine and crawl
                    else ""
                )
            out.append(
                f"| {STORE_NAMES[s]} | {f.label} | {f.unit} | {' | '.join(cells)} "
                f"| {' | '.join(ratios)} |"
            )
    out.append("")
    out.append(
        "Ratios: crawlq's median over the best peer's median on the same store (and over the "
        "raw loop's), oriented so that above 1 means crawlq is better (for ms, s and MiB the "
        "division is turned round)."
        + (
            " crawlq+crawl / crawlq: the same orientation, crawlq with its crawl features "
            "over crawlq without; below 1 by what the features cost."
            if has_crawl
            else ""
        )
    )
    if failed:
        out.append("")
        for (p, s, wl), why in failed.items():
            out.append(f"- failed: {p} on {STORE_NAMES[s]}, {wl}: {why}")
    return "\n".join(out)


def best_peer(results: Results, others: list[str], s: str, f: Figure) -> tuple[str, float] | None:
    meds = [
        (p, statistics.median(results[(p, s, f.key)])) for p in others if results.get((p, s, f.key))
    ]
    if not meds:
        return None
    pick = max if f.higher_is_better else min
    return pick(meds, key=lambda pm: pm[1])


def write_doc(text: str) -> None:
    """Put ``text`` between the peers markers of docs/benchmarks.md."""
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        raise RuntimeError(f"{DOC} has no {BEGIN} ... {END} section to replace")
    head, rest = doc.split(BEGIN, 1)
    _old, foot = rest.split(END, 1)
    image = f"![crawlq and its peers]({CHART.name})"
    DOC.write_text(f"{head}{BEGIN}\n{text}\n\n{image}\n{END}{foot}")


def chart(
    results: Results,
    peers: dict[tuple[str, str], Any],
    loaded: dict[str, tuple[Any, Any]],
    z: Sizes,
) -> None:
    """One panel per figure: a bar per system and store (medians, min-max as error bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = [f for f in figures(z) if any(k[2] == f.key for k in results)]
    systems = [p for p in loaded if any(k[0] == p for k in results)]
    stores = [s for s in STORES if any(k[1] == s for k in results)]
    cols = 2
    rows = (len(figs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.3 * rows), squeeze=False)
    colours = plt.get_cmap("tab10")
    width = 0.8 / max(1, len(systems))
    for ax, f in zip(axes.flat, figs, strict=False):
        for i, p in enumerate(systems):
            xs, ys, lo, hi = [], [], [], []
            for j, s in enumerate(stores):
                vals = results.get((p, s, f.key))
                if not vals:
                    continue
                med = statistics.median(vals)
                xs.append(j + (i - (len(systems) - 1) / 2) * width)
                ys.append(med)
                lo.append(med - min(vals))
                hi.append(max(vals) - med)
            if xs:
                colour = "black" if p == "raw" else colours(i % 10)  # tab10 has 10; raw is 11th
                ax.bar(xs, ys, width, yerr=[lo, hi], label=p, color=colour, capsize=2)
        ax.set_xticks(range(len(stores)), [STORE_NAMES[s] for s in stores])
        if f.unit in ("ms", "s"):
            ax.set_yscale("log")  # a few ms next to hundreds: a linear scale hides them
        better = "higher" if f.higher_is_better else "lower"
        ax.set_title(f"{f.label}\n({f.unit}, {better} is better)", fontsize=9)
        ax.tick_params(labelsize=8)
    for ax in list(axes.flat)[len(figs) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(systems), fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(CHART, dpi=90)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
