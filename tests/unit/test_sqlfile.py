"""The queries.sql loader: named blocks, and fragments expanded where they are used."""

from __future__ import annotations

import pytest

from crawlq.stores._sqlfile import load_queries, parse_queries

TEXT = """-- A file header.

-- fragment: order
-- A comment of the fragment, left out.
priority DESC, id

-- fragment: due
state = 'ready'
    AND run_at <= :now

-- fragment: picked
{{due}} ORDER BY {{order}}

-- name: claim
-- The query's own comment stays.
SELECT id FROM jobs
WHERE {{due}}
ORDER BY {{order}};

-- name: nested
SELECT id FROM jobs WHERE {{picked}};
"""


def test_fragments_are_expanded_indented_as_far_as_their_use_and_are_no_queries() -> None:
    queries = parse_queries(TEXT)
    assert sorted(queries) == ["claim", "nested"]
    assert queries["claim"] == (
        "-- The query's own comment stays.\n"
        "SELECT id FROM jobs\n"
        "WHERE state = 'ready'\n"
        "          AND run_at <= :now\n"
        "ORDER BY priority DESC, id;"
    )
    assert queries["nested"] == (
        "SELECT id FROM jobs WHERE state = 'ready'\n"
        "                              AND run_at <= :now ORDER BY priority DESC, id;"
    )


def test_an_unknown_fragment_is_refused_with_its_name() -> None:
    with pytest.raises(ValueError, match=r"x\.sql uses \{\{missing\}\} but defines no fragment"):
        parse_queries("-- name: q\nSELECT {{missing}};\n", "x.sql")


@pytest.mark.parametrize("package", ["crawlq.stores.sqlite", "crawlq.stores.postgres"])
def test_the_stores_queries_use_only_fragments_they_define(package: str) -> None:
    for name, query in load_queries(package).items():
        assert "{{" not in query, name
