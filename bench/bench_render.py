"""Rendered pages per second and peak memory: ``crawlq crawl --render`` with the browsers
recycled and not (issue 21).

    .venv/bin/python bench/bench_render.py                  # 500 pages, 2 processes
    .venv/bin/python bench/bench_render.py -n 100 --recycle 20

The site: ``-n`` HTML pages whose links exist only after JavaScript ran: each page loads
``/app.js``, which fetches ``/api/links.json?page=N`` and adds links to the page's two
children in a tree (so every page is reachable from ``/``), as a single-page app would.
A threaded HTTP/1.1 server serves it on 127.0.0.1 in this process and counts requests.

Each run is ``crawlq crawl URL --render --processes P --allow-private --delay 0
--host-concurrency P`` in a subprocess on a fresh SQLite store, timed from start to exit;
its process tree's resident memory (the crawl, its children, their Playwright drivers and
browsers, summed over processes, so shared pages count more than once) is sampled every
0.1 s and the peak reported. "recycling on" replaces each child and its browser after
``--recycle`` pages; "off" never does (limits set out of reach). The bench checks that
every page was recorded, with its rendered title. Not a test: it asserts nothing about
speed. See bench/README.md.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from crawlq.worker.memory import tree_resident_bytes  # noqa: E402

APP_JS = """
const n = Number(location.pathname.split('/').pop() || 0);
fetch('/api/links.json?page=' + n).then(r => r.json()).then(({links}) => {
  for (const href of links) {
    const a = document.createElement('a'); a.href = href; a.textContent = href;
    document.body.appendChild(a);
  }
  document.title = 'rendered ' + n;
});
"""


class Site(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, pages: int) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.pages = pages
        self.requests = 0
        self.lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        site: Site = self.server  # type: ignore[assignment]
        with site.lock:
            site.requests += 1
        parts = urllib.parse.urlsplit(self.path)
        if parts.path == "/robots.txt":
            self.send(200, "text/plain", "User-agent: *\nAllow: /\n")
        elif parts.path == "/app.js":
            self.send(200, "application/javascript", APP_JS)
        elif parts.path == "/api/links.json":
            n = int(urllib.parse.parse_qs(parts.query)["page"][0])
            kids = [k for k in (2 * n + 1, 2 * n + 2) if k < site.pages]
            self.send(200, "application/json", json.dumps({"links": [f"/p/{k}" for k in kids]}))
        elif parts.path == "/" or parts.path.startswith("/p/"):
            filler = "<p>" + "lorem ipsum dolor sit amet " * 100 + "</p>"
            html = (
                f"<html><head><title>raw</title><script src='/app.js' defer></script></head>"
                f"<body><h1>{parts.path}</h1>{filler}</body></html>"
            )
            self.send(200, "text/html; charset=utf-8", html)
        else:
            self.send(404, "text/html", "<title>404</title>")

    def send(self, status: int, ctype: str, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def run(site: Site, processes: int, recycle: int | None) -> tuple[float, float, int]:
    """One crawl: (seconds, peak MiB of the process tree, pages rendered)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "pages.jsonl"
        port = site.server_address[1]
        argv = [
            sys.executable, "-m", "crawlq", "crawl", f"http://127.0.0.1:{port}/",
            "--store", f"sqlite:///{tmp}/render.db", "--allow-private", "--delay", "0",
            "--host-concurrency", str(processes), "--render", "--processes", str(processes),
            "--render-pages-per-child", str(recycle or 10**9),
            "--render-memory-per-child", "1GiB" if recycle else "1000GiB",
            "-o", str(out), "--no-progress",
        ]  # fmt: skip
        started = time.monotonic()
        proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, tree_resident_bytes(proc.pid) or 0)
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        if proc.returncode != 0:
            raise SystemExit(f"crawlq crawl exited {proc.returncode}")
        records = [json.loads(line) for line in out.read_text().splitlines()]
        rendered = sum(1 for r in records if (r["title"] or "").startswith("rendered"))
        if rendered != site.pages:
            other = [r for r in records if not (r["title"] or "").startswith("rendered")]
            raise SystemExit(f"{rendered} of {site.pages} pages rendered; e.g. {other[:2]}")
        return elapsed, peak / 2**20, rendered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--pages", type=int, default=500)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--recycle", type=int, default=50, help="pages per child when on")
    args = parser.parse_args()
    site = Site(args.pages)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    print(f"{args.pages} pages, {args.processes} processes, {os.cpu_count()} CPUs")
    print("| recycling | pages | seconds | pages/s | peak RSS of the tree (MiB) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, recycle in ((f"on (every {args.recycle} pages)", args.recycle), ("off", None)):
        elapsed, peak, pages = run(site, args.processes, recycle)
        print(f"| {label} | {pages} | {elapsed:.1f} | {pages / elapsed:.2f} | {peak:.0f} |")
    site.shutdown()


if __name__ == "__main__":
    main()
