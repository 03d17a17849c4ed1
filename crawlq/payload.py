"""Task arguments (JSON values only, checked and sized at schedule time) and the text
every store can keep."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from crawlq.exceptions import ConfigurationError, PayloadError
from crawlq.types import JSONValue


def _check(value: Any, where: str) -> None:
    if value is None or isinstance(value, bool | int | str):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PayloadError(f"{where} is {value!r}; JSON has no NaN or infinity")
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise PayloadError(
                    f"{where} has the key {k!r} of type {type(k).__name__}; JSON object keys "
                    "must be strings: convert it with str()"
                )
            _check(item, f"{where}[{k!r}]")
        return
    raise PayloadError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which is not "
        "JSON: pass None, bool, int, float, str, list or dict (e.g. a URL as str, a date "
        "as an ISO string); crawlq never pickles"
    )


def check_text(value: object, what: str) -> str:
    """``value`` if it is a str every store can keep (any Unicode text, NUL included),
    else a ConfigurationError: not a str, or holding a lone surrogate (not UTF-8)."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{what} must be a str, not a {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{what} is not valid Unicode text: {exc.reason} at index {exc.start} "
            f"({value[exc.start : exc.end]!r}); decode bytes with errors='replace' first"
        ) from None
    return value


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
    for i, value in enumerate(args):
        label = names[i] if i < len(names) else f"#{i}"
        _check(value, f"argument {label!r} of task {task!r}")
    for name, value in kwargs.items():
        _check(value, f"argument {name!r} of task {task!r}")
    text = json.dumps([args, kwargs], separators=(",", ":"))  # one pass: size and copy
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
    plain_args, plain_kwargs = json.loads(text)  # tuples become lists, nothing is shared
    return plain_args, plain_kwargs


def encode_result(task: str, value: Any, *, max_bytes: int) -> JSONValue:
    """Check a task's return value like an argument; None, the common case, is free."""
    if value is None:
        return None
    [plain], _ = encode_arguments(task, [value], {}, names=("result",), max_bytes=max_bytes)
    return plain
