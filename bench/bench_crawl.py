"""Pages per second crawling a local static site: ``crawlq crawl`` against ``wget -r`` and
a plain Scrapy spider, on the same site, in the same run (issue 7).

    .venv/bin/python bench/bench_crawl.py                   # 2,000 pages, C=4 and 16, 3 runs
    .venv/bin/python bench/bench_crawl.py -n 300 --runs 1   # a quick look
    .venv/bin/python bench/bench_crawl.py --only wget,scrapy --concurrency 4
    .venv/bin/python bench/bench_crawl.py --write           # also into docs/benchmarks.md

The site: ``-n`` generated HTML pages of about 4 KB on disk (a <title>, ten links each:
a tree of four children per page, so that every page is reachable from ``/``, and the
rest seeded random links, half of them relative), and a robots.txt allowing everything.
A small asyncio HTTP/1.1 server (keep-alive, Content-Length, every file preloaded into
memory) serves it on 127.0.0.1 from a process of its own, so that it takes no GIL from
the crawler being measured, and counts the requests for every path: the bench checks
that each tool fetched every page, and exactly once. Its capacity is measured first.

The contenders, each a subprocess timed from start to exit (wall clock), crawling from
``/`` with robots.txt obeyed and no delay:

- ``wget -r -l inf -nd --delete-after -q``: one connection, one request at a time (it
  has no concurrency option);
- a plain Scrapy spider (``scrapy runspider``: LinkExtractor + ``response.follow``,
  items url/status/title to a JSON Lines feed) with ``CONCURRENT_REQUESTS`` =
  ``CONCURRENT_REQUESTS_PER_DOMAIN`` = C, from the peers' virtualenv (``.venv-peers``);
- ``crawlq crawl URL --store sqlite:///... --allow-private --concurrency C
  --host-concurrency C --delay 0 --output out.jsonl --no-progress``.

Runs are interleaved (round-robin, the order rotated each round). Not a test: it asserts
nothing about speed. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import bench_sqlite as bs  # the QuietGate and machine facts all benchmarks share
import bytecode

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
BEGIN, END = "<!-- crawl:begin -->", "<!-- crawl:end -->"
HEADING = "## Crawler: crawlq crawl against wget -r and Scrapy (issue 7)"
PEERS_PYTHON = REPO / ".venv-peers" / "bin" / "python"
FANOUT = 4  # tree children per page: every page reachable from /
LINKS = 10  # links per page (tree children + seeded random pages)
WORDS = (
    "crawl queue page link fetch parse robots host delay worker store job frontier seen "
    "canonical title anchor index archive sitemap spider scrape retry lease limit claim "
    "durable batch commit ready running done dead cursor cache header body status redirect "
    "origin scheme path query fragment charset encoding gzip socket connection keep alive "
    "server client latency throughput median sample table figure result"
).split()
TOOLS = ("wget", "scrapy", "crawlq")
CONTROL = "/__bench/"


# -- the site --------------------------------------------------------------------------


def page_path(i: int) -> str:
    return "/" if i == 0 else f"/p/{i:05d}.html"


def page_file(i: int) -> str:
    return "index.html" if i == 0 else f"p/{i:05d}.html"


def href(rng: random.Random, src: int, dst: int) -> str:
    """Half the links relative (resolved against the page), half path-absolute."""
    if dst == 0:
        return "/"
    if rng.random() < 0.5:
        return f"{dst:05d}.html" if src else f"p/{dst:05d}.html"
    return page_path(dst)


def words(rng: random.Random, k: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(k))


def build_site(root: Path, n: int, seed: int = 7) -> int:
    """Write ``n`` pages and robots.txt under ``root``; return the total bytes."""
    rng = random.Random(seed)
    (root / "p").mkdir(parents=True, exist_ok=True)
    total = 0
    for i in range(n):
        links = [c for c in range(FANOUT * i + 1, FANOUT * i + FANOUT + 1) if c < n]
        links += [rng.randrange(n) for _ in range(LINKS - len(links))]
        rng.shuffle(links)
        paragraphs = "\n".join(
            f'<p>{words(rng, rng.randint(20, 40))} <a href="{href(rng, i, j)}">'
            f"{words(rng, 2)} {j}</a> {words(rng, rng.randint(10, 25))}.</p>"
            for j in links
        )
        body = (
            "<!DOCTYPE html>\n<html lang=en>\n<head><meta charset=utf-8>\n"
            f"<title>Page {i}: {words(rng, 3)}</title>\n</head>\n<body>\n"
            f"<h1>Page {i}</h1>\n{paragraphs}\n</body>\n</html>\n"
        ).encode()
        (root / page_file(i)).write_bytes(body)
        total += len(body)
    (root / "robots.txt").write_text("User-agent: *\nDisallow:\n")
    return total


# -- the server (its own process: `bench_crawl.py --serve DIR`) -------------------------


class Site:
    def __init__(self, root: Path) -> None:
        self.responses: dict[bytes, tuple[bytes, bytes]] = {}
        for f in root.rglob("*"):
            if not f.is_file():
                continue
            rel = f.relative_to(root).as_posix()
            path = "/" if rel == "index.html" else f"/{rel}"
            kind = "text/plain" if rel.endswith(".txt") else "text/html; charset=utf-8"
            self.add(path.encode(), 200, kind, f.read_bytes())
        self.not_found = self.response(404, "text/plain", b"not found\n")
        self.latency = 0.0
        self.reset()

    def add(self, path: bytes, status: int, kind: str, body: bytes) -> None:
        self.responses[path] = self.response(status, kind, body)

    @staticmethod
    def response(status: int, kind: str, body: bytes) -> tuple[bytes, bytes]:
        reason = {200: "OK", 404: "Not Found", 400: "Bad Request"}[status]
        head = (
            f"HTTP/1.1 {status} {reason}\r\nServer: bench-crawl\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        return head, body

    def reset(self) -> None:
        self.counts: dict[str, int] = {}
        self.connections = 0
        self.first: float | None = None
        self.last: float | None = None

    def control(self, path: bytes) -> tuple[bytes, bytes]:
        if path == b"/__bench/reset":
            self.reset()
            body = b"{}"
        elif path.startswith(b"/__bench/latency/"):
            self.latency = float(path.rsplit(b"/", 1)[1]) / 1000
            body = b"{}"
        else:
            body = json.dumps(
                {
                    "counts": self.counts,
                    "connections": self.connections,
                    "first": self.first,
                    "last": self.last,
                }
            ).encode()
        return self.response(200, "application/json", body)

    def handle(self, head: bytes, transport: asyncio.WriteTransport) -> bool:
        """Answer one request; return whether the connection stays open."""
        line, _, headers = head.partition(b"\r\n")
        parts = line.split(b" ")
        if len(parts) != 3:
            transport.write(b"".join(self.response(400, "text/plain", b"bad request\n")))
            return False
        method, target, version = parts
        path = target.split(b"?", 1)[0]
        if path.startswith(CONTROL.encode()):
            resp = self.control(path)
        else:
            now = time.time()
            if self.first is None:
                self.first = now
            self.last = now
            key = path.decode("latin-1")
            self.counts[key] = self.counts.get(key, 0) + 1
            resp = self.responses.get(path, self.not_found)
        lowered = headers.lower()
        if version == b"HTTP/1.0":
            keep = b"connection: keep-alive" in lowered
        else:
            keep = b"connection: close" not in lowered
        data = resp[0] if method == b"HEAD" else resp[0] + resp[1]
        if self.latency and not path.startswith(CONTROL.encode()):
            # Same delay for every response, so they leave in the order asked.
            loop = asyncio.get_running_loop()
            loop.call_later(self.latency, transport.write, data)
            if not keep:
                loop.call_later(self.latency, transport.close)
            return True  # the protocol must not close before the write
        transport.write(data)
        return keep


class SiteProtocol(asyncio.Protocol):
    def __init__(self, site: Site) -> None:
        self.site = site
        self.buf = b""
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        self.transport = transport
        self.site.connections += 1

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.transport.close()
                return
            head, self.buf = self.buf[:end], self.buf[end + 4 :]
            if not self.site.handle(head, self.transport):
                self.transport.close()
                return


def serve(root: Path) -> None:
    async def main() -> None:
        site = Site(root)
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: SiteProtocol(site), "127.0.0.1", 0, backlog=512)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


class Server:
    """The site server as a subprocess of the bench's Python."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", str(root)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}/"

    def control(self, what: str) -> dict:
        with urllib.request.urlopen(f"{self.url}__bench/{what}", timeout=10) as resp:
            return json.loads(resp.read())

    def cpu(self) -> float:
        """CPU seconds the server process has used (from /proc)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


# -- the server alone --------------------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    body = await reader.readexactly(int(headers["content-length"]))
    return status, headers, body


async def _check_keep_alive(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for path in ("/", "/robots.txt"):
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            status, headers, _ = await _read_response(reader)
            if status != 200 or "content-length" not in headers:
                return f"bad response for {path}: {status} {headers}"
            if headers.get("connection", "").lower() == "close":
                return "the server closes the connection"
    finally:
        writer.close()
    return ""


async def _load(port: int, paths: list[str], connections: int, seconds: float) -> int:
    done = 0
    stop = time.perf_counter() + seconds

    async def one(k: int) -> None:
        nonlocal done
        rng = random.Random(k)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        while time.perf_counter() < stop:
            path = rng.choice(paths)
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            await _read_response(reader)
            done += 1
        writer.close()

    await asyncio.gather(*(one(k) for k in range(connections)))
    return done


def server_capacity(server: Server, n: int, connections: int = 8, seconds: float = 3.0) -> str:
    problem = asyncio.run(_check_keep_alive(server.port))
    stats = server.control("counts")
    if problem or stats["connections"] != 2:  # the check's one + this control request's
        raise RuntimeError(f"the site server fails the keep-alive check: {problem or stats}")
    paths = [page_path(i) for i in range(n)]
    cpu0 = server.cpu()
    started = time.perf_counter()
    done = asyncio.run(_load(server.port, paths, connections, seconds))
    wall = time.perf_counter() - started
    busy = (server.cpu() - cpu0) / wall
    us = (server.cpu() - cpu0) / done * 1e6
    server.control("reset")
    return (
        f"{done / wall:,.0f} pages/s over {connections} keep-alive connections from one "
        f"Python asyncio client in another process (the server busy {busy:.0%} of a core "
        f"meanwhile, {us:.0f} µs of CPU per page: about {1e6 / us:,.0f} pages/s per core "
        f"if saturated)"
    )


CEILING_SECONDS = 2.0
"""How long the bare client measures each ceiling."""


def ceilings(server: Server, n: int, levels: list[int]) -> dict[int, float]:
    """Pages/s of a bare asyncio client keeping C requests in flight (C keep-alive
    connections, nothing parsed, nothing queued), for each C of ``levels``, with the
    server's latency as it is set: what no crawler can beat at that concurrency."""
    paths = [page_path(i) for i in range(n)]
    rates = {}
    for c in levels:
        started = time.perf_counter()
        done = asyncio.run(_load(server.port, paths, c, CEILING_SECONDS))
        rates[c] = done / (time.perf_counter() - started)
    server.control("reset")
    return rates


def ceiling_line(rates: dict[int, float], results: dict[Contender, list[Run]]) -> str:
    """The report's line on the ceilings, with each crawlq row's median as a share."""
    parts = []
    for c, rate in rates.items():
        runs = results.get(Contender("crawlq", c), [])
        median = statistics.median(r.rate for r in runs) if runs else None
        share = f" (crawlq {median / rate:.0%} of it)" if median is not None else ""
        parts.append(f"C={c} {rate:,.0f} pages/s{share}")
    return (
        "- Ceiling at this latency: a bare asyncio client of the bench keeping C requests in "
        f"flight over C keep-alive connections (nothing parsed, nothing queued), "
        f"{CEILING_SECONDS:g} s each: " + ", ".join(parts) + "."
    )


# -- machine, versions -------------------------------------------------------------------


def first_line(cmd: list[str], env: dict[str, str] | None = None) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0] if lines else None


def crawlq_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def crawlq_command() -> list[str]:
    """``.venv/bin/crawlq`` when installed, else ``python -m crawlq`` from the repo."""
    script = REPO / ".venv" / "bin" / "crawlq"
    if script.exists():
        return [str(script)]
    return [str(REPO / ".venv" / "bin" / "python"), "-m", "crawlq"]


def crawl_args(url: str, work: Path, concurrency: int, processes: int = 1) -> list[str]:
    """The bench's ``crawlq crawl`` arguments: a SQLite store and ``out.jsonl`` in
    ``work``, ``concurrency`` per host and in all, no delay (also the profilers')."""
    return [
        "crawl", url, "--store", f"sqlite:///{work / 'crawl.db'}", "--allow-private",
        "--concurrency", str(concurrency), "--host-concurrency", str(concurrency),
        "--delay", "0", "--processes", str(processes), "--output", str(work / "out.jsonl"),
        "--no-progress",
    ]  # fmt: skip


def crawlq_version(python: str) -> str:
    """The crawlq under test (version, commit, uncommitted changes), asked of ``python``."""
    code = f"import sys; sys.path.insert(0, {str(REPO / 'bench')!r}); import bench_sqlite; "
    code += "print(bench_sqlite.crawlq_version())"
    found = first_line([python, "-c", code], crawlq_env())
    return found or "crawlq (version unknown)"


# -- the contenders ------------------------------------------------------------------------

SPIDER = '''\
"""A plain Scrapy spider: every link of every page, one item per page."""

import scrapy
from scrapy.linkextractors import LinkExtractor


class SiteSpider(scrapy.Spider):
    name = "site"
    custom_settings = {
        "ROBOTSTXT_OBEY": True,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "HTTPCACHE_ENABLED": False,
        "LOG_LEVEL": "ERROR",
    }
    links = LinkExtractor()

    def __init__(self, start, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start]

    def parse(self, response):
        yield {
            "url": response.url,
            "status": response.status,
            "title": response.css("title::text").get(),
        }
        for link in self.links.extract_links(response):
            yield response.follow(link, self.parse)
'''


@dataclass(frozen=True)
class Contender:
    tool: str
    concurrency: int  # per host; wget: 1 (sequential)
    processes: int = 1  # crawlq crawl --processes

    @property
    def label(self) -> str:
        more = f" x{self.processes}" if self.processes > 1 else ""
        return f"{self.tool} C={self.concurrency}{more}"


@dataclass
class Run:
    wall: float
    pages: int  # distinct site pages fetched
    duplicates: int  # extra fetches of site pages
    other: dict[str, int]  # requests for anything else (robots.txt, 404s)
    connections: int
    startup: float  # from start to the server's first request
    cpu: float  # CPU seconds of the tool's process tree
    server_busy: float  # server CPU seconds per wall second
    items: int | None  # distinct URLs in the output (scrapy, crawlq)
    duplicated: list[str]  # the paths fetched more than once
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.pages / self.wall


class Bench:
    def __init__(
        self, tmp: Path, server: Server, n: int, timeout: float, peers_python: Path
    ) -> None:
        self.tmp = tmp
        self.server = server
        self.n = n
        self.timeout = timeout
        self.peers_python = peers_python
        self.spider = tmp / "spider.py"
        self.spider.write_text(SPIDER)
        self.site_paths = {page_path(i) for i in range(n)}
        self.counter = 0

    def command(self, c: Contender, work: Path) -> tuple[list[str], dict[str, str] | None, Path]:
        out = work / "out.jsonl"
        url = self.server.url
        if c.tool == "wget":
            cmd = ["wget", "-r", "-l", "inf", "-nd", "--delete-after", "-q", url]
            return cmd, None, out
        if c.tool == "scrapy":
            cmd = [
                str(self.peers_python),
                "-m",
                "scrapy",
                "runspider",
                str(self.spider),
                "-a",
                f"start={url}",
                "-O",
                str(out),
                "-s",
                f"CONCURRENT_REQUESTS={c.concurrency}",
                "-s",
                f"CONCURRENT_REQUESTS_PER_DOMAIN={c.concurrency}",
            ]
            return cmd, None, out
        cmd = [*crawlq_command(), *crawl_args(url, work, c.concurrency, c.processes)]
        return cmd, crawlq_env(), out

    def run(self, c: Contender) -> Run:
        self.counter += 1
        work = self.tmp / f"{self.counter:03d}-{c.tool}-{c.concurrency}"
        work.mkdir()
        cmd, env, out = self.command(c, work)
        self.server.control("reset")
        server_cpu0 = self.server.cpu()
        usage0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        with open(work / "log.txt", "wb") as log:
            t0 = time.time()
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                rc = proc.wait(self.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = None
            wall = time.perf_counter() - started
        usage1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_busy = (self.server.cpu() - server_cpu0) / wall
        stats = self.server.control("counts")
        counts: dict[str, int] = stats["counts"]
        site = {p: k for p, k in counts.items() if p in self.site_paths}
        other = {p: k for p, k in counts.items() if p not in self.site_paths}
        problems = []
        if rc is None:
            problems.append(f"killed after {self.timeout:.0f} s")
        elif rc != 0:
            problems.append(f"exit status {rc} (log: {work / 'log.txt'})")
        if len(site) < self.n:
            problems.append(f"{self.n - len(site)} pages never fetched")
        items = None
        if c.tool != "wget":
            urls = set()
            if out.exists():
                for line in out.read_text().splitlines():
                    if line.strip():
                        item = json.loads(line)
                        urls.add(item.get("url"))
                        if item.get("status") != 200 or not item.get("title"):
                            problems.append(f"item without status 200 or a title: {line[:120]}")
                            break
            items = len(urls)
            if items != len(site):
                problems.append(f"{items} pages in the output, {len(site)} fetched")
        return Run(
            wall=wall,
            pages=len(site),
            duplicates=sum(k - 1 for k in site.values()),
            duplicated=sorted(p for p, k in site.items() if k > 1),
            other=other,
            connections=stats["connections"] - 1,  # less the control request's own
            startup=(stats["first"] - t0) if stats["first"] else float("nan"),
            cpu=(usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime),
            server_busy=server_busy,
            items=items,
            problems=problems,
        )


def crawlq_available() -> str:
    """Empty when ``crawlq crawl`` takes the agreed options, else why not."""
    try:
        out = subprocess.run(
            [*crawlq_command(), "crawl", "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env=crawlq_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if out.returncode != 0:
        return (out.stderr.strip().splitlines() or ["no output"])[-1]
    if not bytecode.compile_crawlq(str(REPO / ".venv" / "bin" / "python"), crawlq_env()):
        return "its modules could not be byte-compiled"
    wanted = ("--store", "--allow-private", "--concurrency", "--host-concurrency", "--delay")
    missing = [o for o in (*wanted, "--output", "--no-progress") if o not in out.stdout]
    return f"missing options {', '.join(missing)}" if missing else ""


def scrapy_version(python: Path) -> str | None:
    return first_line(
        [
            str(python),
            "-c",
            "import scrapy, twisted; print(f'Scrapy {scrapy.__version__} "
            "(Twisted {twisted.__version__})')",
        ]
    )


# -- report --------------------------------------------------------------------------------


def span(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}-{format(max(values), fmt)})"


def table(results: dict[Contender, list[Run]], n: int) -> str:
    crawlqs = [c for c in results if c.tool == "crawlq"]
    med = {c: statistics.median(r.rate for r in runs) for c, runs in results.items()}
    head = [
        "tool",
        "per-host concurrency",
        "pages",
        "duplicates",
        "pages/s, median (min-max)",
        "start-up s",
        "CPU ms/page",
        "connections",
        *(f"{c.label} / tool" for c in crawlqs),
    ]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for c, runs in results.items():
        pages = min(r.pages for r in runs)
        conc = "1 (sequential; no option)" if c.tool == "wget" else str(c.concurrency)
        cells = [
            c.tool if c.processes == 1 else f"{c.tool} ({c.processes} processes)",
            conc,
            f"{pages:,}" if pages == n else f"**{pages:,} of {n:,}**",
            str(max(r.duplicates for r in runs)),
            span([r.rate for r in runs], ",.0f"),
            f"{statistics.median(r.startup for r in runs):.2f}",
            f"{statistics.median(r.cpu / max(r.pages, 1) * 1e3 for r in runs):.2f}",
            str(max(r.connections for r in runs)),
            *(f"{med[q] / med[c]:.2f}" for q in crawlqs),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def settings(tools: list[str]) -> list[str]:
    """The report's bullets on how each tool was run."""
    text = {
        "wget": "- wget: `wget -r -l inf -nd --delete-after -q URL` (one connection, one "
        "request at a time: it has no concurrency option).",
        "scrapy": "- Scrapy: a plain `scrapy.Spider` (LinkExtractor + `response.follow`, items "
        "url, status, title to a JSON Lines feed with `-O out.jsonl`), `scrapy runspider`, "
        "`CONCURRENT_REQUESTS` = `CONCURRENT_REQUESTS_PER_DOMAIN` = C, `DOWNLOAD_DELAY = 0`, "
        "`ROBOTSTXT_OBEY = True`, `AUTOTHROTTLE_ENABLED = False`, "
        "`HTTPCACHE_ENABLED = False`, `LOG_LEVEL = 'ERROR'`, other settings at their "
        "defaults.",
        "crawlq": "- crawlq: `crawlq crawl URL --store sqlite:///TMP/crawl.db --allow-private "
        "--concurrency C --host-concurrency C --delay 0 --processes P --output TMP/out.jsonl "
        "--no-progress`; P = 1, and 2 in the row marked (2 processes): two processes on "
        "the same store, each with C fetches in flight, the host limit C across both. "
        "crawlq's modules are byte-compiled before the runs, as `pip install` does (an "
        "editable install is not, and with `PYTHONDONTWRITEBYTECODE` set each start would "
        "compile them again).",
    }
    return [text[t] for t in TOOLS if t in tools]


def write_doc(section: str, doc: Path, latency: float = 0.0) -> None:
    """Replace the text between the crawl markers of ``doc``, or append the section.
    Each ``--latency`` has a section of its own (no latency: the main one)."""
    begin, end, heading = BEGIN, END, HEADING
    if latency:
        tag = f"crawl-latency-{latency:g}"
        begin, end = f"<!-- {tag}:begin -->", f"<!-- {tag}:end -->"
        heading = f"### The same with {latency:g} ms of latency per response"
    text = doc.read_text() if doc.exists() else "# Benchmarks\n"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _old, foot = rest.split(end, 1)
        doc.write_text(f"{head}{begin}\n{section}\n{end}{foot}")
    else:
        doc.write_text(f"{text.rstrip()}\n\n{heading}\n\n{begin}\n{section}\n{end}\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2000, help="pages in the site (default 2000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per contender (default 3)")
    parser.add_argument(
        "--concurrency",
        default="4,16",
        help="per-host concurrencies for scrapy and crawlq, comma-separated (default 4,16)",
    )
    parser.add_argument("--only", default=",".join(TOOLS), help="tools, comma-separated")
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="milliseconds the server waits before each response, to stand for a network "
        "round trip (default 0: loopback)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and logs")
    parser.add_argument(
        "--crawlq-processes",
        type=int,
        default=2,
        help="also run crawlq at the highest concurrency with this many processes "
        "(crawlq crawl --processes; default 2, 1 for none)",
    )
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    parser.add_argument("--gate-patience", type=float, default=10.0)
    parser.add_argument("--peers-python", type=Path, default=PEERS_PYTHON)
    parser.add_argument("--write", action="store_true", help=f"update {DOC.relative_to(REPO)}")
    parser.add_argument("--doc", type=Path, default=DOC, help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    tools = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        parser.error(f"unknown tools: {', '.join(sorted(unknown))}")
    levels = [int(x) for x in args.concurrency.split(",")]
    versions: dict[str, str] = {}
    missing: list[str] = []  # lines for the report: tools asked for but not available
    if "wget" in tools:
        line = first_line(["wget", "--version"])
        if line is None:
            missing.append("wget not found: left out of this run.")
            tools.remove("wget")
        else:
            versions["wget"] = line
    if "scrapy" in tools:
        line = scrapy_version(args.peers_python)
        if line is None:
            missing.append(f"Scrapy not importable by {args.peers_python}: left out of this run.")
            tools.remove("scrapy")
        else:
            versions["scrapy"] = line
    if "crawlq" in tools:
        why = crawlq_available()
        if why:
            missing.append(f"crawlq crawl not available ({why}): left out of this run.")
            tools.remove("crawlq")
        else:
            versions["crawlq"] = crawlq_version(str(REPO / ".venv" / "bin" / "python"))
    for line in missing:
        say(line)
    contenders = [Contender(t, 1) for t in tools if t == "wget"]
    contenders += [Contender(t, c) for c in levels for t in tools if t != "wget"]
    if "crawlq" in tools and args.crawlq_processes > 1:
        contenders.append(Contender("crawlq", max(levels), args.crawlq_processes))
    if not contenders:
        say("nothing to run")
        return 1

    tmp = Path(tempfile.mkdtemp(prefix="bench-crawl-"))
    server = None
    try:
        started = dt.datetime.now(dt.UTC)
        size = build_site(tmp / "site", args.n)
        say(f"site: {args.n:,} pages, {size / args.n / 1024:.1f} KB a page, in {tmp / 'site'}")
        server = Server(tmp / "site")
        gate = bs.QuietGate(patience=args.gate_patience)
        gate.wait()
        capacity = server_capacity(server, args.n)
        say(f"server alone: {capacity}")
        server.control(f"latency/{args.latency:g}")
        rates = ceilings(server, args.n, levels) if args.latency else {}
        if rates:
            say("ceilings: " + ", ".join(f"C={c} {r:,.0f} pages/s" for c, r in rates.items()))
        bench = Bench(tmp, server, args.n, args.timeout, args.peers_python)
        gate.steps, gate.busy = 0, []  # the report counts the runs only
        results: dict[Contender, list[Run]] = {c: [] for c in contenders}
        for r in range(args.runs):
            k = r % len(contenders)
            for c in contenders[k:] + contenders[:k]:
                gate.wait()
                run = bench.run(c)
                results[c].append(run)
                other = ", ".join(f"{p}: {k}" for p, k in sorted(run.other.items())) or "none"
                dups = ", ".join(run.duplicated[:3]) + (", ..." if run.duplicated[3:] else "")
                say(
                    f"run {r + 1}/{args.runs} {c.label:11} {run.rate:7,.0f} pages/s: "
                    f"{run.pages:,} pages in {run.wall:.2f} s, {run.duplicates} duplicates "
                    f"({dups or 'none'}), "
                    f"start-up {run.startup:.2f} s, CPU {run.cpu:.2f} s, "
                    f"{run.connections} connections, server busy {run.server_busy:.0%}; "
                    f"other requests: {other}"
                )
                for p in run.problems:
                    say(f"    problem: {p}")
        finished = dt.datetime.now(dt.UTC)
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    busy = [r.server_busy for runs in results.values() for r in runs]
    problems = sorted(
        {f"{c.label}: {p}" for c, runs in results.items() for r in runs for p in r.problems}
    )
    lines = [
        f"Run {started:%Y-%m-%d %H:%M}-{finished:%H:%M} UTC, `bench/bench_crawl.py -n {args.n} "
        f"--runs {args.runs} --concurrency {args.concurrency} --only {','.join(tools)}"
        f"{f' --latency {args.latency:g}' if args.latency else ''}`.",
        "",
        f"- Machine: {os.cpu_count()} cores ({bs.cpu_model()}), {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}.",
        *(f"- {versions[t]}" for t in TOOLS if t in versions),
        f"- Site: {args.n:,} generated pages of {size / args.n / 1024:.1f} KB on average "
        f"(a <title>, {LINKS} links each: a tree of {FANOUT} children per page so that "
        "every page is reachable from `/`, the rest seeded random, half relative), and a "
        "robots.txt allowing everything, which every tool fetches and obeys.",
        "- Server: an asyncio HTTP/1.1 server (keep-alive, Content-Length, files preloaded) "
        f"on 127.0.0.1 in a process of its own. Alone: {capacity}. During the runs it was "
        f"busy {max(busy):.0%} of a core at most."
        + (
            f" It waited {args.latency:g} ms before sending each response (a stand-in for a "
            "network round trip; none in the capacity figure)."
            if args.latency
            else ""
        ),
        *([ceiling_line(rates, results)] if rates else []),
        *settings(tools),
        "- Each figure: wall clock from starting the process until it exits (start-up "
        "included), pages = distinct site pages the server saw requested; duplicates = "
        "extra requests for a page; start-up = until the server's first request; CPU = "
        "user + system time of the tool's processes; connections = TCP connections opened. "
        f"{args.runs} run{'s' if args.runs != 1 else ''} per row, interleaved round-robin; "
        f"{gate.describe()}.",
        "",
        table(results, args.n),
    ]
    if missing:
        lines += ["", *missing]
    if problems:
        lines += ["", "Problems:", "", *(f"- {p}" for p in problems)]
    section = "\n".join(lines)
    print(section)
    if args.write:
        write_doc(section, args.doc, args.latency)
        say(f"wrote {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
