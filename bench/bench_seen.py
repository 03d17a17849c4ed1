"""A crawl's seen set at scale: insert rate, size on disk (or in memory) and the adding
process's memory, every million URLs.

    .venv/bin/python bench/bench_seen.py                          # SQLite, 10,000,000 URLs
    .venv/bin/python bench/bench_seen.py --urls 1000000 --stores sqlite,postgres,redis

URLs are generated (``https://host{n % 5000}.test/path/{n}?q={n % 7}``), added with
``app.seen_add`` in batches of ``--batch`` (canonicalised and fingerprinted in the
process, as the crawler does), all new. Then one batch of URLs already seen is timed, to
show that lookups stay fast. Not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import crawlq  # noqa: E402
from crawlq.worker.memory import resident_bytes  # noqa: E402


def url(n: int) -> str:
    return f"https://host{n % 5000}.test/path/{n}?q={n % 7}"


def store_size(kind: str, app: crawlq.App, path: Path) -> str:
    if kind == "sqlite":
        total = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
        return f"{total / 2**20:,.0f} MiB on disk"
    if kind == "postgres":
        store = app.store
        conn = store._pool.connection()  # type: ignore[attr-defined]
        with conn as c:
            row = c.execute(
                "SELECT pg_total_relation_size(format('%I.crawlq_seen', current_schema()))"
            ).fetchone()
        return f"{row[0] / 2**20:,.0f} MiB on disk"
    client = app.store._client  # type: ignore[attr-defined]
    used = client.info("memory")["used_memory"]
    return f"{used / 2**20:,.0f} MiB server memory"


def run(kind: str, tmp: Path, urls: int, batch: int) -> None:
    path = tmp / f"seen-{kind}.db"
    if kind == "sqlite":
        store_url = f"sqlite:///{path}"
    else:
        from tests import servers

        base = servers.postgres().url if kind == "postgres" else servers.redis().url
        store_url = f"{base}?{'schema' if kind == 'postgres' else 'prefix'}=seen{os.getpid()}"
    app = crawlq.App(store_url)
    task = app.task(name="page")(lambda ctx, u: None)
    crawl = app.crawl("seen-bench", [task.spec(url(-1))])
    print(f"{kind}: {urls:,} URLs in batches of {batch:,}", flush=True)
    print("| URLs | rate over the last million (URLs/s) | size | adder RSS (MiB) |")
    print("|---:|---:|---|---:|")
    started = mark = time.perf_counter()
    step = 1_000_000 if urls >= 1_000_000 else max(urls // 5, batch)
    for first in range(0, urls, batch):
        new = app.seen_add(crawl.id, [url(n) for n in range(first, min(first + batch, urls))])
        assert all(new)
        added = min(first + batch, urls)
        if added % step == 0 or added == urls:
            now = time.perf_counter()
            rate = step / (now - mark) if added % step == 0 else 0.0
            mark = now
            rss = (resident_bytes(os.getpid()) or 0) / 2**20
            size = store_size(kind, app, path)
            print(f"| {added:,} | {rate:,.0f} | {size} | {rss:,.0f} |", flush=True)
    total = time.perf_counter() - started
    t = time.perf_counter()
    again = app.seen_add(crawl.id, [url(n) for n in range(0, urls, max(1, urls // batch))])
    lookup = time.perf_counter() - t
    assert not any(again)
    info = app.get_crawl(crawl.id)
    print(
        f"\n{kind}: {urls:,} URLs in {total:,.0f} s ({urls / total:,.0f}/s overall); "
        f"seen counter {info.seen:,}; a batch of {len(again):,} known URLs answered in "
        f"{lookup * 1000:,.0f} ms\n",
        flush=True,
    )
    app.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--urls", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--stores", default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.stores.split(","):
            run(kind, Path(tmp), args.urls, args.batch)


if __name__ == "__main__":
    main()
