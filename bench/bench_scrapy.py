"""One Scrapy spider, three schedulers: Scrapy's default (memory), scrapy-redis and
``crawlq.scrapy`` on SQLite, PostgreSQL and Redis, in 1 and 3 processes (issue 15).

    .venv/bin/python bench/bench_scrapy.py                 # 2,000 pages, 0 and 10 ms latency
    .venv/bin/python bench/bench_scrapy.py -n 500 --latency 0
    .venv/bin/python bench/bench_scrapy.py --write         # also into docs/benchmarks.md

The site is bench_crawl.py's (``-n`` pages of about 4 KB, ten links each, served from a
process of its own that counts the requests for every path). The spider follows every
``<a href>`` with ``response.follow``; ``CONCURRENT_REQUESTS`` = 16 per process, no delay,
robots.txt not asked. Each run starts its processes together and waits for all of them
to exit. It reports:

- pages/s: distinct pages fetched / wall time from the first start to the last exit;
- CPU ms/page: user + system CPU of the Scrapy processes / distinct pages (the store's
  server, PostgreSQL or redis-server, is not counted);
- complete: distinct pages fetched / pages in the site (a scheduler that closes too early
  or loses requests shows less than 100 %);
- closed: whether every process exited by itself (within ``--timeout``), and how.

``--kill`` adds, for each multi-process contender, a run at 10 ms of latency where one of
the 3 processes is killed with SIGKILL once a third of the pages were fetched (nothing is
started in its place): lost = pages never fetched when the other two have finished.

scrapy-redis (0.9.1) is a peer, not a dependency: it runs from ``.venv-peers`` (``pip
install -r bench/requirements-peers.txt``) with ``SCHEDULER_PERSIST=True`` (its default,
False, makes the first process to close wipe the shared queue) and the private redis-server
of the test suite. Its spider is the same plain ``scrapy.Spider``. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import bench_crawl as bc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DOC = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- scrapy:begin -->", "<!-- scrapy:end -->"
HEADING = "## Distributed Scrapy: default scheduler, scrapy-redis, crawlq.scrapy (issue 15)"
CRAWLQ_PYTHON = REPO / ".venv" / "bin" / "python"

SPIDER = """\
import json, os, scrapy

class SiteSpider(scrapy.Spider):
    name = "site"
    custom_settings = {
        "ROBOTSTXT_OBEY": False, "LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16, "DOWNLOAD_DELAY": 0,
        "REMOTE_CONTROL_ENABLED": False, "TELNETCONSOLE_ENABLED": False,
    }

    def __init__(self, start, out, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]
        self.out = out

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)

    def closed(self, reason):
        with open(self.out, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "reason": reason}) + "\\n")
"""


@dataclass(frozen=True)
class Contender:
    name: str
    processes: int
    python: Path
    settings: tuple[str, ...]


def contenders(store_urls: dict[str, str], peers: Path | None) -> list[Contender]:
    found = [
        Contender(
            "default (memory)", 1, CRAWLQ_PYTHON, ("SCHEDULER=scrapy.core.scheduler.Scheduler",)
        )
    ]
    for n in (1, 3):
        if peers is not None:
            redis_settings = (
                "SCHEDULER=scrapy_redis.scheduler.Scheduler",
                "DUPEFILTER_CLASS=scrapy_redis.dupefilter.RFPDupeFilter",
                "SCHEDULER_PERSIST=True",
                f"REDIS_URL={store_urls['redis-peer']}",
            )
            found.append(Contender("scrapy-redis", n, peers, redis_settings))
        for store in ("sqlite", "postgres", "redis"):
            if store in store_urls:
                crawlq_settings = (
                    "SCHEDULER=crawlq.scrapy.Scheduler",
                    f"CRAWLQ_STORE={store_urls[store]}",
                    "CRAWLQ_LEASE_SECONDS=5",
                )
                found.append(Contender(f"crawlq {store}", n, CRAWLQ_PYTHON, crawlq_settings))
    return found


@dataclass
class Result:
    contender: Contender
    latency: float
    seconds: float
    cpu: float
    pages: int
    closed: str
    killed: bool = False


def fresh_stores(tmp: Path, run: int) -> dict[str, str]:
    from tests import servers

    urls = {"sqlite": f"sqlite:///{tmp}/run{run}.db"}
    try:
        urls["postgres"] = f"{servers.postgres().url}?schema=b{run}_{os.getpid()}"
    except BaseException as exc:  # servers skips (raises) without binaries
        print(f"no PostgreSQL: {exc}", file=sys.stderr)
    try:
        base = servers.redis().url
        urls["redis"] = f"{base}?prefix=b{run}x{os.getpid()}"
        db = 1 + run % 15
        urls["redis-peer"] = f"{base.rsplit('/', 1)[0]}/{db}"
        import redis as redis_client

        redis_client.Redis.from_url(urls["redis-peer"]).flushdb()
    except BaseException as exc:
        print(f"no Redis: {exc}", file=sys.stderr)
    return urls


def run_one(
    c: Contender, server: bc.Server, tmp: Path, n: int, latency: float, kill: bool, timeout: float
) -> Result:
    spider = tmp / "spider.py"
    spider.write_text(SPIDER)
    out = tmp / f"closed-{time.monotonic_ns()}.jsonl"
    server.control("reset")
    server.control(f"latency/{latency:g}")
    env = bc.crawlq_env()
    env = {k: v for k, v in env.items() if not k.startswith("CRAWLQ_")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    procs = []
    for i in range(c.processes):
        argv = [str(c.python), "-m", "scrapy", "runspider", str(spider)]
        argv += ["-a", f"start={server.url}", "-a", f"out={out}"]
        for s in c.settings:
            argv += ["-s", s]
        log = open(tmp / f"log-{c.name.replace(' ', '_')}-{c.processes}-{i}.txt", "w")
        procs.append(subprocess.Popen(argv, env=env, cwd=tmp, stdout=log, stderr=log))
    if kill:
        while len(server.control("counts")["counts"]) < n // 3:
            if all(p.poll() is not None for p in procs):
                break
            time.sleep(0.05)
        procs[0].send_signal(signal.SIGKILL)
    closed = "yes"
    for p in procs:
        try:
            p.wait(max(1.0, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            closed = "no (killed at timeout)"
            p.kill()
            p.wait()
    seconds = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    counts = server.control("counts")["counts"]
    pages = len([p for p in counts if p.startswith("/p/") or p == "/"])
    reasons = (
        [json.loads(line)["reason"] for line in out.read_text().splitlines()]
        if out.exists()
        else []
    )
    if closed == "yes":
        closed = "yes: " + ", ".join(sorted(set(reasons))) if reasons else "yes"
    return Result(c, latency, seconds, cpu, pages, closed, kill)


def table(results: list[Result], n: int) -> str:
    rows = [
        "| scheduler | processes | latency | pages/s | CPU ms/page | complete "
        "| lost after kill -9 | closed by itself |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        rate = r.pages / r.seconds if r.seconds else 0
        cpu = 1000 * r.cpu / r.pages if r.pages else 0
        lost = f"{n - r.pages}" if r.killed else ""
        rows.append(
            f"| {r.contender.name} | {r.contender.processes}{' (1 killed)' if r.killed else ''} "
            f"| {r.latency:g} ms | {rate:,.0f} | {cpu:.2f} | {100 * r.pages / n:.1f} % "
            f"| {lost} | {r.closed} |"
        )
    return "\n".join(rows)


def write_doc(section: str) -> None:
    text = DOC.read_text()
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        _old, foot = rest.split(END, 1)
        DOC.write_text(f"{head}{BEGIN}\n{section}\n{END}{foot}")
    else:
        DOC.write_text(f"{text.rstrip()}\n\n{HEADING}\n\n{BEGIN}\n{section}\n{END}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--latency", default="0,10", help="ms per response, comma-separated")
    parser.add_argument("--kill", action="store_true", help="add the kill -9 runs")
    parser.add_argument("--only", default="", help="only contenders whose name has this text")
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    peers = REPO / ".venv-peers" / "bin" / "python"
    probe = [str(peers), "-c", "import scrapy_redis; print(1)"]
    has_peer = peers.exists() and bc.first_line(probe) is not None
    tmp = Path(tempfile.mkdtemp(prefix="bench-scrapy-"))
    bc.build_site(tmp / "site", args.n)
    server = bc.Server(tmp / "site")
    results: list[Result] = []
    run = 0
    try:
        for latency in [float(x) for x in args.latency.split(",")]:
            for c in contenders(fresh_stores(tmp, 0), peers if has_peer else None):
                if args.only not in c.name:
                    continue
                run += 1
                c = Contender(c.name, c.processes, c.python, _fresh(c.settings, tmp, run))
                r = run_one(c, server, tmp, args.n, latency, False, args.timeout)
                print(table([r], args.n).splitlines()[-1], flush=True)
                results.append(r)
        if args.kill:
            for c in contenders(fresh_stores(tmp, 0), peers if has_peer else None):
                if c.processes < 3 or args.only not in c.name:
                    continue
                run += 1
                c = Contender(c.name, c.processes, c.python, _fresh(c.settings, tmp, run))
                r = run_one(c, server, tmp, args.n, 10.0, True, args.timeout)
                print(table([r], args.n).splitlines()[-1], flush=True)
                results.append(r)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    section = (
        f"{args.n} pages, bench_crawl.py's site on loopback, CONCURRENT_REQUESTS=16 per "
        f"process; one run each ({time.strftime('%Y-%m-%d')}, 2 shared cores).\n\n"
        + table(results, args.n)
    )
    print(section)
    if args.write:
        write_doc(section)
    return 0


def _fresh(settings: tuple[str, ...], tmp: Path, run: int) -> tuple[str, ...]:
    """The settings with a store of this run's own (a new file, schema, prefix or db)."""
    urls = fresh_stores(tmp, run)
    fresh = []
    for s in settings:
        key, _, value = s.partition("=")
        if key == "CRAWLQ_STORE":
            scheme = value.split(":", 1)[0]
            store = {"sqlite": "sqlite", "postgresql": "postgres", "redis": "redis"}[scheme]
            value = urls[store]
        elif key == "REDIS_URL":
            value = urls["redis-peer"]
        fresh.append(f"{key}={value}")
    return tuple(fresh)


if __name__ == "__main__":
    sys.exit(main())
