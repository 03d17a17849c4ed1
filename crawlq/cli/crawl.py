"""``crawlq crawl`` (the built-in crawler) and ``crawlq crawl-export``."""

from __future__ import annotations

import click

from crawlq.cli.common import app_reference, open_app, target_options
from crawlq.cli.params import duration, size
from crawlq.config import MAX_CONCURRENCY, store_command
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.fetch import DEFAULT_USER_AGENT
from crawlq.crawler.output import JsonLines, check_writable
from crawlq.crawler.render import render_problem
from crawlq.crawler.runner import CrawlRunner, iter_results
from crawlq.payload import MAX_COUNT, MAX_EXACT

_DEFAULTS = CrawlConfig(start_urls=("http://example.com/",))


@click.command()
@target_options
@click.argument("urls", nargs=-1, required=True, metavar="URL...")
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="JSON Lines file, one object per page ('-' for stdout). Default: crawl-ID.jsonl.",
)
@click.option("--warc", metavar="FILE", help="Also write the page bodies to this WARC file.")
@click.option(
    "--scope",
    type=click.Choice(["host", "domain", "prefix", "any"]),
    default="host",
    show_default=True,
    help="Which links to follow: same host and port, same domain and its subdomains, "
    "under the start URL's path, or any.",
)
@click.option("--allow", multiple=True, metavar="REGEX", help="Follow only URLs matching one.")
@click.option("--deny", multiple=True, metavar="REGEX", help="Never follow URLs matching one.")
@click.option(
    "--max-depth", type=click.IntRange(min=0, max=MAX_EXACT), help="Link hops from a start URL."
)
@click.option(
    "--max-pages",
    type=click.IntRange(min=1, max=MAX_EXACT),
    help="Record N pages, then finish.",
)
@click.option("--follow-nofollow", is_flag=True, help="Also follow rel=nofollow links.")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1, max=MAX_CONCURRENCY["asyncio"]),
    default=16,
    show_default=True,
    help="Fetches in flight in this process.",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1, max=MAX_CONCURRENCY["process"]),
    default=1,
    show_default=True,
    help="Processes working the crawl on this machine (each with --concurrency fetches): "
    "more use more cores.",
)
@click.option(
    "--host-concurrency",
    type=click.IntRange(min=1, max=MAX_COUNT),
    default=_DEFAULTS.host_concurrency,
    show_default=True,
    help="Fetches in flight per host, across every worker.",
)
@click.option(
    "--delay",
    callback=duration,
    default=str(_DEFAULTS.delay),
    show_default=True,
    help="Seconds between two fetches from one host (robots.txt Crawl-delay wins if longer).",
)
@click.option(
    "--user-agent", default=DEFAULT_USER_AGENT, show_default=True, help="The User-Agent sent."
)
@click.option(
    "--ignore-robots",
    is_flag=True,
    help="Do not fetch or obey robots.txt. Only for sites you own or may crawl regardless.",
)
@click.option(
    "--allow-private",
    is_flag=True,
    help="Allow private, loopback and link-local addresses (refused by default).",
)
@click.option(
    "--allow-host",
    multiple=True,
    metavar="HOST|NET",
    help="Allow one refused host name or network (e.g. 10.0.0.0/8); repeatable.",
)
@click.option(
    "--timeout",
    callback=duration,
    default=str(_DEFAULTS.timeout),
    show_default=True,
    help="Seconds one fetch may take, redirects included.",
)
@click.option(
    "--max-bytes",
    callback=size,
    default="10MiB",
    show_default=True,
    help="Largest body read, as received; a larger page is recorded as an error.",
)
@click.option(
    "--retries",
    type=click.IntRange(min=0, max=9),
    default=_DEFAULTS.retries,
    show_default=True,
    help="Retries of a page after a network error, 429 or 5xx (with backoff).",
)
@click.option("--http2", is_flag=True, help="Use HTTP/2 where servers offer it (needs h2).")
@click.option(
    "--render",
    is_flag=True,
    help="Load each HTML page into headless Chromium and take the DOM after JavaScript "
    "(needs crawlq[render] and apt-get install chromium). Pages then run in --processes "
    "child processes, one page at a time each (not --concurrency), each with its own "
    "browser; every request "
    "a page makes obeys the scope's hosts, robots.txt and the address guard.",
)
@click.option(
    "--render-pages-per-child",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    metavar="N",
    help="With --render: replace a child process and its browser after N pages.",
)
@click.option(
    "--render-memory-per-child",
    callback=size,
    default="1GiB",
    show_default=True,
    metavar="SIZE",
    help="With --render: replace a child process once it and its browser use more than "
    "SIZE of resident memory (checked between two pages).",
)
@click.option("--name", help="The crawl's name. Default: 'crawl' and the first URL.")
@click.option("--new", is_flag=True, help="Start a new crawl even if this one can be resumed.")
@click.option(
    "--detach",
    is_flag=True,
    help="Create the crawl, print its id and exit; `crawlq worker` processes do the work.",
)
@click.option("--no-progress", is_flag=True, help="No live progress display.")
def crawl(
    urls: tuple[str, ...],
    output: str | None,
    warc: str | None,
    scope: str,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    max_depth: int | None,
    max_pages: int | None,
    follow_nofollow: bool,
    concurrency: int,
    processes: int,
    host_concurrency: int,
    delay: float,
    user_agent: str,
    ignore_robots: bool,
    allow_private: bool,
    allow_host: tuple[str, ...],
    timeout: float,
    max_bytes: int,
    retries: int,
    http2: bool,
    render: bool,
    render_pages_per_child: int,
    render_memory_per_child: int,
    name: str | None,
    new: bool,
    detach: bool,
    no_progress: bool,
) -> None:
    """Crawl sites from URL..., following links within the scope, politely.

    Runs on the store (default: the SQLite file crawlq.db here, nothing to set up) with
    the queue underneath: each page is a job, each URL is fetched once per crawl, robots.txt
    is obeyed, and each host gets --host-concurrency fetches at a time, --delay apart, on
    every worker together. One JSON object per page goes to --output (url, final_url,
    status, content_type, title, depth, referrer, fetched_at, elapsed_ms, bytes, sha256,
    links_found, error) and stays in the store for `crawlq crawl-export ID`.

    Private, loopback and link-local addresses are refused (also after DNS and on every
    redirect) unless --allow-private or --allow-host.

    Ctrl-C (or SIGTERM, or a closed stdout with -o -) stops; the same command again
    resumes the crawl (also after kill -9). Exit codes: 0 finished, 1 cancelled, 3
    finished but no page could be fetched, 130 interrupted.

    With --detach the crawl is created and its id printed; `crawlq worker --store ...`
    on any number of machines does the work and `crawlq crawl-status ID` follows it.

    With --render each HTML page is loaded into headless Chromium and its links, title
    and body are taken from the DOM after JavaScript ran; for a detached crawl run
    `crawlq worker --store ... --runtime process --max-jobs-per-child N
    --max-memory-per-child SIZE` where the browsers should run.

    \b
    Example:
      crawlq crawl https://example.com/ --max-pages 500 -o pages.jsonl
      crawlq crawl https://example.com/docs/ --scope prefix --delay 1
      crawlq crawl https://example.com/ --store postgresql://db/crawl --detach
      crawlq crawl https://app.example.com/ --render --processes 2 --max-pages 100
    """
    config = CrawlConfig(
        start_urls=tuple(_with_scheme(url) for url in urls),
        scope=scope,  # type: ignore[arg-type]
        allow=allow,
        deny=deny,
        max_depth=max_depth,
        max_pages=max_pages,
        follow_nofollow=follow_nofollow,
        host_concurrency=host_concurrency,
        delay=delay,
        obey_robots=not ignore_robots,
        user_agent=user_agent,
        timeout=timeout,
        max_bytes=max_bytes,
        retries=retries,
        http2=http2,
        allow_private=allow_private,
        allow_hosts=allow_host,
        warc=warc,
        render=render,
    )
    if ignore_robots:
        click.secho(
            "warning: --ignore-robots: robots.txt is neither fetched nor obeyed; crawl only "
            "sites you own or have permission to crawl this way",
            fg="yellow",
            err=True,
        )
    if not detach:  # before the store is opened: a refused path creates nothing
        check_writable(output or "crawl-ID.jsonl", "the output file")
        problem = render_problem() if render else None
        if problem is not None:  # the workers of a detached crawl need it, not this machine
            raise click.UsageError(problem)
    if warc is not None:
        check_writable(warc, "the WARC file")
    with open_app(create=True) as app:
        runner = CrawlRunner(
            app,
            config,
            name=name,
            concurrency=concurrency,
            processes=processes,
            progress=not no_progress,
            new=new,
            render_recycle=(render_pages_per_child, render_memory_per_child),
            app_ref=app_reference(),
        )
        info = runner.start()
        verb = "resuming" if runner.resumed else "started"
        if detach:
            click.echo(info.id)
            worker = store_command("worker", app.store_url, note=False)
            status = store_command(f"crawl-status {info.id}", app.store_url)
            click.echo(
                f"{verb} crawl {info.id}; run {worker} on each machine and follow it with {status}",
                err=True,
            )
            return
        runner.output = output if output is not None else f"crawl-{info.id}.jsonl"
        click.echo(f"{verb} crawl {info.id} ({runner.name})", err=True)
        code = runner.run()
    if code:
        raise SystemExit(code)


def _with_scheme(url: str) -> str:
    """``example.com/docs`` means ``https://example.com/docs``, as in a browser."""
    url = url.strip()
    if "://" not in url and url and not url.startswith(("/", ".")) and ":" not in url:
        click.echo(f"{url}: no scheme given, crawling https://{url}", err=True)
        return f"https://{url}"
    return url


@click.command("crawl-export")
@target_options
@click.argument("crawl_id", type=int, metavar="ID")
@click.option(
    "-o",
    "--output",
    default="-",
    show_default=True,
    metavar="FILE",
    help="JSON Lines file ('-' for stdout).",
)
def crawl_export(crawl_id: int, output: str) -> None:
    """Write the page records of crawl ID as JSON Lines, in the order they were kept.

    Works from any machine that reaches the store, while the crawl runs or after.

    \b
    Example:
      crawlq crawl-export 3 -o pages.jsonl
      crawlq crawl-export 3 --store postgresql://db/crawl | jq .url
    """
    with open_app() as app:
        app.get_crawl(crawl_id)  # CrawlNotFound with a hint
        out = JsonLines(output)
        try:
            count = out.write(text for _, text in iter_results(app, crawl_id))
        except BrokenPipeError:
            return  # the reader has what it wanted (`crawlq crawl-export 3 | head`)
        finally:
            out.close()
    if output != "-":
        click.echo(f"{count} pages written to {output}", err=True)
