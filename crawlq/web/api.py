"""The JSON API under ``/api/``: the CLI's functions (the App and the Store) over HTTP.

Every answer is JSON. Reads are GET; every action is a POST with a JSON body, which needs
the admin token when the server has one. An error is ``{"error": "one line"}`` with a
4xx status: 400 bad input, 401/403 token, 404 no such thing, 405 wrong method, 409 not
possible in its state, 413 body too big, 415 not JSON.
"""

from __future__ import annotations

import dataclasses
import hmac
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from crawlq.app import App, check_when
from crawlq.cli.crawls import crawl_to_dict, progress
from crawlq.cli.limits import key_to_dict
from crawlq.cli.output import first_line, job_to_dict
from crawlq.cli.stats import stats_to_dict
from crawlq.cli.workers import worker_to_dict
from crawlq.crawls import CrawlInfo, CrawlState
from crawlq.exceptions import ConfigurationError, CrawlClosed, CrawlNotFound, CrawlqError
from crawlq.jobs import LIVE_STATES, JobState, WorkerState
from crawlq.limits import KeyLimit, Limits
from crawlq.payload import MAX_EXACT
from crawlq.stores.base import JobFilter, Store

MAX_PAGE = 1000
"""The largest ``limit`` of one listing."""
DEFAULT_PAGE = 50
FAILURES_PAGE = 200
"""Dead jobs one failures page groups (the dead-letter queue is listed in id order)."""
MAX_BODY_BYTES = 64 * 1024
"""The largest request body an action takes."""
MAX_BULK = 10_000
"""The most jobs one bulk action changes; the answer says ``more`` when some are left."""
MAX_IDS = 1000
"""The most ids one action names."""
TOTALS = (
    *("due", "scheduled", "waiting", "held", "running", "done", "dead", "cancelled"),
    "done_last_minute",
)

Handler = Callable[[Request], Awaitable[Response]]


class ApiError(Exception):
    """An answer with a 4xx status and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Tokens:
    """Who may do what: no admin token means everyone may do everything (127.0.0.1)."""

    admin: str | None = None
    read: str | None = None

    def check(self, request: Request, *, write: bool) -> None:
        given = _token_of(request)
        if self.admin is None and self.read is None:
            return
        if given is None:
            raise ApiError(401, "a token is needed: send it as the X-Crawlq-Token header")
        is_admin, is_read = _same(given, self.admin), _same(given, self.read)
        if is_admin or (is_read and not write):
            return
        if is_read:
            raise ApiError(403, "this action needs the admin token; the read token only reads")
        raise ApiError(403, "the token is wrong")


def _same(given: str, token: str | None) -> bool:
    """``given == token`` in constant time."""
    return token is not None and hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), token.encode("utf-8", "surrogateescape")
    )


def _token_of(request: Request) -> str | None:
    token = request.headers.get("x-crawlq-token")
    if token is None:
        auth = request.headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            token = auth[7:].strip()
    return token or None


@dataclass
class Throughput:
    """Jobs done per minute over the last hour, sampled by this process from the store's
    ``done`` counts whenever the overview is read (at most every 10 s)."""

    samples: list[tuple[float, int]] = field(default_factory=list)

    def add(self, now: float, done: int) -> None:
        if self.samples and now - self.samples[-1][0] < 10:
            return
        self.samples.append((now, done))
        cutoff = now - 3600 - 60
        while len(self.samples) > 2 and self.samples[0][0] < cutoff:
            self.samples.pop(0)

    def per_minute(self) -> list[dict[str, float]]:
        out = []
        for (t0, d0), (t1, d1) in zip(self.samples, self.samples[1:], strict=False):
            if t1 > t0 and d1 >= d0:  # a prune lowers done: skip that step
                out.append({"t": t1, "per_minute": round((d1 - d0) * 60 / (t1 - t0), 2)})
        return out


# -- reading the query string ----------------------------------------------------------


def _int(params: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        raise ApiError(400, f"{name}={raw!r:.40} is not a whole number") from None
    if not lo <= value <= hi:
        raise ApiError(400, f"{name}={value} is out of range: give {lo} to {hi}")
    return value


def _enum(params: Mapping[str, str], name: str, kind: Any) -> Any:
    raw = params.get(name)
    if raw is None or raw == "":
        return None
    try:
        return kind(raw)
    except ValueError:
        known = ", ".join(s.value for s in kind)
        raise ApiError(400, f"{name}={raw!r:.40} is not one of {known}") from None


def _text(params: Mapping[str, str], name: str) -> str | None:
    raw = params.get(name)
    return raw if raw else None


def _path_int(request: Request, name: str) -> int:
    raw = request.path_params[name]
    try:
        value = int(raw, 10)
    except ValueError:
        raise ApiError(404, f"{raw!r:.40} is not an id") from None
    if not 1 <= value <= MAX_EXACT:
        raise ApiError(404, f"no such id: {value}")
    return value


def job_filter(params: Mapping[str, Any], *, state: JobState | None = None) -> JobFilter:
    """A JobFilter from query parameters or a JSON object; ApiError if a value is bad."""
    for name in ("queue", "task", "key", "limit_key", "state"):
        if params.get(name) is not None and not isinstance(params[name], str):
            raise ApiError(400, f"{name} must be a string")
    crawl = params.get("crawl")
    if isinstance(crawl, str):
        crawl = _int(params, "crawl", 0, 0, MAX_EXACT) or None
    try:
        return JobFilter(
            queue=_text(params, "queue"),
            task=_text(params, "task"),
            key=_text(params, "key"),
            limit_key=_text(params, "limit_key"),
            crawl=crawl,
            state=state if state is not None else _enum(params, "state", JobState),
        )
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None


# -- the API -----------------------------------------------------------------------------


class Api:
    """The routes of ``/api/`` on one App."""

    def __init__(self, app: App, tokens: Tokens) -> None:
        self.app = app
        self.tokens = tokens
        self.throughput = Throughput()

    @property
    def store(self) -> Store:
        return self.app.store

    def routes(self) -> list[Route]:
        r = self._route
        return [
            r("/api/stats", self.stats),
            r("/api/overview", self.overview),
            r("/api/queues", self.queues),
            r("/api/jobs", self.jobs),
            r("/api/jobs/{id}", self.job),
            r("/api/dead", self.dead),
            r("/api/failures", self.failures),
            r("/api/crawls", self.crawls),
            r("/api/crawls/{id}", self.crawl),
            r("/api/limits", self.limits),
            r("/api/limits/{key:path}", self.limit),
            r("/api/workers", self.workers),
            r("/api/actions/jobs/{action}", self.jobs_action, write=True),
            r("/api/actions/crawls/{id}/{action}", self.crawl_action, write=True),
            r("/api/actions/limits/{action}", self.limit_action, write=True),
        ]

    def _route(self, path: str, fn: Callable[[Request, Any], Any], *, write: bool = False) -> Route:
        async def endpoint(request: Request) -> Response:
            try:
                self.tokens.check(request, write=write)
                body = await _read_body(request) if write else None
                result = await anyio.to_thread.run_sync(lambda: fn(request, body))
                return JSONResponse(result)
            except ApiError as exc:
                return error(exc.status, exc.message)
            except CrawlNotFound as exc:
                return error(404, str(exc))
            except CrawlClosed as exc:
                return error(409, str(exc))
            except ConfigurationError as exc:
                return error(400, str(exc))
            except CrawlqError as exc:
                return error(503, f"the store failed: {' '.join(str(exc).split())}")

        return Route(path, endpoint, methods=["POST"] if write else ["GET", "HEAD"])

    # -- reads ------------------------------------------------------------------------

    def stats(self, request: Request, body: None) -> Any:
        return [stats_to_dict(s) for s in self.app.stats()]

    def queues(self, request: Request, body: None) -> Any:
        return {"queues": self.stats(request, body)}

    def overview(self, request: Request, body: None) -> Any:
        queues = self.app.stats()
        now = self.store.now()
        self.throughput.add(now, sum(q.done for q in queues))
        workers = self.app.workers()
        summary = self.store.store_summary(now=now)
        ages = [q.oldest_due_age for q in queues if q.oldest_due_age is not None]
        return {
            "now": now,
            "queues": [stats_to_dict(s) for s in queues],
            "totals": {name: sum(getattr(q, name) for q in queues) for name in TOTALS},
            "oldest_due_age": max(ages) if ages else None,
            "workers_alive": sum(w.state is WorkerState.ALIVE for w in workers),
            "workers_slots": sum(w.concurrency for w in workers if w.state is WorkerState.ALIVE),
            "crawls_running": summary.crawls[CrawlState.RUNNING],
            "crawls_paused": summary.crawls[CrawlState.PAUSED],
            "keys_blocked": summary.blocked_keys,
            "throughput": self.throughput.per_minute(),
        }

    def _page(self, request: Request, state: JobState | None = None) -> Any:
        params = request.query_params
        unknown = (
            set(params)
            - {"queue", "task", "key", "crawl", "limit_key", "state"}
            - {
                "after_id",
                "limit",
            }
        )
        if unknown:
            raise ApiError(400, f"unknown parameter {sorted(unknown)[0]!r:.40}")
        where = job_filter(params, state=state)
        limit = _int(params, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
        after_id = _int(params, "after_id", 0, 0, MAX_EXACT)
        page = self.store.job_list(
            JobFilter(
                queue=where.queue, task=where.task, key=where.key, crawl=where.crawl,
                limit_key=where.limit_key, state=where.state, limit=limit, after_id=after_id,
            )
        )  # fmt: skip
        return {
            "jobs": [job_to_dict(j) for j in page],
            "next_after_id": page[-1].id if len(page) == limit else None,
        }

    def jobs(self, request: Request, body: None) -> Any:
        return self._page(request)

    def dead(self, request: Request, body: None) -> Any:
        if request.query_params.get("state"):
            raise ApiError(400, "/api/dead lists dead jobs: drop state=")
        return self._page(request, JobState.DEAD)

    def job(self, request: Request, body: None) -> Any:
        job_id = _path_int(request, "id")
        found = self.app.get_job(job_id)
        if found is None:
            raise ApiError(404, f"no job with id {job_id} (it may have been pruned)")
        return job_to_dict(found)

    def failures(self, request: Request, body: None) -> Any:
        """Dead jobs grouped by the last line of their error (the exception)."""
        params = request.query_params
        limit = _int(params, "limit", FAILURES_PAGE, 1, MAX_PAGE)
        after_id = _int(params, "after_id", 0, 0, MAX_EXACT)
        page = self.store.job_list(JobFilter(state=JobState.DEAD, limit=limit, after_id=after_id))
        groups: dict[str, dict[str, Any]] = {}
        for j in page:
            name = first_line(j.last_error) or j.dead_reason or "unknown"
            group = groups.setdefault(name, {"exception": name, "count": 0, "jobs": []})
            group["count"] += 1
            if len(group["jobs"]) < 20:
                group["jobs"].append(
                    {"id": j.id, "task": j.task, "queue": j.queue, "attempts": j.attempts,
                     "finished_at": j.finished_at, "traceback": j.last_error}
                )  # fmt: skip
        ordered = sorted(groups.values(), key=lambda g: -int(g["count"]))
        return {
            "groups": ordered,
            "next_after_id": page[-1].id if len(page) == limit else None,
        }

    def crawls(self, request: Request, body: None) -> Any:
        params = request.query_params
        state = _enum(params, "state", CrawlState)
        limit = _int(params, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
        after_id = _int(params, "after_id", 0, 0, MAX_EXACT)
        rows = self.store.crawl_list(state=state, limit=limit, after_id=after_id)
        return {
            "crawls": [_crawl(c) for c in rows],
            "next_after_id": rows[-1].id if len(rows) == limit else None,
        }

    def crawl(self, request: Request, body: None) -> Any:
        return _crawl(self.app.get_crawl(_path_int(request, "id")))

    def limits(self, request: Request, body: None) -> Any:
        params = request.query_params
        limit = _int(params, "limit", 100, 1, MAX_PAGE)
        after = params.get("after", "")
        rows: list[KeyLimit] = self.store.limit_list(limit=limit, after=_check_key(after, True))
        now = self.store.now()
        order = params.get("order", "busiest")
        if order not in ("busiest", "key"):
            raise ApiError(400, f"order={order!r:.40} is not busiest or key")
        shown = list(rows)
        if order == "busiest":
            shown.sort(key=lambda k: (not _blocked(k, now), -k.running, -k.pending, k.key))
        return {
            "limits": [_key(k, now) for k in shown],
            "next_after": rows[-1].key if len(rows) == limit else None,
        }

    def limit(self, request: Request, body: None) -> Any:
        key = _check_key(request.path_params["key"])
        [found] = self.app.limits(key)
        if found is None:
            raise ApiError(404, f"no record of key {key!r:.200}: no job has used it")
        return _key(found, self.store.now())

    def workers(self, request: Request, body: None) -> Any:
        now = self.store.now()
        return {"workers": [worker_to_dict(w, now) for w in self.app.workers()]}

    # -- actions ----------------------------------------------------------------------

    def jobs_action(self, request: Request, body: dict[str, Any]) -> Any:
        """requeue | cancel | delete | reschedule the jobs named by ``ids`` or by
        ``filter`` (reschedule also takes ``at`` or ``delay``)."""
        action = request.path_params["action"]
        if action not in ("requeue", "cancel", "delete", "reschedule"):
            raise ApiError(
                404, f"no job action {action!r:.40}: use requeue, cancel, delete or reschedule"
            )
        moving = action == "reschedule"
        _only(body, {"ids", "filter", *(("at", "delay") if moving else ())})
        run_at = self._run_at(body) if moving else None
        if ("ids" in body) == ("filter" in body):
            raise ApiError(400, 'give either "ids": [...] or "filter": {...}')
        if "ids" in body:
            ids = body["ids"]
            if not isinstance(ids, list) or not 1 <= len(ids) <= MAX_IDS:
                raise ApiError(400, f'"ids" must be a list of 1 to {MAX_IDS} job ids')
            try:
                where = JobFilter(ids=ids)
            except ConfigurationError as exc:
                raise ApiError(400, str(exc)) from None
        else:
            raw = body["filter"]
            if not isinstance(raw, dict):
                raise ApiError(400, '"filter" must be an object: {"queue": ..., "state": ...}')
            _only(raw, {"queue", "task", "key", "crawl", "limit_key", "state",
                        *(("after_id",) if moving else ())})  # fmt: skip
            where = job_filter(raw)
            after_id = raw.get("after_id", 0)
            if isinstance(after_id, bool) or not isinstance(after_id, int):
                raise ApiError(400, '"after_id" must be a whole number: a job id')
            if after_id:
                where = dataclasses.replace(where, after_id=_range("after_id", after_id))
        if action == "reschedule":
            return _reschedule(self.store, where, run_at)
        return _act(self.store, action, where)

    def _run_at(self, body: Mapping[str, Any]) -> float | None:
        """The time ``at`` (ISO 8601, UTC without an offset; or epoch seconds) or
        ``delay`` seconds from the store's now names; None (due now) for neither."""
        at, delay = body.get("at"), body.get("delay")
        if at is not None and delay is not None:
            raise ApiError(400, 'give "at" or "delay", not both')
        try:
            if isinstance(at, str):
                try:
                    moment = datetime.fromisoformat(at)
                except ValueError:
                    raise ApiError(
                        400, f'"at" {at!r:.60} is not ISO 8601, e.g. 2030-01-31T09:30:00Z'
                    ) from None
                at = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
            checked_delay, run_at, _ = check_when(delay, at, None, None)
        except ConfigurationError as exc:
            raise ApiError(400, str(exc)) from None
        if checked_delay:
            return self.store.now() + checked_delay
        return run_at

    def crawl_action(self, request: Request, body: dict[str, Any]) -> Any:
        crawl_id = _path_int(request, "id")
        action = request.path_params["action"]
        _only(body, set())
        change = {
            "pause": self.app.pause_crawl,
            "resume": self.app.resume_crawl,
            "cancel": self.app.cancel_crawl,
        }.get(action)
        if change is None:
            raise ApiError(404, f"no crawl action {action!r:.40}: use pause, resume or cancel")
        return _crawl(change(crawl_id))

    def limit_action(self, request: Request, body: dict[str, Any]) -> Any:
        """set | clear | block one key: {"key": ..., "max_running", "min_interval"} or
        {"key": ..., "seconds": ...}."""
        action = request.path_params["action"]
        if action not in ("set", "clear", "block"):
            raise ApiError(404, f"no limit action {action!r:.40}: use set, clear or block")
        allowed = {"set": {"key", "max_running", "min_interval"}, "block": {"key", "seconds"}}
        _only(body, allowed.get(action, {"key"}))
        key = body.get("key")
        if not isinstance(key, str):
            raise ApiError(400, '"key" must be a string: the limit key (a host)')
        _check_key(key)
        if action == "block":
            seconds = body.get("seconds")
            if isinstance(seconds, bool) or not isinstance(seconds, int | float):
                raise ApiError(400, '"seconds" must be a number: how long the key is blocked')
            self.app.block_key(key, seconds)
        else:
            max_running = body.get("max_running")
            min_interval = body.get("min_interval", 0.0)
            if isinstance(min_interval, bool) or not isinstance(min_interval, int | float):
                raise ApiError(400, '"min_interval" must be a number of seconds')
            if max_running is not None and (
                isinstance(max_running, bool) or not isinstance(max_running, int)
            ):
                raise ApiError(400, '"max_running" must be a whole number or null')
            limits = Limits(max_running=max_running, min_interval=float(min_interval))
            self.app.set_limit(
                key, max_running=limits.max_running, min_interval=limits.min_interval
            )
        [found] = self.app.limits(key)
        assert found is not None
        return _key(found, self.store.now())


def _act(store: Store, action: str, where: JobFilter) -> dict[str, Any]:
    """Apply a job action to at most MAX_BULK matching jobs."""
    if action == "requeue":
        if where.state not in (None, JobState.DEAD):
            raise ApiError(400, "only dead jobs are requeued: drop state= or give state=dead")
        bounded = _bounded(where, MAX_BULK + 1)
        changed = store.job_requeue(bounded)
        # requeue's limit counts candidates; ask once more to know if any are left
        more = bool(store.job_list(_bounded(where, 1, state=JobState.DEAD)))
        return {"action": action, "ids": changed[:MAX_IDS], "count": len(changed), "more": more}
    if action == "delete":
        count = store.job_purge(_bounded(where, MAX_BULK))
        more = bool(store.job_list(_bounded(where, 1, state=where.state)))
        finished = more and where.state in (None, JobState.DONE, JobState.DEAD)
        return {"action": action, "count": count, "more": finished}
    if where.state not in (None, *LIVE_STATES):
        raise ApiError(400, "only pending and running jobs are cancelled")
    ids: list[int] = []
    for state in (where.state,) if where.state else sorted(LIVE_STATES):
        if where.ids is not None:
            ids.extend(j.id for j in store.job_list(_bounded(where, MAX_IDS, state=state)))
        else:
            ids.extend(j.id for j in store.job_list(_bounded(where, MAX_BULK, state=state)))
    ids = sorted(set(ids))[:MAX_BULK]
    cancelled = store.job_cancel(ids) if ids else []
    return {"action": action, "ids": cancelled[:MAX_IDS], "count": len(cancelled),
            "more": len(ids) >= MAX_BULK}  # fmt: skip


def _reschedule(store: Store, where: JobFilter, run_at: float | None) -> dict[str, Any]:
    """Move at most MAX_BULK matching pending jobs to ``run_at`` (None: now)."""
    if where.state not in (None, JobState.PENDING):
        raise ApiError(400, "only pending jobs are rescheduled: drop state= or give state=pending")
    if where.ids is not None:
        ids = list(where.ids)
    else:
        pending = _bounded(where, MAX_BULK, state=JobState.PENDING)
        ids = [j.id for j in store.job_list(dataclasses.replace(pending, after_id=where.after_id))]
    moved = store.job_reschedule(ids, run_at) if ids else []
    more = where.ids is None and len(ids) >= MAX_BULK
    return {"action": "reschedule", "ids": moved[:MAX_IDS], "count": len(moved), "more": more,
            "next_after_id": ids[-1] if more else None}  # fmt: skip


def _range(name: str, value: int) -> int:
    if not 0 <= value <= MAX_EXACT:
        raise ApiError(400, f"{name}={value} is out of range: give 0 to {MAX_EXACT}")
    return value


def _bounded(where: JobFilter, limit: int, *, state: JobState | None = None) -> JobFilter:
    return JobFilter(
        ids=where.ids, queue=where.queue, task=where.task, key=where.key, crawl=where.crawl,
        limit_key=where.limit_key, state=state if state is not None else where.state,
        limit=limit,
    )  # fmt: skip


def _only(body: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(body) - allowed)
    if unknown:
        names = ", ".join(sorted(allowed)) or "nothing"
        raise ApiError(400, f"unknown field {unknown[0]!r:.40}; this action takes {names}")


def _check_key(key: str, empty: bool = False) -> str:
    if empty and key == "":
        return key
    try:
        from crawlq.crawls import check_placement

        check_placement(None, key, None)
    except ConfigurationError as exc:
        raise ApiError(400, str(exc)) from None
    return key


def _crawl(c: CrawlInfo) -> dict[str, object]:
    out = crawl_to_dict(c)
    ended = c.done + c.dead + c.cancelled
    total = ended + c.outstanding
    out["progress"] = progress(c)
    out["ended"] = ended
    out["total"] = total
    return out


def _key(k: KeyLimit, now: float) -> dict[str, object]:
    out = key_to_dict(k)
    out["blocked"] = _blocked(k, now)
    return out


def _blocked(k: KeyLimit, now: float) -> bool:
    return k.blocked_until is not None and k.blocked_until > now


async def _read_body(request: Request) -> dict[str, Any]:
    """The JSON object of an action's body: at most MAX_BODY_BYTES, application/json.

    A request without a token header must say it is JSON: a cross-site form cannot.
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json" and _token_of(request) is None:
        raise ApiError(415, "send the body as JSON, with Content-Type: application/json")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ApiError(413, f"the body is over {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise ApiError(413, f"the body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise ApiError(400, "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the body must be a JSON object")
    return value


def _no_constant(name: str) -> float:
    raise ValueError(name)


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": " ".join(message.split())[:2000]}, status_code=status)
