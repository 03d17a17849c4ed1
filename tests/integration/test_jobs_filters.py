"""``crawlq jobs --key / --crawl / --limit-key``: the JobFilter fields the web API uses."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from crawlq import App
from crawlq.cli import cli


def test_jobs_filters_by_crawl_key_and_limit_key(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = App(url)

    @app.task(name="t", queue="q")
    def t(ctx: object) -> None:
        pass

    t.delay()
    crawl = app.crawl("site", [t.spec()]).id
    keyed = t.schedule(key="k1", limit_key="a.example").job_id
    app.close()

    def ids(*args: str) -> list[int]:
        result = CliRunner().invoke(cli, ["--store", url, "jobs", "--json", *args])
        assert result.exit_code == 0, result.output
        return [j["id"] for j in json.loads(result.output)]

    assert ids("--key", "k1") == [keyed] == ids("--limit-key", "a.example")
    assert ids("--crawl", str(crawl)) == [2]
