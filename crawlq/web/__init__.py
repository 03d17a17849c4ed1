"""``crawlq web``: the JSON API, the dashboard and Prometheus ``/metrics`` in one ASGI app.

``create_app(app_or_store)`` returns a Starlette app; mount it in your own ASGI app, or
run it with ``crawlq web``. Needs the extra: ``pip install 'crawlq[web]'``.
"""

from __future__ import annotations

from pathlib import Path

try:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import FileResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError("crawlq.web needs the web extra: pip install 'crawlq[web]'") from exc

import anyio.to_thread

from crawlq.app import App
from crawlq.stores.base import Store
from crawlq.web.api import Api, ApiError, Tokens, error

STATIC = Path(__file__).parent / "static"

__all__ = ["create_app"]


def create_app(
    app_or_store: App | Store | str,
    *,
    token: str | None = None,
    read_token: str | None = None,
) -> Starlette:
    """The web app on ``app_or_store`` (an App, an open Store, or a store URL).

    ``token`` is the admin token: with it, every request needs a token and every action
    needs this one. ``read_token`` only reads (API, dashboard data and ``/metrics``).
    Without tokens everyone who reaches the port may do everything: bind 127.0.0.1.
    """
    if read_token is not None and token is None:
        raise ValueError("a read_token needs an admin token too (token=...)")
    app = app_or_store if isinstance(app_or_store, App) else App(app_or_store)
    tokens = Tokens(admin=token, read=read_token)
    api = Api(app, tokens)

    async def metrics(request: Request) -> Response:
        from crawlq.web.metrics import render

        try:
            tokens.check(request, write=False)
        except ApiError as exc:
            return error(exc.status, exc.message)
        body = await anyio.to_thread.run_sync(lambda: render(app))
        return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def health(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"no route {request.url.path[:200]!r}; see /api/ in docs/web.md")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        verb = "POST" if request.method == "GET" else "GET"
        return error(405, f"{request.method} is not allowed here; use {verb}")

    async def failed(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error ({type(exc).__name__}); the server log has details")

    routes = [
        Route("/", index),
        Route("/health", health),
        Route("/metrics", metrics),
        *api.routes(),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    web = Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_allowed, Exception: failed},
    )
    web.state.crawlq_app = app
    return web
