"""Load named SQL blocks (``-- name: x``) from a file shipped next to a store."""

from __future__ import annotations

import re
import sqlite3
from importlib import resources
from typing import LiteralString, cast

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, LiteralString]:
    """Map each ``-- name: x`` header to the SQL text below it, up to the next header."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    parts = _NAME.split(text)
    queries: dict[str, LiteralString] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        queries[name] = cast(LiteralString, body.strip())
    return queries


def split_statements(script: str) -> list[str]:
    """Split an SQL script into complete statements (trigger bodies stay whole)."""
    statements: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                statements.append(current.strip())
            current = ""
    if current.strip() and not current.strip().startswith("--"):
        raise ValueError(f"incomplete SQL statement at the end of the script: {current!r}")
    return statements
