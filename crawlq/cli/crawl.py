"""``crawlq crawl`` (the built-in crawler) and ``crawlq crawl-export``."""

from __future__ import annotations

from typing import Any

import click

from crawlq.cli.common import app_reference, open_app, target_options
from crawlq.cli.fetch_options import check_request_options, fetch_options
from crawlq.cli.output import iso_utc
from crawlq.cli.params import duration_option, size
from crawlq.config import MAX_CONCURRENCY, store_command
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.exports import write_all
from crawlq.crawler.fetch import DEFAULT_USER_AGENT
from crawlq.crawler.items import load_hook
from crawlq.crawler.output import check_writable
from crawlq.crawler.recurring import recrawl_every
from crawlq.crawler.render import render_problem
from crawlq.crawler.robots import robots_url
from crawlq.crawler.runner import CrawlRunner, iter_results
from crawlq.exceptions import ConfigurationError
from crawlq.payload import MAX_COUNT, MAX_EXACT

_DEFAULTS = CrawlConfig(start_urls=("http://example.com/",))


@click.command()
@target_options
@click.argument("urls", nargs=-1, metavar="[URL]...")
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    help="JSON Lines file, one object per page ('-' for stdout), or CSV if FILE ends in .csv; "
    "with --parse, one per item. Default: crawl-ID.jsonl.",
)
@click.option("--warc", metavar="FILE", help="Also write the page bodies to this WARC file.")
@click.option(
    "--extract",
    multiple=True,
    metavar="NAME=QUERY",
    help="Add a field to each page's record: the first match of a CSS query (::text and "
    "::attr(NAME) as in Scrapy) or of xpath:EXPR (needs crawlq[extract]); NAME[]=QUERY "
    "keeps every match. Repeatable.",
)
@click.option(
    "--parse",
    "parse_hook",
    metavar="MODULE:FUNCTION",
    help="Run this function on each 2xx page (a crawlq.crawler.items.Page): the items "
    "(dicts) it returns go to --output and the store, and it may choose the links to "
    "follow. Every worker imports MODULE from its current directory.",
)
@click.option(
    "--sitemap",
    multiple=True,
    metavar="URL",
    help="Crawl the pages this sitemap lists (an index, gzipped, or a robots.txt whose "
    "Sitemap: lines to read), at depth 0 with their <lastmod>. Repeatable; with it the "
    "start URLs may be left out.",
)
@click.option(
    "--robots-sitemaps",
    is_flag=True,
    help="Also crawl the sitemaps named by the robots.txt of each start URL's host.",
)
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
@duration_option(
    "--delay",
    default=str(_DEFAULTS.delay),
    help="Seconds between two fetches from one host (robots.txt Crawl-delay wins if longer).",
)
@click.option(
    "--autothrottle",
    is_flag=True,
    help="Adapt each host's interval to its response times and errors, on every worker "
    "(--delay and Crawl-delay stay the minimum).",
)
@click.option(
    "--autothrottle-target",
    type=click.FloatRange(min=0, min_open=True, max=10_000),
    default=_DEFAULTS.autothrottle_target,
    show_default=True,
    help="With --autothrottle: fetches in flight per host to aim at, on average.",
)
@duration_option(
    "--autothrottle-start",
    default=f"{_DEFAULTS.autothrottle_start:g}",
    help="With --autothrottle: the interval a new host starts with.",
)
@duration_option(
    "--autothrottle-max",
    default=f"{_DEFAULTS.autothrottle_max:g}",
    help="With --autothrottle: the longest interval it sets.",
)
@click.option(
    "--user-agent", default=DEFAULT_USER_AGENT, show_default=True, help="The User-Agent sent."
)
@fetch_options
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
@duration_option(
    "--timeout",
    default=str(_DEFAULTS.timeout),
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
@click.option(
    "--every",
    metavar="DURATION",
    help="Recurring: start a new crawl of these settings every DURATION (6h, 1d, 1h30m), "
    "on the workers; implies --detach.",
)
@click.option(
    "--cron", metavar="EXPR", help="Recurring, on a cron expression (see `crawlq periodic`)."
)
@click.option("--tz", default="UTC", show_default=True, help="The time zone of --cron.")
@click.option(
    "--revisit-changed",
    is_flag=True,
    help="Send each page's If-None-Match / If-Modified-Since from the previous crawl of "
    "the same name and settings; a 304 is recorded as unchanged (status 304, "
    "unchanged: true), not parsed or written to the WARC again, its links followed from "
    "the previous record. Opt-in, also with --every.",
)
@click.option(
    "--rewrite-unchanged",
    is_flag=True,
    help="With --revisit-changed and --warc: write a WARC revisit record "
    "(server-not-modified) for each unchanged page.",
)
def crawl(
    urls: tuple[str, ...],
    output: str | None,
    warc: str | None,
    extract: tuple[str, ...],
    parse_hook: str | None,
    sitemap: tuple[str, ...],
    robots_sitemaps: bool,
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
    autothrottle: bool,
    autothrottle_target: float,
    autothrottle_start: float,
    autothrottle_max: float,
    user_agent: str,
    request: dict[str, Any],
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
    every: str | None,
    cron: str | None,
    tz: str,
    revisit_changed: bool,
    rewrite_unchanged: bool,
) -> None:
    """Crawl sites from URL... (and --sitemap), following links within the scope, politely.

    Runs on the store (default: the SQLite file crawlq.db here, nothing to set up) with
    the queue underneath: each page is a job, each URL is fetched once per crawl, robots.txt
    is obeyed, and each host gets --host-concurrency fetches at a time, --delay apart (with
    --autothrottle, as far apart as its response times and errors ask), on every worker
    together. One JSON object per page goes to --output (url, final_url,
    status, content_type, title, depth, referrer, fetched_at, elapsed_ms, bytes, sha256,
    links_found, error, then the --extract fields) and stays in the store for
    `crawlq crawl-export ID`. With --parse, --output gets the items the function returns.

    Private, loopback and link-local addresses are refused (also after DNS and on every
    redirect, and before a --proxy sees them) unless --allow-private or --allow-host.

    --header goes to every host; --cookie and the --auth credential only to the hosts of
    the start URLs. The store keeps only where the secret is (--auth-env NAME or
    --auth-file PATH): each worker reads it there, so it must be set on every machine;
    it never reaches the records, the output or the logs. The same holds for a proxy URL
    with credentials in --proxy-env NAME.

    Ctrl-C (or SIGTERM, or a closed stdout with -o -) stops; the same command again
    resumes the crawl (also after kill -9). Exit codes: 0 finished, 1 cancelled, 3
    finished but no page could be fetched, 130 interrupted.

    With --detach the crawl is created and its id printed; `crawlq worker --store ...`
    on any number of machines does the work and `crawlq crawl-status ID` follows it.

    With --every (or --cron) the crawl recurs: a periodic schedule named crawl:NAME
    starts a new crawl of the same settings at each fire time (none while the previous
    one is still open), and the first one starts now; the workers do the work, and
    `crawlq crawl-export ID` writes each one's pages. `crawlq periodic` shows, pauses
    or removes the schedule. Add --revisit-changed to fetch only what changed since the
    previous crawl (conditional requests; a 304 keeps the previous record's content and
    links, with unchanged: true); each record then also has etag, last_modified, links
    and unchanged.

    With --render each HTML page is loaded into headless Chromium and its links, title
    and body are taken from the DOM after JavaScript ran; for a detached crawl run
    `crawlq worker --store ... --runtime process --max-jobs-per-child N
    --max-memory-per-child SIZE` where the browsers should run.

    \b
    Example:
      crawlq crawl https://example.com/ --max-pages 500 -o pages.jsonl
      crawlq crawl https://example.com/docs/ --scope prefix --delay 1
      crawlq crawl https://shop.example/ --extract 'price=.price::text'
      crawlq crawl https://shop.example/ --parse myshop:parse -o items.csv
      crawlq crawl https://example.com/ --auth bearer --auth-env SITE_TOKEN
      crawlq crawl https://example.com/ --autothrottle --autothrottle-max 30
      crawlq crawl https://example.com/ --store postgresql://db/crawl --detach
      crawlq crawl https://example.com/ --store postgresql://db/crawl --every 6h
      crawlq crawl https://example.com/ --every 6h --revisit-changed
      crawlq crawl https://app.example.com/ --render --processes 2 --max-pages 100
    """
    if not urls and not sitemap:
        raise click.UsageError("give at least one start URL, or --sitemap URL")
    start_urls = tuple(_with_scheme(url) for url in urls)
    sitemaps = tuple(_with_scheme(url) for url in sitemap)
    if robots_sitemaps:
        sitemaps += tuple(dict.fromkeys(_robots_url(url) for url in start_urls))
    config = CrawlConfig(
        start_urls=start_urls,
        scope=scope,  # type: ignore[arg-type]
        allow=allow,
        deny=deny,
        max_depth=max_depth,
        max_pages=max_pages,
        follow_nofollow=follow_nofollow,
        host_concurrency=host_concurrency,
        delay=delay,
        autothrottle=autothrottle,
        autothrottle_target=autothrottle_target,
        autothrottle_start=autothrottle_start,
        autothrottle_max=autothrottle_max,
        obey_robots=not ignore_robots,
        user_agent=user_agent,
        timeout=timeout,
        max_bytes=max_bytes,
        retries=retries,
        http2=http2,
        allow_private=allow_private,
        allow_hosts=allow_host,
        warc=warc,
        extract=extract,
        parse=parse_hook,
        sitemaps=sitemaps,
        **request,
        render=render,
        revisit_changed=revisit_changed,
        rewrite_unchanged=rewrite_unchanged,
    )
    if parse_hook is not None:
        load_hook(parse_hook)  # here, before the crawl is created: one line if it fails
    if ignore_robots:
        click.secho(
            "warning: --ignore-robots: robots.txt is neither fetched nor obeyed; crawl only "
            "sites you own or have permission to crawl this way",
            fg="yellow",
            err=True,
        )
    recurring = every is not None or cron is not None
    if recurring and output is not None:
        raise click.UsageError(
            "--output goes with a crawl run here, not with --every or --cron: recurring "
            "crawls run on the workers; write each one's pages with `crawlq crawl-export ID`"
        )
    detach = detach or recurring
    check_request_options(config, detach)
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
        if recurring:
            periodic, outcome = recrawl_every(
                app, config, name=runner.name, every=every, cron=cron, tz=tz
            )
            when = app.schedules.get(periodic.name).next_fire
            click.echo(
                f"schedule {periodic.name} {outcome.value}: a new crawl {periodic.describe()}, "
                f"next at {iso_utc(when)}",
                err=True,
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


def _robots_url(url: str) -> str:
    try:
        return robots_url(url)
    except ValueError:
        raise click.UsageError(f"--robots-sitemaps: {url!r} is not an http(s) URL") from None


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
    help="JSON Lines file ('-' for stdout), or CSV if FILE ends in .csv.",
)
@click.option(
    "--pages",
    is_flag=True,
    help="Write the page records of a crawl made with --parse (by default: its items).",
)
def crawl_export(crawl_id: int, output: str, pages: bool) -> None:
    """Write the page records of crawl ID (the items of a crawl made with --parse), in
    the order they were kept, as JSON Lines, or CSV if FILE ends in .csv.

    Works from any machine that reaches the store, while the crawl runs or after.

    \b
    Example:
      crawlq crawl-export 3 -o pages.jsonl
      crawlq crawl-export 3 -o items.csv
      crawlq crawl-export 3 --store postgresql://db/crawl | jq .url
    """
    check_writable(output, "the output file")
    with open_app() as app:
        info = app.get_crawl(crawl_id)  # CrawlNotFound with a hint
        try:
            config: CrawlConfig | None = CrawlConfig.from_meta(info.meta)
        except ConfigurationError:
            config = None  # not made by crawlq crawl: its records as they are
        items = not pages and config is not None and config.parse is not None
        try:
            count = write_all(
                output,
                config,
                lambda: (text for _, text in iter_results(app, crawl_id)),
                items=items,
            )
        except BrokenPipeError:
            return  # the reader has what it wanted (`crawlq crawl-export 3 | head`)
    if output != "-":
        click.echo(f"{count} {'items' if items else 'pages'} written to {output}", err=True)
