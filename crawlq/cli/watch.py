"""``--watch``: redraw a command's table in place every few seconds (rich Live)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click
from rich.console import RenderableType
from rich.live import Live

from crawlq.cli.output import console

DEFAULT_INTERVAL = 2.0

watch_option = click.option(
    "--watch",
    "watch",
    type=click.FloatRange(min=0.1, max=3600),
    is_flag=False,
    flag_value=DEFAULT_INTERVAL,
    default=None,
    metavar="[SECONDS]",
    help=f"Redraw every SECONDS (default {DEFAULT_INTERVAL:g}) until Ctrl-C; not with --json.",
)


def check_watch(watch: float | None, as_json: bool) -> None:
    if watch is not None and as_json:
        raise click.UsageError("--watch redraws a table: give it without --json")


def run_watch(interval: float, render: Callable[[], RenderableType]) -> None:
    """Show ``render()`` and redraw it every ``interval`` s until Ctrl-C. On a terminal
    the view is replaced in place; into a pipe each redraw is printed after the last."""
    out = console()
    try:
        if out.is_terminal:
            with Live(render(), console=out, auto_refresh=False) as live:
                while True:
                    time.sleep(interval)
                    live.update(render(), refresh=True)
        else:
            while True:
                out.print(render())
                out.print()
                out.file.flush()
                time.sleep(interval)
    except KeyboardInterrupt:
        pass


def stamp(table: Any) -> RenderableType:
    """``table`` under a line saying when it was read."""
    from rich.console import Group
    from rich.text import Text

    return Group(Text(time.strftime("%H:%M:%S") + "  (Ctrl-C stops)", style="dim"), table)
