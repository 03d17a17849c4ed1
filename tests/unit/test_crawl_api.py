"""The crawl, seen-set and limit API of the App and the job context, on SQLite.

The store behaviour itself is proven on every store in tests/stores; this checks what the
App adds: validation with clear errors, crawl inheritance by ctx.schedule, fingerprints,
and a worker running a crawl to its single finish.
"""

from __future__ import annotations

import pytest

import crawlq
from crawlq import App, CrawlState, JobState, Limits, Outcome
from crawlq.fingerprint import canonical_url, fingerprint, fingerprint_of
from tests.unit.test_worker import drain


def test_the_issue_example_urls_are_one_page() -> None:
    same = ["http://a.com/x?b=1&a=2#frag", "http://a.com/x?a=2&b=1", "HTTP://A.COM:80/x?a=2&b=1"]
    assert {fingerprint(u) for u in same} == {fingerprint(same[0])}
    assert len(fingerprint(same[0])) == 16
    assert canonical_url("https://a.com:443") == "https://a.com/"
    assert fingerprint("http://a.com:8080/") != fingerprint("http://a.com/")
    assert fingerprint("http://a.com/x?a=1") != fingerprint("http://a.com/x?a=2")
    assert fingerprint_of("sku-42") != fingerprint_of("sku-43")


def test_a_crawl_runs_to_one_finish_with_children_and_seen_urls(app: App) -> None:
    finishes: list[int] = []

    @app.task(name="page")
    def page(ctx: crawlq.JobContext, url: str, depth: int) -> None:
        if depth < 2:
            for i in range(3):
                # every page links to the same three: the seen set keeps one of each
                link = f"http://site.test/{depth + 1}/{i}?b=1&a=2#x"
                ctx.schedule(page, link, depth + 1, seen=link, limit_key="site.test")

    @app.task(name="done")
    def done(ctx: crawlq.JobContext, crawl_id: int) -> None:
        finishes.append(crawl_id)

    start = "http://site.test/"
    info = app.crawl(
        "site",
        [page.spec(start, 0, seen=start, limit_key="site.test")],
        on_finish=done,
        meta={"owner": "tests"},
    )
    assert (info.state, info.pending, info.seen, info.meta) == (
        CrawlState.RUNNING,
        1,
        1,
        {"owner": "tests"},
    )
    drain(app)
    drain(app)  # the on_finish job is scheduled by the last completion
    after = app.get_crawl(info.id)
    assert after.state is CrawlState.FINISHED
    assert (after.done, after.dead, after.pending, after.running, after.seen) == (7, 0, 0, 0, 7)
    assert finishes == [info.id]
    assert app.seen_add(info.id, ["http://site.test/1/0?a=2&b=1", "http://new.test/"]) == [
        False,
        True,
    ]
    with pytest.raises(crawlq.CrawlClosed, match="finished"):
        page.schedule(start, 0, crawl=info.id)


def test_an_empty_crawl_finishes_at_once_and_runs_on_finish(app: App) -> None:
    done = app.task(name="done")(lambda ctx, crawl_id: None)
    info = app.crawl("nothing", [], on_finish=done)
    assert info.state is CrawlState.FINISHED and info.on_finish_job is not None
    job = app.get_job(info.on_finish_job)
    assert job is not None and job.kwargs == {"crawl_id": info.id} and job.crawl_id is None


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda app, t: t.schedule("u", seen="u"), "seen= but no crawl"),
        (lambda app, t: t.spec("u", seen=""), "seen=''"),
        (lambda app, t: t.spec("u", crawl=0), "not a crawl id"),
        (lambda app, t: t.spec("u", crawl=True), "not a crawl id"),
        (lambda app, t: t.spec("u", limit_key=""), "limit_key=''"),
        (lambda app, t: t.spec("u", limit_key="x" * 2000), "at most 1024"),
        (lambda app, t: app.crawl("", []), "a crawl's name must not be empty"),
        (lambda app, t: app.crawl("c", [], on_finish=app.get_task("plain")), "crawl_id"),
        (lambda app, t: app.crawl("c", [], on_finish=t.spec("u"), on_finish_kwargs={}), "spec"),
        (lambda app, t: app.crawl("c", [], meta={"at": object()}), "not JSON"),
        (
            lambda app, t: app.set_limit("k", max_running=0),
            "max_running must be a whole number from 1 to 2147483647, not 0",
        ),
        (
            lambda app, t: app.set_limit("k", min_interval=-1),
            "min_interval must be a number of seconds >= 0, at most 3155760000 (100 years)",
        ),
        (
            lambda app, t: app.block_key("k", float("nan")),
            "block seconds must be a number of seconds >= 0",
        ),
        (
            lambda app, t: Limits(max_running=True),
            "max_running must be a whole number from 1 to 2147483647, not True",
        ),
    ],
)
def test_bad_crawl_and_limit_arguments_are_refused_clearly(
    app: App, call: object, fragment: str
) -> None:
    task = app.task(name="t")(lambda ctx, u, crawl_id=None: None)
    app.task(name="plain")(lambda ctx: None)
    with pytest.raises(crawlq.CrawlqError) as err:
        call(app, task)  # type: ignore[operator]
    assert fragment in str(err.value)


def test_unknown_crawls_are_refused_with_their_id(app: App) -> None:
    task = app.task(name="t")(lambda ctx, u: None)
    with pytest.raises(crawlq.CrawlNotFound, match="99"):
        task.schedule("u", crawl=99)
    with pytest.raises(crawlq.CrawlNotFound, match="99"):
        app.get_crawl(99)
    with pytest.raises(crawlq.CrawlNotFound):
        app.seen_add(99, ["http://a.test/"])


def test_pause_resume_cancel_through_the_app(app: App) -> None:
    task = app.task(name="t")(lambda ctx, u: None)
    info = app.crawl("c", [task.spec("a"), task.spec("b")])
    assert app.pause_crawl(info.id).state is CrawlState.PAUSED
    assert app.pause_crawl(info.id).state is CrawlState.PAUSED  # twice is fine
    assert sum(s.held for s in app.stats()) == 2
    drain(app)
    assert app.get_crawl(info.id).pending == 2
    assert app.resume_crawl(info.id).state is CrawlState.RUNNING
    assert app.cancel_crawl(info.id).state is CrawlState.CANCELLED
    with pytest.raises(crawlq.CrawlClosed, match="cannot be resumed"):
        app.resume_crawl(info.id)
    assert app.cancel_crawl(info.id).state is CrawlState.CANCELLED


def test_a_task_blocks_its_own_key_on_a_429(app: App) -> None:
    @app.task(name="fetch", max_attempts=2)
    def fetch(ctx: crawlq.JobContext, url: str) -> None:
        ctx.block(3600)
        raise crawlq.Retry(delay=0)

    first = fetch.schedule("http://slow.test/", limit_key="slow.test").job_id
    other = fetch.schedule("http://b.test/", limit_key="b.test").job_id
    drain(app)
    [state] = app.limits("slow.test")
    assert state is not None and state.blocked_until is not None
    assert state.blocked_until > app.store.now() + 3000
    job = app.get_job(first)
    assert job is not None and job.state is JobState.PENDING and job.attempts == 1
    assert app.get_job(other).attempts == 1  # type: ignore[union-attr]


def test_ctx_block_needs_a_key(app: App) -> None:
    @app.task(name="fetch", max_attempts=1)
    def fetch(ctx: crawlq.JobContext) -> None:
        ctx.block(10)

    job_id = fetch.schedule().job_id
    drain(app)
    job = app.get_job(job_id)
    assert job is not None and job.state is JobState.DEAD
    assert "needs a limit key" in (job.last_error or "")


def test_seen_outcome_for_a_repeated_url(app: App) -> None:
    task = app.task(name="t")(lambda ctx, u: None)
    info = app.crawl("c", [task.spec("http://a.test/x", seen="http://a.test/x")])
    again = task.schedule("http://a.test/x#top", crawl=info.id, seen="http://a.test/x#top")
    assert again.outcome is Outcome.SEEN and again.job_id == 0
