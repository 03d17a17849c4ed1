"""Real Scrapyd servers on one crawlq store, for the tests and bench/bench_scrapyd.py.

``build_egg(dir)`` builds (setuptools ``bdist_egg``) a tiny generated Scrapy project whose
spider ``ledger`` appends one JSON line to the file named by its ``ledger`` argument,
``{"job": its _job, "node": the server, "pid", "t": start time}``, then sleeps ``sleep``
seconds (its argument), waits until the file named by ``hold`` exists (if given), and
exits 0 (or exits with ``fail`` if that argument is set).
``Pool`` starts N ``scrapyd`` processes, each in its own directory with its own
scrapyd.conf (random 127.0.0.1 port, ``max_proc``), all on one store (crawlq's classes)
or, with ``store=None``, on Scrapyd's own per-server queues.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.servers import free_port, wait_for_port

SETTINGS = """\
BOT_NAME = "ledgerbot"
SPIDER_MODULES = ["ledgerbot.spiders"]
ROBOTSTXT_OBEY = False
REMOTE_CONTROL_ENABLED = False
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
"""

SPIDER = """\
import json
import os
import sys
import time

import scrapy


class LedgerSpider(scrapy.Spider):
    name = "ledger"

    async def start(self):
        line = {"job": getattr(self, "_job", None), "node": os.environ.get("LEDGER_NODE"),
                "pid": os.getpid(), "t": time.time(),
                "crawl": self.settings.get("CRAWLQ_CRAWL") or getattr(self, "crawlq_crawl", None)}
        with open(self.ledger, "a") as ledger:
            ledger.write(json.dumps(line) + "\\n")
        time.sleep(float(getattr(self, "sleep", 0)))
        deadline = time.time() + 120
        hold = getattr(self, "hold", None)
        while hold and not os.path.exists(hold) and time.time() < deadline:
            time.sleep(0.05)
        if getattr(self, "fail", None):
            sys.exit(int(self.fail))
        return
        yield
"""

SETUP = """\
from setuptools import setup, find_packages

setup(name="ledgerbot", version="1.0", packages=find_packages(),
      entry_points={"scrapy": ["settings = ledgerbot.settings"]})
"""


def build_egg(directory: Path) -> bytes:
    """Generate the ``ledgerbot`` project in ``directory`` and return its egg's bytes."""
    package = directory / "ledgerbot"
    (package / "spiders").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(SETTINGS)
    (package / "spiders" / "__init__.py").write_text("")
    (package / "spiders" / "ledger.py").write_text(SPIDER)
    (directory / "setup.py").write_text(SETUP)
    (directory / "scrapy.cfg").write_text("[settings]\ndefault = ledgerbot.settings\n")
    subprocess.run(
        [sys.executable, "setup.py", "-q", "bdist_egg", "--dist-dir", "dist"],
        cwd=directory,
        check=True,
        capture_output=True,
    )
    [egg] = (directory / "dist").glob("*.egg")
    return egg.read_bytes()


def _multipart(fields: dict[str, str], files: dict[str, bytes]) -> tuple[bytes, str]:
    boundary = "crawlqboundary7f3a"
    parts: list[bytes] = []
    for name, value in fields.items():
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'
        parts.append(f"{head}{value}\r\n".encode())
    for name, data in files.items():
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; '
            f'filename="{name}.egg"\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        parts.append(head.encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


class Server:
    """One scrapyd process in its own directory."""

    def __init__(self, root: Path, name: str, options: dict[str, str]) -> None:
        self.name = name
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.options = options
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        conf = {
            "bind_address": "127.0.0.1",
            "http_port": str(self.port),
            "node_name": self.name,
            "eggs_dir": "eggs",
            "logs_dir": "logs",
            "dbs_dir": "dbs",
            **self.options,
        }
        body = "".join(f"{k} = {v}\n" for k, v in conf.items())
        (self.dir / "scrapyd.conf").write_text("[scrapyd]\n" + body)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRAWLQ_")}
        env["LEDGER_NODE"] = self.name
        with open(self.dir / "scrapyd.out", "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scrapyd"],
                cwd=self.dir,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill -9 takes the spiders too
            )
        wait_for_port(self.port, 60)

    def kill(self) -> None:
        """kill -9 of the server and of its spider processes."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def log(self) -> str:
        return (self.dir / "scrapyd.out").read_text(errors="replace")

    # -- the API -------------------------------------------------------------------

    def call(self, endpoint: str, data: dict[str, Any] | None = None, **query: str) -> Any:
        url = f"{self.url}/{endpoint}"
        body: bytes | None = None
        headers: dict[str, str] = {}
        if data is not None:
            eggs = {k: v for k, v in data.items() if isinstance(v, bytes)}
            fields = {k: str(v) for k, v in data.items() if not isinstance(v, bytes)}
            if eggs:
                body, headers["Content-Type"] = _multipart(fields, eggs)
            else:
                body = urllib.parse.urlencode(fields).encode()
        elif query:
            url += "?" + urllib.parse.urlencode(query)
        request = urllib.request.Request(url, data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def schedule(self, project: str, spider: str = "ledger", **args: Any) -> str:
        answer = self.call("schedule.json", {"project": project, "spider": spider, **args})
        assert answer["status"] == "ok", answer
        return str(answer["jobid"])


class Pool:
    """N Scrapyd servers; ``store=None`` gives each Scrapyd's own SQLite queue."""

    def __init__(
        self,
        root: Path,
        n: int,
        *,
        store: str | None,
        max_proc: int = 2,
        lease: float = 3.0,
        poll_interval: float = 0.2,
    ) -> None:
        options = {"max_proc": str(max_proc), "poll_interval": str(poll_interval)}
        if store is not None:
            options.update(
                spiderqueue="crawlq.scrapyd.SpiderQueue",
                poller="crawlq.scrapyd.Poller",
                launcher="crawlq.scrapyd.Launcher",
                jobstorage="crawlq.scrapyd.JobStorage",
                crawlq_store=store,
                crawlq_lease=str(lease),
            )
        self.servers = [Server(root, f"s{i + 1}", options) for i in range(n)]
        self.ledger = root / "ledger.jsonl"

    def start(self) -> None:
        for server in self.servers:
            server.start()

    def deploy(self, egg: bytes, *projects: str) -> None:
        for server in self.servers:
            for project in projects:
                answer = server.call(
                    "addversion.json", {"project": project, "version": "1.0", "egg": egg}
                )
                assert answer["status"] == "ok", answer

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def lines(self) -> list[dict[str, Any]]:
        if not self.ledger.exists():
            return []
        return [json.loads(line) for line in self.ledger.read_text().splitlines() if line]

    def wait_for(self, count: int, timeout: float) -> list[dict[str, Any]]:
        """Wait until the ledger has ``count`` lines; returns them."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.lines()
            if len(lines) >= count:
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{len(lines)} of {count} jobs ran in {timeout} s; server logs:\n"
                    + "\n".join(s.log()[-3000:] for s in self.servers)
                )
            time.sleep(0.1)


def idle(server: Server) -> bool:
    status = server.call("daemonstatus.json")
    return bool(status["pending"] == 0 and status["running"] == 0)
