"""crawlq's main job in one command: ``crawlq crawl`` on a small local site.

Run it from anywhere: ``python examples/crawl_demo.py``. It serves the book shop in
``examples/site`` on 127.0.0.1 (so it needs no network), then runs the real command

    crawlq crawl http://127.0.0.1:PORT/ --allow-private -o examples/pages.jsonl \\
        --store sqlite:///.../examples/crawl-demo.db --new

on the embedded SQLite store ``examples/crawl-demo.db`` (a new crawl each time): robots.txt
is fetched and obeyed (``/admin/`` is disallowed), each URL is fetched once although several
pages link to it, the missing page is recorded as a 404, and one JSON object per page goes
to ``examples/pages.jsonl``. ``--allow-private`` is needed because crawlq refuses loopback
and private addresses by default. Exits with the crawl's exit code.
"""

from __future__ import annotations

import functools
import http.server
import json
import shlex
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    handler = functools.partial(_QuietHandler, directory=str(HERE / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    output = HERE / "pages.jsonl"
    store = f"sqlite:///{HERE / 'crawl-demo.db'}"
    command = ["crawl", url, "--allow-private", "-o", str(output), "--store", store, "--new"]
    print("$ " + shlex.join(["crawlq", *command]), flush=True)
    code = subprocess.run([sys.executable, "-m", "crawlq", *command], check=False).returncode
    server.shutdown()
    if output.exists():
        print(f"\n{output.name}:")
        for line in output.read_text().splitlines():
            page = json.loads(line)
            status = page["status"] or "-"
            what = page["title"] or page["error"] or page["content_type"] or ""
            path = page["url"][len(url) - 1 :]
            print(f"  {status!s:>3}  depth {page['depth']}  {path:<20} {what}")
    return code


if __name__ == "__main__":
    sys.exit(main())
