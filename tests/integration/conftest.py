"""Helpers for tests that run crawlq in real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests import servers


class Processes:
    """Starts crawlq processes in a working directory and cleans them up."""

    def __init__(self, workdir: Path, store_url: str) -> None:
        self.workdir = workdir
        self.store_url = store_url
        self.started: list[subprocess.Popen[str]] = []

    def write_module(self, name: str, source: str) -> None:
        (self.workdir / f"{name}.py").write_text(textwrap.dedent(source))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
        env["CRAWLQ_STORE"] = self.store_url
        env["PYTHONPATH"] = str(self.workdir)
        return env

    def argv(self, *args: str) -> list[str]:
        """The command line of ``python -m crawlq ARGS``."""
        return [sys.executable, "-m", "crawlq", *args]

    def crawlq(self, *args: str, log: str | None = None) -> subprocess.Popen[str]:
        """Start ``python -m crawlq ARGS``; stderr goes to ``log`` in the workdir."""
        return self.spawn([sys.executable, "-m", "crawlq", *args], log=log)

    def python(self, *args: str, log: str | None = None) -> subprocess.Popen[str]:
        return self.spawn([sys.executable, *args], log=log)

    def spawn(self, argv: list[str], log: str | None = None) -> subprocess.Popen[str]:
        target = self.workdir / (log or "/dev/null")
        with open(target, "w") as stderr:  # the child keeps its own copy
            proc = subprocess.Popen(
                argv,
                cwd=self.workdir,
                env=self.env(),
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                text=True,
            )
        self.started.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


def _sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'jobs.db'}"


def _postgres_url(directory: Path) -> str:
    return f"{servers.postgres().url}?schema={servers.isolated_name(directory, 't_')}"


def _redis_url(directory: Path) -> str:
    return f"{servers.redis().url}?prefix={servers.isolated_name(directory, 't')}"


STORE_URLS: dict[str, Callable[[Path], str]] = {
    "sqlite": _sqlite_url,
    "postgres": _postgres_url,
    "redis": _redis_url,
}
"""Every store the process-level tests run against: name -> URL for a fresh test dir."""


@pytest.fixture(params=sorted(STORE_URLS))
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL of each kind, isolated to this test."""
    return STORE_URLS[request.param](tmp_path)


@pytest.fixture
def procs(tmp_path: Path, store_url: str) -> Iterator[Processes]:
    processes = Processes(tmp_path, store_url)
    yield processes
    processes.stop_all()


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)
