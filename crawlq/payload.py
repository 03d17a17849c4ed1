"""The values every store can keep, checked in Python before any I/O with one rule and
one message whatever the store: task arguments (JSON values only, checked and sized at
schedule time), text, priorities, counts and seconds.

The ranges are those of the narrowest store: a priority is an integer a Redis sorted-set
score (a double) holds exactly, ``max_attempts`` and ``max_running`` fit a PostgreSQL
``integer``, and every duration is at most 100 years."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from crawlq.exceptions import ConfigurationError, PayloadError
from crawlq.types import JSONValue

MAX_PRIORITY = 2**53 - 1
"""Priorities are whole numbers from ``-MAX_PRIORITY`` to ``MAX_PRIORITY`` (±(2**53-1),
the integers a double holds exactly), on every store."""
MAX_COUNT = 2**31 - 1
"""The largest ``max_attempts`` and ``max_running`` (a PostgreSQL ``integer``)."""
MAX_EXACT = 2**53 - 1
"""The largest whole number a setting kept as JSON may take (a double holds it exactly)."""
MAX_SECONDS = 3_155_760_000.0
"""100 years: the longest delay, lease, timeout, interval or block, in seconds."""
MAX_TIMESTAMP = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the latest ``at`` (the earliest is 1970-01-01T00:00:00Z, 0)."""
MAX_DEPTH = 100
"""How deep task arguments may nest: lists and dicts inside lists and dicts."""

_COMPACT = json.JSONEncoder(separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON, as arguments are sized and every store writes them (one encoder made
    once: ``json.dumps`` with ``separators=`` makes a new one per call, which is as slow as
    the encoding of a small job's arguments)."""
    return _COMPACT.encode(value)


def _check(value: Any, where: str, depth: int = 0, root: str = "") -> None:
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PayloadError(f"{where} is {value!r}; JSON has no NaN or infinity")
        return
    if depth >= MAX_DEPTH and isinstance(value, list | tuple | dict):
        raise PayloadError(
            f"{root} nests lists or dicts more than {MAX_DEPTH} deep; "
            "flatten it (e.g. a list of rows) or store it elsewhere and pass its location"
        )
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]", depth + 1, root or where)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise PayloadError(
                    f"{where} has the key {k!r} of type {type(k).__name__}; JSON object keys "
                    "must be strings: convert it with str()"
                )
            _check(item, f"{where}[{k!r}]", depth + 1, root or where)
        return
    raise PayloadError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which is not "
        "JSON: pass None, bool, int, float, str, list or dict (e.g. a URL as str, a date "
        "as an ISO string); crawlq never pickles"
    )


def check_text(value: object, what: str, *, nul: bool = True) -> str:
    """``value`` if it is a str every store can keep (any Unicode text, NUL included
    unless ``nul`` is False), else a ConfigurationError: not a str, holding a lone
    surrogate (not UTF-8), or holding NUL, which PostgreSQL text cannot."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a str, not a {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{what} is not valid Unicode text: {exc.reason} at index {exc.start} "
            f"({value[exc.start : exc.end]!r}); decode bytes with errors='replace' first"
        ) from None
    if not nul and "\x00" in value:
        raise ConfigurationError(
            f"{what} {value!r:.80} holds a NUL character (\\x00), which PostgreSQL cannot "
            "store: remove or replace it"
        )
    return value


def check_count(name: str, value: object, minimum: int, maximum: int = MAX_EXACT) -> int:
    """``value`` if it is a whole number (not a bool) from ``minimum`` to ``maximum``,
    else a ConfigurationError naming the setting ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ConfigurationError(
            f"{name} must be a whole number from {minimum} to {maximum}, not {_shown(value)}"
        )
    return value


def _shown(value: object) -> str:
    """``value`` for an error message: its repr, cut at 40 characters (an int too long to
    print is shown by its size)."""
    if isinstance(value, int) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    return f"{value!r:.40}"


def check_priority(value: object, name: str = "priority") -> int:
    """A job's priority: a whole number from -MAX_PRIORITY to MAX_PRIORITY."""
    return check_count(name, value, -MAX_PRIORITY, MAX_PRIORITY)


def check_seconds(
    name: str, value: object, *, zero: bool = False, maximum: float = MAX_SECONDS
) -> float:
    """``value`` as float seconds: positive (or 0 too with ``zero``) and at most
    ``maximum`` (100 years), else a ConfigurationError naming the setting ``name``."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not 0 <= value <= maximum  # False for NaN
        or (value == 0 and not zero)
    ):
        kind = "a number of seconds >= 0" if zero else "a positive number of seconds"
        limit = f"{maximum:.0f}" + (" (100 years)" if maximum == MAX_SECONDS else "")
        raise ConfigurationError(f"{name} must be {kind}, at most {limit}, not {_shown(value)}")
    return float(value)


def check_moment(value: object, name: str = "at") -> float:
    """A time a job is due: a datetime, or seconds since the epoch, from 1970-01-01 to
    9999-12-31 UTC (a naive datetime is local time); returned as epoch seconds."""
    moment: object = value
    if isinstance(value, datetime):
        try:
            moment = value.timestamp()
        except (ValueError, OverflowError):
            moment = None
    if (
        isinstance(moment, bool)
        or not isinstance(moment, int | float)
        or not 0 <= moment <= MAX_TIMESTAMP  # False for NaN
    ):
        shown = value.isoformat() if isinstance(value, datetime) else _shown(value)
        raise ConfigurationError(
            f"{name} must be a datetime (or seconds since the epoch) from 1970-01-01 to "
            f"9999-12-31 UTC, not {shown}"
        )
    return float(moment)


def check_name(value: object, what: str) -> str:
    """A task or queue name: non-empty text every store can keep."""
    if check_text(value, what, nul=False) == "":
        raise ConfigurationError(f"{what} must not be empty")
    return value  # type: ignore[return-value]


def encode_arguments(
    task: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    names: Sequence[str] = (),
    max_bytes: int,
) -> tuple[list[JSONValue], dict[str, JSONValue]]:
    """Check that arguments are JSON and fit ``max_bytes`` once encoded; return them as
    lists and dicts. Errors name the task and the argument."""
    flat = all(map(_flat, args)) and all(map(_flat, kwargs.values()))
    if not flat:
        for i, value in enumerate(args):
            label = names[i] if i < len(names) else f"#{i}"
            _check(value, f"argument {label!r} of task {task!r}")
        for name, value in kwargs.items():
            _check(value, f"argument {name!r} of task {task!r}")
    text = dumps([args, kwargs])  # one pass: size and copy
    size = len(text) if text.isascii() else len(text.encode())
    if size > max_bytes:
        labels = [names[i] if i < len(names) else f"#{i}" for i in range(len(args))]
        sizes = {label: len(json.dumps(v)) for label, v in zip(labels, args, strict=True)}
        sizes.update({k: len(json.dumps(v)) for k, v in kwargs.items()})
        biggest = max(sizes, key=lambda k: sizes[k])
        raise PayloadError(
            f"the arguments of task {task!r} take {size} bytes as JSON, over the limit of "
            f"{max_bytes}; the largest is {biggest!r} ({sizes[biggest]} bytes). Store large "
            "data elsewhere (a file, object storage) and pass its location, or raise "
            "App(max_payload_bytes=...)"
        )
    if flat:  # None, bool, int, str and finite floats: a copy is what JSON gives back
        return list(args), dict(kwargs)
    plain_args, plain_kwargs = json.loads(text)  # tuples become lists, nothing is shared
    return plain_args, plain_kwargs


def _flat(value: object) -> bool:
    """``value`` is None, a bool, int or str, or a finite float, of that very type (a
    subclass, such as an IntEnum, may encode otherwise: it takes the general path)."""
    kind = type(value)
    if kind is str or kind is int or value is None or kind is bool:
        return True
    return kind is float and math.isfinite(value)  # type: ignore[arg-type]


def encode_result(task: str, value: Any, *, max_bytes: int) -> JSONValue:
    """A task's return value as the store keeps it: JSON values only (checked as an
    argument is), at most ``max_bytes`` once encoded (the app's ``max_payload_bytes``,
    512 KiB by default); else a PayloadError saying so. None, the common case, is free."""
    if value is None:
        return None
    _check(value, f"the result of task {task!r}")
    text = dumps(value)
    size = len(text) if text.isascii() else len(text.encode())
    if size > max_bytes:
        raise PayloadError(
            f"the result of task {task!r} takes {size} bytes as JSON, over the limit of "
            f"{max_bytes}: return something small (a count, an id, a location) and store "
            "large data elsewhere (crawl results, a file, object storage), or raise "
            "App(max_payload_bytes=...)"
        )
    plain: JSONValue = json.loads(text)  # tuples become lists, nothing is shared
    return plain
