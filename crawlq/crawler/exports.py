"""What ``crawlq crawl -o`` and ``crawlq crawl-export -o`` write: pages or items, as JSON
Lines or CSV.

The store keeps one record per page (``crawlq.crawler.records``; with a parse hook the
page's items are inside it, ``crawlq.crawler.items``). An output takes those record
texts, in the order they were kept, and writes:

* pages (the default, or ``crawl-export --pages``): each record;
* items (a crawl with a parse hook): each item of each record, in page order;

as JSON Lines, or as CSV when the file name ends in ``.csv``. CSV's columns are the
crawl's record fields (``crawlq.crawler.fields``) for pages, and for items the keys of
the first item, then each key a later item adds: while a crawl runs the file is written
as records arrive, and rewritten at the end from the store when a later item brought a
key the header lacked (``CsvFile.new_columns``). Cells hold strings as they are, numbers
and booleans as JSON writes them, lists and objects as JSON text, null as nothing.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any, Protocol

from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.fields import record_fields
from crawlq.crawler.output import JsonLines
from crawlq.exceptions import ConfigurationError

__all__ = ["CsvFile", "Output", "is_csv", "open_output", "write_all"]


class Output(Protocol):
    """Where record texts go."""

    def write(self, records: Iterable[str]) -> int: ...

    def close(self) -> None: ...


def is_csv(path: str) -> bool:
    """Whether ``path`` names a CSV file (``.csv``, any case)."""
    return path.lower().endswith(".csv")


def _items(records: Iterable[str]) -> Iterator[dict[str, Any]]:
    for text in records:
        yield from json.loads(text).get("items") or ()


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return _text(value)


class CsvFile:
    """CSV output to ``path``: rows are record texts (pages) or their items
    (``items``); ``columns`` None learns them from the first row."""

    def __init__(self, path: str, *, items: bool, columns: list[str] | None = None) -> None:
        self.path = path
        self.items = items
        self.columns = columns
        self.new_columns: set[str] = set()
        """Keys of rows written after the header that it lacks (their cells are not in the
        file: ``write_all`` writes it again with them)."""
        try:
            self._stream: IO[str] = open(path, "w", encoding="utf-8", newline="")
        except OSError as exc:
            raise ConfigurationError(f"cannot write the output file {path!r}: {exc}") from None
        self._writer = csv.writer(self._stream)
        if columns is not None:
            self._writer.writerow(columns)

    def write(self, records: Iterable[str]) -> int:
        rows = _items(records) if self.items else (json.loads(text) for text in records)
        count = 0
        for row in rows:
            if self.columns is None:
                self.columns = list(row)
                self._writer.writerow(self.columns)
            self.new_columns.update(key for key in row if key not in self.columns)
            self._writer.writerow([_cell(row.get(name)) for name in self.columns])
            count += 1
        if count:
            self._stream.flush()
        return count

    def close(self) -> None:
        self._stream.close()


class _ItemLines:
    """JSON Lines of the items of records."""

    def __init__(self, lines: JsonLines) -> None:
        self._lines = lines

    def write(self, records: Iterable[str]) -> int:
        return self._lines.write(_text(item) for item in _items(records))

    def close(self) -> None:
        self._lines.close()


def open_output(
    path: str, config: CrawlConfig | None, *, items: bool, columns: list[str] | None = None
) -> Output:
    """The output for ``path`` ("-": JSON Lines on stdout): pages, or the items of a
    crawl with a parse hook. ``columns`` fixes CSV's (else as the module says)."""
    if path != "-" and is_csv(path):
        if columns is None and not items and config is not None:
            columns = record_fields(config)
        return CsvFile(path, items=items, columns=columns)
    lines = JsonLines(path)
    return _ItemLines(lines) if items else lines


def write_all(
    path: str,
    config: CrawlConfig | None,
    records: Callable[[], Iterable[str]],
    *,
    items: bool,
) -> int:
    """Write every record (or item) ``records()`` gives to ``path``; how many. For
    CSV items the records are read twice: once for the columns, once to write."""
    columns = None
    if items and path != "-" and is_csv(path):
        seen: dict[str, None] = {}
        for item in _items(records()):
            seen.update(dict.fromkeys(item))
        columns = list(seen)
    out = open_output(path, config, items=items, columns=columns)
    try:
        return out.write(records())
    finally:
        out.close()
