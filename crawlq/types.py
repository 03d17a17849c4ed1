"""Type aliases shared across modules."""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = (
    "bool | int | float | str | list[JSONValue] | tuple[JSONValue, ...] "
    "| dict[str, JSONValue] | None"
)
"""A value that crawlq can store as a task argument or result."""

JobId: TypeAlias = int
"""Jobs are numbered by the store, in scheduling order."""

Timestamp: TypeAlias = float
"""Seconds since the Unix epoch, on the store's clock."""
