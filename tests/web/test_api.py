"""The JSON API on every store: every route, every action, cursor paging, auth, errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from crawlq.app import App
from crawlq.cli.stats import stats_to_dict
from crawlq.jobs import JobState, WorkerInfo
from crawlq.limits import Limits
from crawlq.stores.base import ClaimParams, Completion, Failure, JobFilter
from crawlq.web import create_app

ADMIN = "admin-secret"
READ = "read-secret"


@pytest.fixture
def secured(app: App) -> Iterator[TestClient]:
    web = create_app(app, token=ADMIN, read_token=READ)
    with TestClient(web, raise_server_exceptions=False) as c:
        yield c


def kill(app: App, queue: str, n: int) -> list[int]:
    """Claim ``n`` jobs of ``queue`` and fail them for good (to the dead letters)."""
    jobs = app.store.job_claim(ClaimParams(queues=[queue], worker_id="w", limit=n))
    failures = [
        Failure(lease=j.lease, error=f"Traceback...\nValueError: bad {j.id % 2}", retry_delay=None)
        for j in jobs
    ]
    assert all(app.store.job_fail(failures))
    return [j.id for j in jobs]


@pytest.fixture
def filled(app: App) -> dict[str, Any]:
    fetch, parse = app.tasks["fetch"], app.tasks["parse"]
    dead_ids = [fetch.schedule(f"https://a.example/{i}").job_id for i in range(3)]
    assert kill(app, "pages", 3) == dead_ids
    keyed = fetch.schedule("https://b.example/", key="b", limit_key="b.example").job_id
    parse_ids = [parse.delay(i).job_id for i in range(4)]
    crawl = app.crawl("site", [parse.spec(10), parse.spec(11)])
    app.set_limit("b.example", max_running=2, min_interval=0.5)
    app.block_key("blocked.example", 600)
    app.store.worker_register(
        WorkerInfo(id="w-1", host="h", pid=1, queues=("pages",), runtime="thread", concurrency=4)
    )
    return {"dead": dead_ids, "keyed": keyed, "parse": parse_ids, "crawl": crawl.id}


def drop_ages(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "oldest_due_age"} for r in rows]


def ok(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def test_reads(client: TestClient, app: App, filled: dict[str, Any]) -> None:
    stats = ok(client.get("/api/stats"))
    assert drop_ages(stats) == drop_ages([stats_to_dict(s) for s in app.stats()])
    assert drop_ages(ok(client.get("/api/queues"))["queues"]) == drop_ages(stats)
    over = ok(client.get("/api/overview"))
    assert over["totals"]["dead"] == 3 and over["workers_alive"] == 1
    assert over["crawls_running"] == 1 and over["workers_slots"] == 4

    job = ok(client.get(f"/api/jobs/{filled['dead'][0]}"))
    assert job["state"] == "dead" and job["args"] == ["https://a.example/0"]
    assert "ValueError" in job["last_error"] and job["attempts"] == 1
    dead = ok(client.get("/api/dead"))
    assert [j["id"] for j in dead["jobs"]] == filled["dead"]
    failures = ok(client.get("/api/failures"))["groups"]
    assert sorted((g["exception"], g["count"]) for g in failures) == [
        ("ValueError: bad 0", 2),
        ("ValueError: bad 1", 1),
    ] or sorted(g["count"] for g in failures) == [1, 2]

    crawls = ok(client.get("/api/crawls"))["crawls"]
    assert [c["id"] for c in crawls] == [filled["crawl"]]
    one = ok(client.get(f"/api/crawls/{filled['crawl']}"))
    assert (one["pending"], one["total"], one["state"]) == (2, 2, "running")

    limits = ok(client.get("/api/limits"))["limits"]
    assert limits[0]["key"] == "blocked.example" and limits[0]["blocked"]
    assert ok(client.get("/api/limits/b.example"))["max_running"] == 2
    workers = ok(client.get("/api/workers"))["workers"]
    assert [w["id"] for w in workers] == ["w-1"]
    page = client.get("/")
    assert page.status_code == 200 and "crawlq" in page.text
    assert client.get("/static/app.js").status_code == 200


@pytest.mark.parametrize(
    ("query", "expect"),
    [
        ("queue=parse", "parse+crawl"),
        ("state=dead", "dead"),
        ("task=fetch&state=pending", "keyed"),
        ("key=b", "keyed"),
        ("limit_key=b.example", "keyed"),
        ("crawl=CRAWL", "crawl"),
    ],
)
def test_job_filters(
    client: TestClient, app: App, filled: dict[str, Any], query: str, expect: str
) -> None:
    crawl_jobs = [j.id for j in app.store.job_list(JobFilter(crawl=filled["crawl"]))]
    want = {
        "parse+crawl": filled["parse"] + crawl_jobs,
        "dead": filled["dead"],
        "keyed": [filled["keyed"]],
        "crawl": crawl_jobs,
    }[expect]
    got = ok(client.get("/api/jobs?" + query.replace("CRAWL", str(filled["crawl"]))))
    assert [j["id"] for j in got["jobs"]] == want


def test_cursor_paging_skips_nothing_under_concurrent_inserts(client: TestClient, app: App) -> None:
    parse = app.tasks["parse"]
    first = [r.job_id for r in app.schedule_many(parse.spec(i) for i in range(25))]
    stop = threading.Event()
    added: list[int] = []

    def insert() -> None:
        i = 0
        while not stop.is_set() and i < 200:
            added.extend(r.job_id for r in app.schedule_many([parse.spec(1000 + i)]))
            i += 1

    inserter = threading.Thread(target=insert)
    inserter.start()
    seen: list[int] = []
    after = 0
    try:
        while True:
            page = ok(client.get(f"/api/jobs?limit=4&after_id={after}"))
            seen.extend(j["id"] for j in page["jobs"])
            if page["next_after_id"] is None:
                break
            after = page["next_after_id"]
    finally:
        stop.set()
        inserter.join()
    assert seen == sorted(set(seen))  # in id order, no repeat
    assert set(first) <= set(seen)  # every job there before the listing began
    assert set(seen) <= set(first) | set(added)
    rest = ok(client.get(f"/api/jobs?limit=1000&after_id={seen[-1]}"))["jobs"]
    assert sorted(seen + [j["id"] for j in rest]) == sorted(first + added)


def test_job_actions(client: TestClient, app: App, filled: dict[str, Any]) -> None:
    dead = filled["dead"]
    out = ok(client.post("/api/actions/jobs/requeue", json={"ids": [dead[0], 999999]}))
    assert out["ids"] == [dead[0]] and out["count"] == 1
    assert app.store.job_get(dead[0]).state is JobState.PENDING  # type: ignore[union-attr]
    out = ok(client.post("/api/actions/jobs/requeue", json={"filter": {"queue": "pages"}}))
    assert out["ids"] == dead[1:] and out["more"] is False

    out = ok(client.post("/api/actions/jobs/cancel", json={"ids": [filled["keyed"]]}))
    assert out["ids"] == [filled["keyed"]]
    out = ok(client.post("/api/actions/jobs/cancel", json={"filter": {"queue": "parse"}}))
    assert out["count"] == len(filled["parse"]) + 2
    out = ok(client.post("/api/actions/jobs/delete", json={"ids": [filled["keyed"]]}))
    assert out["count"] == 1 and app.store.job_get(filled["keyed"]) is None
    out = ok(client.post("/api/actions/jobs/delete", json={"filter": {"state": "cancelled"}}))
    assert out["count"] == len(filled["parse"]) + 2
    bad = client.post("/api/actions/jobs/requeue", json={"filter": {"state": "running"}})
    assert bad.status_code == 400 and "dead" in bad.json()["error"]


def test_crawl_and_limit_actions(client: TestClient, app: App, filled: dict[str, Any]) -> None:
    crawl = filled["crawl"]
    assert ok(client.post(f"/api/actions/crawls/{crawl}/pause", json={}))["state"] == "paused"
    assert app.stats()[1].held == 2
    assert ok(client.post(f"/api/actions/crawls/{crawl}/resume", json={}))["state"] == "running"
    assert ok(client.post(f"/api/actions/crawls/{crawl}/cancel", json={}))["state"] == "cancelled"
    again = client.post(f"/api/actions/crawls/{crawl}/pause", json={})
    assert again.status_code == 409 and "cancelled" in again.json()["error"]
    assert client.post("/api/actions/crawls/99999/pause", json={}).status_code == 404

    key = ok(client.post("/api/actions/limits/set", json={"key": "c.example", "max_running": 3}))
    assert (key["max_running"], key["override"]) == (3, True)
    assert app.limits("c.example")[0].limits == Limits(max_running=3)  # type: ignore[union-attr]
    key = ok(client.post("/api/actions/limits/clear", json={"key": "c.example"}))
    assert key["max_running"] is None
    key = ok(client.post("/api/actions/limits/block", json={"key": "c.example", "seconds": 60}))
    assert key["blocked"] is True
    bad = client.post("/api/actions/limits/set", json={"key": "c.example", "max_running": 0})
    assert bad.status_code == 400 and "max_running" in bad.json()["error"]


def test_errors_are_json_one_liners(client: TestClient, filled: dict[str, Any]) -> None:
    for method, path, status in [
        ("GET", "/api/jobs/999999", 404),
        ("GET", "/api/jobs/abc", 404),
        ("GET", "/api/crawls/0", 404),
        ("GET", "/api/jobs?limit=100000", 400),
        ("GET", "/api/jobs?state=zombie", 400),
        ("GET", "/api/jobs?wat=1", 400),
        ("GET", "/api/limits/nokey.example", 404),
        ("GET", "/api/actions/jobs/requeue", 405),
        ("POST", "/api/jobs", 405),
        ("GET", "/api/nothing", 404),
        ("POST", "/api/actions/jobs/explode", 404),
    ]:
        r = client.request(method, path, json={} if method == "POST" else None)
        assert r.status_code == status, (path, r.text)
        assert set(r.json()) == {"error"} and "\n" not in r.json()["error"]
        assert "Traceback" not in r.text


def test_actions_need_json_and_a_small_body(client: TestClient) -> None:
    form = client.post("/api/actions/jobs/requeue", content=b"ids=1", headers={
        "content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert form.status_code == 415  # a cross-site form cannot act
    big = client.post("/api/actions/jobs/requeue", json={"ids": [1] * 40_000})
    assert big.status_code == 413


def test_tokens(secured: TestClient, filled: dict[str, Any]) -> None:
    assert secured.get("/api/stats").status_code == 401
    assert secured.get("/metrics").status_code == 401
    assert secured.get("/api/stats", headers={"x-crawlq-token": "nope"}).status_code == 403
    assert secured.get("/api/stats", headers={"x-crawlq-token": READ}).status_code == 200
    assert secured.get("/metrics", headers={"authorization": f"Bearer {READ}"}).status_code == 200
    body = {"ids": filled["dead"]}
    assert secured.post("/api/actions/jobs/requeue", json=body).status_code == 401
    read = secured.post("/api/actions/jobs/requeue", json=body, headers={"x-crawlq-token": READ})
    assert read.status_code == 403 and "admin" in read.json()["error"]
    admin = secured.post("/api/actions/jobs/requeue", json=body, headers={"x-crawlq-token": ADMIN})
    assert admin.status_code == 200 and admin.json()["count"] == 3
    assert secured.get("/").status_code == 200  # the page itself holds no data


def test_metrics_equal_stats(client: TestClient, app: App, filled: dict[str, Any]) -> None:
    text = client.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = families["crawlq_jobs"].samples
    jobs = {(s.labels["queue"], s.labels["state"]): s.value for s in samples}
    for row in (stats_to_dict(s) for s in app.stats()):
        for state in ("due", "scheduled", "waiting", "held", "running", "done", "dead"):
            assert jobs[(str(row["queue"]), state)] == row[state], (row, state)
    crawls = {s.labels["state"]: s.value for s in families["crawlq_crawls"].samples}
    assert crawls["running"] == 1 and crawls["finished"] == 0
    assert families["crawlq_workers_alive"].samples[0].value == 1
    assert families["crawlq_limit_keys_blocked"].samples[0].value == 1
    assert "crawlq_crawl_jobs_ended_total" in text
    assert not any("host" in s.labels for f in families.values() for s in f.samples)


def test_reschedule_action(client: TestClient, app: App, filled: dict[str, Any]) -> None:
    def run_at(job_id: int) -> float:
        job = app.store.job_get(job_id)
        assert job is not None
        return job.run_at

    first, *rest = filled["parse"]
    now = app.store.now()
    out = ok(client.post("/api/actions/jobs/reschedule", json={"ids": [first], "delay": 3600}))
    assert (out["ids"], out["count"], out["more"]) == ([first], 1, False)
    assert now + 3599 < run_at(first) < app.store.now() + 3601
    assert app.stats()[1].scheduled == 1

    at = {"at": "2030-01-31T09:30:00Z"}
    body = {"filter": {"queue": "parse", "crawl": filled["crawl"]}, **at}
    crawl_jobs = [j.id for j in app.store.job_list(JobFilter(crawl=filled["crawl"]))]
    out = ok(client.post("/api/actions/jobs/reschedule", json=body))
    assert (out["ids"], out["next_after_id"]) == (crawl_jobs, None)
    assert [run_at(i) for i in crawl_jobs] == [1896082200.0] * 2
    out = ok(client.post("/api/actions/jobs/reschedule", json={"ids": crawl_jobs[:1]}))
    assert out["ids"] == crawl_jobs[:1] and run_at(crawl_jobs[0]) <= app.store.now()
    # only pending jobs move: dead ones and a pending state filter
    out = ok(client.post("/api/actions/jobs/reschedule", json={"ids": filled["dead"], **at}))
    assert (out["ids"], out["count"]) == ([], 0)
    paged = {"filter": {"queue": "parse", "after_id": rest[0]}}
    out = ok(client.post("/api/actions/jobs/reschedule", json=paged))
    assert out["ids"] == [*rest[1:], *crawl_jobs]
    for body, words in [
        ({"filter": {"state": "dead"}}, "only pending"),
        ({"ids": [first], "at": "yesterday"}, "ISO 8601"),
        ({"ids": [first], "at": 1.0, "delay": 5}, "not both"),
        ({"ids": [first], "delay": -1}, "delay"),
        ({"ids": [first], "at": 1e300}, "at"),
        ({"filter": {"after_id": "x"}}, "after_id"),
        ({"ids": [first], "seconds": 1}, "unknown field"),
    ]:
        bad = client.post("/api/actions/jobs/reschedule", json=body)
        assert bad.status_code == 400 and words in bad.json()["error"], (body, bad.text)
    bad = client.post("/api/actions/jobs/cancel", json={"ids": [first], "delay": 5})
    assert bad.status_code == 400


def test_metrics_totals_are_counters_of_what_happened(
    client: TestClient, app: App, filled: dict[str, Any]
) -> None:
    [job] = app.store.job_claim(ClaimParams(queues=["parse"], worker_id="w", limit=1))
    assert app.store.job_complete([Completion(lease=job.lease)])
    assert app.store.job_prune(retention=0) == 1  # pruning lowers no total
    text = client.get("/metrics").text
    families = {f.name: f for f in text_string_to_metric_families(text)}
    found: dict[tuple[str, str], float] = {}
    for name in ("enqueued", "completed", "retried", "dead_lettered"):
        family = families[f"crawlq_jobs_{name}"]
        assert family.type == "counter"
        for s in family.samples:
            assert s.name == f"crawlq_jobs_{name}_total"
            found[(s.labels["queue"], name)] = s.value
    failed = {s.labels["queue"]: s.value for s in families["crawlq_job_attempts_failed"].samples}
    assert found == {
        ("pages", "enqueued"): 4, ("pages", "completed"): 0, ("pages", "retried"): 0,
        ("pages", "dead_lettered"): 3,
        ("parse", "enqueued"): 6, ("parse", "completed"): 1, ("parse", "retried"): 0,
        ("parse", "dead_lettered"): 0,
    }  # fmt: skip
    assert failed == {"pages": 3, "parse": 0}
    assert "crawlq_job_attempts_failed_total{" in text
