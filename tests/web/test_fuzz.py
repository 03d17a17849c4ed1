"""A seeded fuzz of malformed requests: every route, on every store, answers each with a
4xx (or 200 when the request happens to be valid) and never a 5xx or a traceback."""

from __future__ import annotations

import json
import os
import random
from typing import Any
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from crawlq.app import App

ROUTES = [
    ("GET", "/api/stats"),
    ("GET", "/api/overview"),
    ("GET", "/api/queues"),
    ("GET", "/api/jobs"),
    ("GET", "/api/jobs/{id}"),
    ("GET", "/api/dead"),
    ("GET", "/api/failures"),
    ("GET", "/api/crawls"),
    ("GET", "/api/crawls/{id}"),
    ("GET", "/api/limits"),
    ("GET", "/api/limits/{key}"),
    ("GET", "/api/workers"),
    ("GET", "/metrics"),
    ("POST", "/api/actions/jobs/{action}"),
    ("POST", "/api/actions/crawls/{id}/{action}"),
    ("POST", "/api/actions/limits/{action}"),
]

PER_ROUTE = 1000
"""Requests per route on SQLite; PostgreSQL and Redis get SERVER_PER_ROUTE (the same
code answers on every store; the stores' own value checks are the conformance suite's).
``FUZZ_PER_ROUTE=1000 pytest tests/web/test_fuzz.py`` runs the full count on every store."""
SERVER_PER_ROUTE = int(os.environ.get("FUZZ_PER_ROUTE", "200"))

PARAMS = ["queue", "state", "task", "key", "crawl", "limit_key", "after_id", "limit", "after"]
PARAMS += ["order", "x", ""]
BODY_FIELDS = ["ids", "filter", "key", "max_running", "min_interval", "seconds", "state", "x"]


SCALARS: list[Any] = [
            -1, 0, 1, 2, 2**53, 2**63, -(2**63), 10**30, 1.5, -0.0, 1e308, True, False, None,
            "", "1", "abc", "é", "💥", "\x00", "a" * 5000, "9" * 5000, "1e5", "-5", "0x10",
            "NaN", "Infinity", "dead", "pending", "running", "pages", "%00", "../etc", "€" * 300,
            [], [1], [[]], {}, {"queue": 1}, {"state": "zombie"}, {"crawl": -1}, ["a"],
]  # fmt: skip


def bad_scalar(rng: random.Random) -> Any:
    return rng.choice(SCALARS)


def bad_text(rng: random.Random) -> str:
    value = bad_scalar(rng)
    return value if isinstance(value, str) else json.dumps(value)


def bad_path(rng: random.Random, template: str) -> str:
    path = template
    for name in ("id", "action", "key"):
        if "{" + name + "}" in path:
            choices = [bad_text(rng), "requeue", "cancel", "delete", "pause", "set", "block", "1"]
            part = rng.choice(choices) or "x"
            path = path.replace("{" + name + "}", quote(part[:300], safe="") or "x")
    return path


def bad_body(rng: random.Random) -> tuple[bytes, dict[str, str]]:
    headers = {"content-type": rng.choice(["application/json"] * 4 + ["text/plain", ""])}
    kind = rng.randrange(6)
    if kind == 0:
        raw = bytes(rng.randrange(256) for _ in range(rng.randrange(50)))
    elif kind == 1:
        raw = b'{"ids": [' + b"1," * 40_000 + b"1]}"  # oversized
    elif kind == 2:
        raw = json.dumps(bad_scalar(rng)).encode()
    elif kind == 3:
        raw = b"[" * 5000 + b"]" * 5000  # deep nesting
    else:
        body = {rng.choice(BODY_FIELDS): bad_scalar(rng) for _ in range(rng.randrange(1, 4))}
        raw = json.dumps(body).encode()
    return raw, headers


def fuzz(client: TestClient, seed: int, count: int) -> list[tuple[int, str, str]]:
    rng = random.Random(seed)
    bad: list[tuple[int, str, str]] = []
    for method, template in ROUTES:
        for _ in range(count):
            path = bad_path(rng, template)
            pairs = [(rng.choice(PARAMS), bad_text(rng)[:200]) for _ in range(rng.randrange(4))]
            query = "&".join(f"{k}={quote(v, safe='')}" for k, v in pairs)
            verb = method if rng.random() < 0.85 else rng.choice(["GET", "POST", "PUT", "DELETE"])
            raw, headers = bad_body(rng) if verb != "GET" else (b"", {})
            r = client.request(verb, path + ("?" + query if query else ""), content=raw,
                               headers=headers)  # fmt: skip
            if r.status_code >= 500 or "Traceback" in r.text:
                bad.append((r.status_code, f"{verb} {path}?{query}", r.text[:300]))
            elif r.status_code >= 400 and template != "/metrics":
                assert set(r.json()) == {"error"}, r.text
    return bad


@pytest.fixture
def seeded(app: App) -> App:
    parse = app.tasks["parse"]
    app.schedule_many(parse.spec(i) for i in range(5))
    app.crawl("c", [parse.spec(99)])
    app.set_limit("a.example", max_running=1)
    return app


def test_no_5xx_on_malformed_requests(
    client: TestClient, seeded: App, request: pytest.FixtureRequest
) -> None:
    store_kind = request.node.callspec.params["store"]
    count = PER_ROUTE if store_kind == "sqlite" else SERVER_PER_ROUTE
    assert fuzz(client, seed=17, count=count) == []
