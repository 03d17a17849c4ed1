"""``crawlq web``: serve the JSON API, the dashboard and /metrics (needs crawlq[web])."""

from __future__ import annotations

import os

import click

from crawlq.cli.common import open_app, target_options

ENV_TOKEN = "CRAWLQ_WEB_TOKEN"
ENV_READ_TOKEN = "CRAWLQ_WEB_READ_TOKEN"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


@click.command()
@target_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option(
    "--token",
    metavar="TOKEN",
    help=f"The admin token: every request needs a token, every action this one. "
    f"[env var: {ENV_TOKEN}]",
)
@click.option(
    "--read-token",
    metavar="TOKEN",
    help=f"A token that only reads (API, dashboard, /metrics). [env var: {ENV_READ_TOKEN}]",
)
def web(host: str, port: int, token: str | None, read_token: str | None) -> None:
    """Serve the dashboard, the JSON API (/api/) and Prometheus metrics (/metrics).

    Binds 127.0.0.1 unless --host says otherwise; another address needs --token. Send
    the token as the X-Crawlq-Token header (the dashboard asks for it once).

    \b
    Example:
      crawlq --store sqlite:///jobs.db web --port 8000
      CRAWLQ_WEB_TOKEN=s3cret crawlq web --host 0.0.0.0
    """
    token = token or os.environ.get(ENV_TOKEN) or None
    read_token = read_token or os.environ.get(ENV_READ_TOKEN) or None
    if host not in LOCAL_HOSTS and token is None:
        raise click.UsageError(
            f"--host {host} lets other machines in: give --token TOKEN (or set {ENV_TOKEN}), "
            "or bind --host 127.0.0.1"
        )
    if read_token is not None and token is None:
        raise click.UsageError("--read-token needs an admin --token too")
    try:
        import uvicorn

        from crawlq.web import create_app
    except ImportError:
        raise click.ClickException(
            "crawlq web needs the web extra: pip install 'crawlq[web]'"
        ) from None
    with open_app() as app:
        click.echo(f"crawlq web on http://{host}:{port}/ (Ctrl-C stops)", err=True)
        uvicorn.run(
            create_app(app, token=token, read_token=read_token),
            host=host,
            port=port,
            log_level="warning",
        )
