"""Three Scrapy processes, one crawlq crawl, on the book shop in ``examples/site``.

    python examples/scrapy_demo.py      # needs: pip install 'crawlq[scrapy]'

It serves the site on 127.0.0.1, runs ``scrapy runspider examples/scrapy_books.py``
three times at once on a new SQLite store, and prints which process scraped which page:
each page once, and every process closes with ``finished`` when the crawl is done.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    handler = functools.partial(_Quiet, directory=str(HERE / "site"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    start = f"http://127.0.0.1:{server.server_address[1]}/"
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, BOOKS_STORE=f"sqlite:///{tmp}/books.db")
        argv = [sys.executable, "-m", "scrapy", "runspider", str(HERE / "scrapy_books.py")]
        argv += ["--loglevel", "WARNING"]
        procs = [
            subprocess.Popen(
                [*argv, "-a", f"start={start}", "-o", f"{tmp}/items-{i}.jsonl"], env=env
            )
            for i in range(3)
        ]
        codes = [p.wait() for p in procs]
        for i in range(3):
            for line in Path(f"{tmp}/items-{i}.jsonl").read_text().splitlines():
                item = json.loads(line)
                print(f"process {i}: {item['url']}  {item['title']}")
    server.shutdown()
    return max(codes)


if __name__ == "__main__":
    sys.exit(main())
