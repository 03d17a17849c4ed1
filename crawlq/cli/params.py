"""Option parsers: durations, ISO date-times, JSON arguments. They are callbacks on str
options, so their errors name the option and exit with a usage error (code 2)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, Literal, TypeVar

import click

from crawlq.config import check_prefetch
from crawlq.exceptions import ConfigurationError
from crawlq.payload import MAX_DEPTH, MAX_EXACT, check_moment, check_seconds

T = TypeVar("T")

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|m|min|h|d)?\s*$", re.IGNORECASE)


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> float | None:
    """Option callback: seconds, as a number (``90``, ``0.5``) or with a unit (``90s``,
    ``15m``, ``2h``, ``7d``)."""
    if value is None:
        return None
    match = _DURATION.match(value)
    if match is None:
        raise click.BadParameter(
            f"{value!r} is not a duration: give seconds (30, 0.5) or a number with a unit "
            "s, m, h or d (90s, 15m, 2h, 7d)",
            ctx,
            param,
        )
    number, unit = match.groups()
    seconds = float(number) * _UNITS[(unit or "").lower()]
    name = next((o for o in param.opts if o.startswith("--")), f"--{param.name}")
    return _checked(lambda: check_seconds(name, seconds, zero=True), ctx, param)


def _checked(check: Callable[[], T], ctx: click.Context, param: click.Parameter) -> T:
    """The value ``check`` returns, its ConfigurationError (the rule the Python API
    states) as this option's usage error."""
    try:
        return check()
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


def prefetch_count(ctx: click.Context, param: click.Parameter, value: str) -> int | Literal["auto"]:
    """Option callback: ``auto`` or a whole number of jobs (``--prefetch``)."""
    text = value.strip().lower()
    count: object = int(text) if text.isdigit() else text
    return _checked(lambda: check_prefetch(count), ctx, param)


_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "kib": 2**10,
    "m": 1000**2, "mb": 1000**2, "mib": 2**20,
    "g": 1000**3, "gb": 1000**3, "gib": 2**30,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$", re.IGNORECASE)


def size(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """Option callback: bytes, as a number or with a unit (``500MB``, ``1.5GiB``, ``800M``;
    K, M, G are powers of 1000, KiB, MiB, GiB powers of 1024)."""
    if value is None:
        return None
    match = _SIZE.match(value)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _SIZE_UNITS:
        raise click.BadParameter(
            f"{value!r} is not a size: give bytes or a number with a unit "
            "(500MB, 800MiB, 2GB, 1.5GiB)",
            ctx,
            param,
        )
    number = float(match.group(1)) * _SIZE_UNITS[unit]
    if number < 1:
        raise click.BadParameter(f"{value!r} is less than one byte", ctx, param)
    if number > MAX_EXACT:
        raise click.BadParameter(f"{value!r} is more than {MAX_EXACT} bytes", ctx, param)
    return int(number)


def duration_option(
    *decls: str,
    help: str,
    default: str | None = None,
    required: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A str option parsed by :func:`duration` (``90``, ``15m``, ``2h``); its default, when
    given, is shown in ``--help``."""
    shown: dict[str, Any] = {} if default is None else {"default": default, "show_default": True}
    return click.option(
        *decls,
        type=str,
        callback=duration,
        metavar="SECONDS",
        required=required,
        help=help,
        **shown,  # an explicit default=None would satisfy required=True
    )


def iso_datetime(ctx: click.Context, param: click.Parameter, value: str | None) -> datetime | None:
    """Option callback: an ISO 8601 date and time; without an offset it is local time."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an ISO 8601 date and time, e.g. 2030-01-31T09:30:00+00:00 "
            "(without an offset it is local time)",
            ctx,
            param,
        ) from None
    name = next((o for o in param.opts if o.startswith("--")), f"--{param.name}")
    _checked(lambda: check_moment(moment, name), ctx, param)
    return moment if moment.tzinfo is not None else moment.astimezone()


def when_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--delay`` and ``--at``, the two ways to say when a job is due (``schedule``,
    ``reschedule``)."""
    at = click.option(
        "--at",
        type=str,
        callback=iso_datetime,
        metavar="ISO_DATETIME",
        help="Due at this time, e.g. 2030-01-31T09:30:00+00:00 (no offset: local time).",
    )
    delay = duration_option(
        "--delay",
        help="Due this long from now (seconds, or 90s, 15m, 2h, 7d).  [default: due now]",
    )
    return delay(at(command))


_EXAMPLES = {
    "array": "'[\"https://example.com\", 2]'",
    "object": '\'{"depth": 2, "follow": true}\'',
}


def parse_json_option(
    option: str, raw: str | None, kind: type[list[Any]] | type[dict[str, Any]]
) -> Any:
    """Parse ``raw`` as a JSON array or object; a UsageError says what is wrong."""
    if raw is None:
        return kind()
    name = "array" if kind is list else "object"
    wanted = f"{option} must be a JSON {name}, e.g. {_EXAMPLES[name]}"
    if _nesting(raw) > MAX_DEPTH + 1:  # the array or object itself is one level
        raise click.UsageError(f"{wanted}; it nests arrays or objects more than {MAX_DEPTH} deep")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise click.UsageError(
            f"{wanted}; {raw!r} is not valid JSON ({exc.msg} at column {exc.colno}). "
            "Quote it for the shell and use double quotes inside"
        ) from None
    if not isinstance(value, kind):
        got = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
            type(value), "a number" if isinstance(value, int | float) else "null"
        )
        raise click.UsageError(f"{wanted}; {raw!r} is {got}")
    return value


def _nesting(raw: str) -> int:
    """How deep arrays and objects nest in the JSON text ``raw`` (brackets inside strings
    do not count), read before parsing: the parser's own limit is the interpreter's
    recursion limit, which other code may have raised."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
