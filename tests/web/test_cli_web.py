"""``crawlq web``: binds 127.0.0.1, refuses another address without a token, serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from click.testing import CliRunner

from crawlq import App
from crawlq.cli import cli
from tests import servers


def test_another_address_needs_a_token(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    App(url).open().close()
    result = CliRunner().invoke(cli, ["--store", url, "web", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "give --token TOKEN (or set CRAWLQ_WEB_TOKEN)" in result.output
    result = CliRunner().invoke(cli, ["--store", url, "web", "--read-token", "r"])
    assert result.exit_code == 2 and "needs an admin --token" in result.output


def test_serves_with_the_token_from_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    App(url).open().close()
    port = servers.free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
    env["CRAWLQ_WEB_TOKEN"] = "s3cret"
    argv = [sys.executable, "-m", "crawlq", "--store", url, "web", "--host", "0.0.0.0"]
    with subprocess.Popen([*argv, "--port", str(port)], env=env, stderr=subprocess.PIPE) as proc:
        try:
            servers.wait_for_port(port, 20)
            base = f"http://127.0.0.1:{port}"
            assert httpx.get(f"{base}/api/stats").status_code == 401
            ok = httpx.get(f"{base}/api/stats", headers={"X-Crawlq-Token": "s3cret"})
            assert ok.status_code == 200 and ok.json() == []
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(10)
            assert proc.stderr is not None
            err = proc.stderr.read().decode()
    assert "Traceback" not in err


def test_a_missing_store_is_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'none.db'}"
    result = CliRunner().invoke(cli, ["--store", url, "web"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert not (tmp_path / "none.db").exists()
