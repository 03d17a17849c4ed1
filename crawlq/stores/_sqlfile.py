"""Load named SQL blocks (``-- name: x``) from a file shipped next to a store.

A block headed ``-- fragment: x`` is a piece of SQL that several queries share (a rule
stated once, such as the claim order); a query uses it as ``{{x}}``. Fragments are
expanded when the file is loaded and are not queries themselves.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString

_HEADER = re.compile(r"^--\s*(name|fragment):\s*(\w+)\s*$", re.MULTILINE)
_USE = re.compile(r"\{\{(\w+)\}\}")


def load_queries(package: str, filename: str = "queries.sql") -> dict[str, LiteralString]:
    """Map each ``-- name: x`` header to the SQL text below it, up to the next header,
    with every ``{{fragment}}`` in it replaced by that fragment's SQL."""
    text = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
    return parse_queries(text, filename)


def parse_queries(text: str, filename: str = "queries.sql") -> dict[str, LiteralString]:
    """``load_queries`` of the text of a file (``filename`` names it in errors)."""
    parts = _HEADER.split(text)
    blocks = list(zip(parts[1::3], parts[2::3], parts[3::3], strict=True))
    fragments = {
        name: [line.rstrip() for line in body.strip().splitlines() if not line.startswith("--")]
        for kind, name, body in blocks
        if kind == "fragment"
    }

    def expand(match: re.Match[str]) -> str:
        """A fragment's lines, each after the first indented as far as its use."""
        name = match.group(1)
        if name not in fragments:
            raise ValueError(f"{filename} uses {{{{{name}}}}} but defines no fragment {name}")
        column = match.start() - (match.string.rfind("\n", 0, match.start()) + 1)
        text = _USE.sub(expand, "\n".join(fragments[name]))  # a fragment may use another
        return ("\n" + " " * column).join(text.splitlines())

    queries: dict[str, LiteralString] = {}
    for kind, name, body in blocks:
        if kind == "name":
            # Text of a file shipped with crawlq, never built from input: literal SQL.
            queries[name] = _USE.sub(expand, body.strip())
    return queries


def split_statements(script: str) -> list[str]:
    """Split an SQL script into complete statements (trigger bodies stay whole), by
    SQLite's own rule (sqlite3 is imported here: a PostgreSQL or Redis worker never
    loads it)."""
    import sqlite3

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
