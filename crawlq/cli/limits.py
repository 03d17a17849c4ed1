"""``crawlq limit set|block|default|show``: per-key limits (politeness per site)."""

from __future__ import annotations

import click

from crawlq.cli.common import json_option, open_app, target_options
from crawlq.cli.output import cell, console, human_age, iso_utc, print_json, table
from crawlq.cli.params import duration_option
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import MAX_EXACT
from crawlq.types import Timestamp


def key_to_dict(k: KeyLimit) -> dict[str, object]:
    return {
        "key": k.key,
        "max_running": k.limits.max_running,
        "min_interval": k.limits.min_interval,
        "override": k.override,
        "blocked_until": iso_utc(k.blocked_until),
        "running": k.running,
        "pending": k.pending,
        "last_start": iso_utc(k.last_start),
        "next_start": iso_utc(k.next_start),
    }


def _in(ts: Timestamp | None, now: Timestamp) -> str:
    if ts is None:
        return "-"
    return "now" if ts <= now else "in " + human_age(ts - now)


@click.group()
def limit() -> None:
    """Per-key limits: how many jobs of one key (a site) run at once, how often they
    start, and blocks (after a 429). They hold across every worker on every machine.

    \b
    Example:
      crawlq limit set example.com --max-running 2 --min-interval 1
      crawlq limit block example.com --for 10m
      crawlq limit show example.com
    """


def _limits(max_running: int | None, min_interval: float | None) -> Limits:
    return Limits(max_running=max_running, min_interval=min_interval or 0.0)


_MAX_RUNNING = click.option(
    "--max-running",
    type=click.IntRange(min=1),
    metavar="N",
    help="Jobs of the key running at once, across every worker.  [default: no cap]",
)
_MIN_INTERVAL = duration_option(
    "--min-interval",
    help="Time between two starts (0.5, 2s, 1m).  [default: 0]",
)


@limit.command("set")
@target_options
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@_MAX_RUNNING
@_MIN_INTERVAL
def limit_set(keys: tuple[str, ...], max_running: int | None, min_interval: float | None) -> None:
    """Override the limits of KEY (replacing its defaults), effective at the next claim.

    Options not given are reset: `limit set KEY` alone removes every limit of KEY.

    \b
    Example:
      crawlq limit set example.com www.example.com --max-running 2 --min-interval 1
    """
    limits = _limits(max_running, min_interval)
    with open_app(create=True) as app:
        for key in keys:
            app.set_limit(key, max_running=limits.max_running, min_interval=limits.min_interval)
    click.echo(
        f"set {len(keys)} key(s): max_running={limits.max_running or 'no cap'}, "
        f"min_interval={limits.min_interval:g} s"
    )


@limit.command("default")
@target_options
@click.argument("queue", metavar="QUEUE")
@_MAX_RUNNING
@_MIN_INTERVAL
@click.option("--remove", is_flag=True, help="Remove the queue's default.")
def limit_default(
    queue: str, max_running: int | None, min_interval: float | None, remove: bool
) -> None:
    """The limits a key takes when a job of QUEUE is the first to use it (a crawl's own
    limits come first; `limit set` overrides both).

    \b
    Example:
      crawlq limit default pages --max-running 4 --min-interval 0.25
    """
    if remove and (max_running is not None or min_interval is not None):
        raise click.UsageError("give --remove alone, or limits without --remove")
    with open_app(create=True) as app:
        app.set_default_limit(queue, None if remove else _limits(max_running, min_interval))
    click.echo(f"default limits of queue {queue} " + ("removed" if remove else "set"))


@limit.command("block")
@target_options
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@duration_option(
    "--for",
    "seconds",
    required=True,
    help="How long no job of the key starts (90s, 10m, 1h).",
)
def limit_block(keys: tuple[str, ...], seconds: float) -> None:
    """Start no job of KEY for a while, on every worker; running jobs go on. A longer
    block already in place is kept.

    \b
    Example:
      crawlq limit block example.com --for 10m
    """
    with open_app(create=True) as app:
        for key in keys:
            app.block_key(key, seconds)
    click.echo(f"blocked {len(keys)} key(s) for {human_age(seconds)}")


@limit.command("show")
@target_options
@click.argument("keys", nargs=-1, metavar="[KEY...]")
@click.option("--after", default="", metavar="KEY", help="List keys after this one.")
@click.option(
    "--limit", "count", type=click.IntRange(min=1, max=MAX_EXACT), default=100, show_default=True
)
@json_option
def limit_show(keys: tuple[str, ...], after: str, count: int, as_json: bool) -> None:
    """Show limit keys: settings, running and pending jobs, next start. Without KEY, list
    the keys the store knows, in key order.

    \b
    MAX RUNNING, MIN INTERVAL  the key's settings (SOURCE: override or default)
    BLOCKED     the key starts nothing until then
    NEXT START  when its next job may be claimed (- when none is pending or it is at
                its cap)

    \b
    Example:
      crawlq limit show example.com --json
    """
    with open_app() as app:
        now = app.store.now()
        if keys:
            found = app.limits(*keys)
            missing = [k for k, v in zip(keys, found, strict=True) if v is None]
            rows = [v for v in found if v is not None]
        else:
            rows, missing = app.store.limit_list(limit=count, after=after), []
    if as_json:
        print_json([key_to_dict(k) for k in rows])
    else:
        out = table(
            "KEY", ">MAX RUNNING", ">MIN INTERVAL", "SOURCE", ">RUNNING", ">PENDING",
            ">BLOCKED", ">LAST START", ">NEXT START",
        )  # fmt: skip
        for k in rows:
            out.add_row(
                cell(k.key),
                cell(k.limits.max_running or "no cap"),
                cell(f"{k.limits.min_interval:g} s"),
                cell("override" if k.override else "default"),
                cell(k.running),
                cell(k.pending),
                cell(None if k.blocked_until is None or k.blocked_until <= now
                     else _in(k.blocked_until, now)),
                cell(None if k.last_start is None else human_age(now - k.last_start) + " ago"),
                cell(_in(k.next_start, now)),
            )  # fmt: skip
        if rows:
            console().print(out)
    for key in missing:
        click.echo(f"no record of key {key!r}: no job has used it and no limit was set", err=True)
    if missing:
        raise SystemExit(1)
