"""The migration runner of the SQL stores (SQLite and PostgreSQL).

A store's migrations are the files ``NNNN_name.sql`` of its ``migrations`` package,
applied in version order (the number their name starts with), each recorded in the
store's ``crawlq_migrations`` table (version, name, applied_at) in the transaction that
applies it. A schema that has a version this crawlq does not know was migrated by a
newer crawlq: it is refused, never touched. The store runs the loop inside its own
transaction and lock; this module holds the rules, the store only how to execute.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import resources
from importlib.resources.abc import Traversable

from crawlq.exceptions import ConfigurationError


def migration_files(package: str) -> dict[int, Traversable]:
    """The ``.sql`` files of ``package`` by version (the number their name starts with)."""
    folder = resources.files(package)
    return {int(f.name.split("_", 1)[0]): f for f in folder.iterdir() if f.name.endswith(".sql")}


class Migrations:
    """The migration files of one store (``known``, by version), and how to bring a
    schema up to date. ``where`` names the schema in an error (a file path, ``schema 'crawlq'``);
    ``other`` is what to use instead of a schema that is too new."""

    def __init__(self, known: Mapping[int, Traversable], *, where: str, other: str) -> None:
        self.known = dict(known)
        self.where = where
        self.other = other

    def missing(self, applied: set[int]) -> list[tuple[int, Traversable]]:
        """The migrations ``applied`` lacks, in order; a ``ConfigurationError`` if the
        schema has a version this crawlq does not know."""
        unknown = applied - self.known.keys()
        if unknown:
            raise ConfigurationError(
                f"{self.where} has schema version {max(unknown)}, newer than this crawlq "
                f"knows: upgrade crawlq, or use {self.other}"
            )
        return [(v, f) for v, f in sorted(self.known.items()) if v not in applied]

    def run(
        self,
        applied: set[int],
        execute: Callable[[str], object],
        record: Callable[[int, str], None],
    ) -> list[str]:
        """Apply each missing migration in order (``execute`` its text, then ``record``
        its version and file name); returns the names applied. The caller holds the
        transaction that makes them all one step."""
        done: list[str] = []
        for version, file in self.missing(applied):
            execute(file.read_text(encoding="utf-8"))
            record(version, file.name)
            done.append(file.name)
        return done
