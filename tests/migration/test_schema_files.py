"""The generated schema files (docs/schema/*.sql, crawlq.stores.schema) show what the
migrations produce: on a fresh store, and on a store migrated from any earlier version.
After adding a migration: ``python -m crawlq.stores.schema --write <postgres URL>``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

import crawlq
from crawlq.stores import schema
from tests import servers

REGENERATE = "regenerate it: python -m crawlq.stores.schema --write <postgres URL>"


def test_the_sqlite_schema_file_shows_a_fresh_store() -> None:
    expected = schema.schema_file("sqlite").read_text(encoding="utf-8")
    assert schema.fresh_sqlite_schema() == expected, (
        f"docs/schema/sqlite.sql is stale: {REGENERATE}"
    )


# -- PostgreSQL ----------------------------------------------------------------------------

psycopg = pytest.importorskip("psycopg")


def pg_migrations() -> list[tuple[int, str, bytes]]:
    """(version, file name, SQL) of every shipped migration, in version order."""
    folder = resources.files("crawlq.stores.postgres.migrations")
    found = [
        (int(f.name.split("_", 1)[0]), f.name, f.read_bytes())
        for f in folder.iterdir()
        if f.name.endswith(".sql")
    ]
    return sorted(found)


@pytest.fixture
def pg_schema(tmp_path: Path) -> Iterator[str]:
    name = servers.isolated_name(tmp_path, "s_")
    yield name
    with psycopg.connect(servers.postgres().url, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            psycopg.sql.Identifier(name)
        ))  # fmt: skip


def migrate_by_hand(conn: Any, name: str, done: int) -> None:
    """Make schema ``name`` and apply the first ``done`` migration files in it, recorded as
    an older crawlq did, in the transaction of ``conn``."""
    conn.execute(psycopg.sql.SQL("CREATE SCHEMA {}").format(psycopg.sql.Identifier(name)))
    conn.execute("SELECT set_config('search_path', quote_ident(%s), true)", (name,))
    conn.execute(
        "CREATE TABLE crawlq_migrations (version integer PRIMARY KEY, name text NOT NULL, "
        "applied_at double precision NOT NULL)"
    )
    for version, file_name, sql in pg_migrations()[:done]:
        conn.execute(sql)
        conn.execute("INSERT INTO crawlq_migrations VALUES (%s, %s, 0)", (version, file_name))


def _dump(name: str) -> str:
    with psycopg.connect(servers.postgres().url, autocommit=True) as conn:
        return schema.postgres_schema(conn, name)


def _open(name: str) -> None:
    crawlq.open_store(f"{servers.postgres().url}?schema={name}").close()


def test_the_postgres_schema_file_shows_a_fresh_store(pg_schema: str) -> None:
    _open(pg_schema)
    expected = schema.schema_file("postgres").read_text(encoding="utf-8")
    assert _dump(pg_schema) == expected, f"docs/schema/postgres.sql is stale: {REGENERATE}"


@pytest.mark.parametrize("done", range(1, len(pg_migrations())))
def test_every_earlier_postgres_version_migrates_to_the_fresh_schema(
    pg_schema: str, done: int
) -> None:
    """A schema left at version ``done`` by an older crawlq reaches the schema file's."""
    with psycopg.connect(servers.postgres().url) as conn:
        migrate_by_hand(conn, pg_schema, done)
    _open(pg_schema)
    assert _dump(pg_schema) == schema.schema_file("postgres").read_text(encoding="utf-8")


def _defined(sql: str) -> set[str]:
    return set(re.findall(r"CREATE (?:OR REPLACE )?FUNCTION (\w+)", sql))


def test_the_function_bodies_taken_out_of_old_migrations_are_all_replaced_later() -> None:
    """0003 and 0005 as released defined crawlq_reconcile, crawlq_jobs_inserted,
    crawlq_jobs_updated and crawlq_crawl_finish; their bodies were taken out of those
    files (issue 18), so a schema that ran them as released must have each of them
    replaced by a later migration that is still whole, or it would keep an old body."""
    files = {version: sql.decode() for version, _, sql in pg_migrations()}
    assert "crawlq_jobs_inserted" in _defined(files[5])
    assert {"crawlq_reconcile", "crawlq_jobs_updated", "crawlq_crawl_finish"} <= _defined(files[8])


def test_a_postgres_schema_with_the_released_bodies_reaches_the_same_functions(
    pg_schema: str,
) -> None:
    """A schema at version 7 made by a released crawlq has the bodies 0003 and 0005 gave
    crawlq_reconcile, crawlq_jobs_updated and crawlq_crawl_finish (no longer in those
    files): 0008 replaces every one of them. Stand-ins play the released bodies here."""
    conn: Any
    with psycopg.connect(servers.postgres().url) as conn:
        migrate_by_hand(conn, pg_schema, 7)
        conn.execute(
            "CREATE OR REPLACE FUNCTION crawlq_reconcile(keys text[], now double precision) "
            "RETURNS void LANGUAGE sql AS $$ SELECT 1 $$"
        )
        for trigger in ("crawlq_jobs_updated", "crawlq_crawl_finish"):
            conn.execute(
                f"CREATE OR REPLACE FUNCTION {trigger}() RETURNS trigger LANGUAGE plpgsql "
                "AS $$ BEGIN RAISE 'released body'; END $$"
            )
    _open(pg_schema)
    assert _dump(pg_schema) == schema.schema_file("postgres").read_text(encoding="utf-8")
