"""Private PostgreSQL and Redis servers for the tests, started from the installed binaries.

Each runs on a random loopback port with its data in a temporary directory, so tests can
stop, kill and restart it without touching any other server. When the binaries are
missing, tests that need them skip with a message saying what to install, except in CI
(``CI`` set), where a missing server is a failure.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unavailable(what: str, how: str) -> None:
    """Skip on a laptop, fail in CI: a skipped store in CI is not a pass."""
    message = f"{what} is not installed: {how}"
    if os.environ.get("CI"):
        pytest.fail(f"{message} (CI must run every store)")
    pytest.skip(message)


def wait_for_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def _pg_bindir() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


class PrivatePostgres:
    """A PostgreSQL cluster of our own (initdb + pg_ctl). PostgreSQL refuses to run as
    root, so as root the cluster belongs to, and runs as, the ``postgres`` user."""

    def __init__(self) -> None:
        bindir = _pg_bindir()
        if bindir is None:
            unavailable("PostgreSQL", "apt-get install postgresql (initdb and pg_ctl)")
        assert bindir is not None
        self.bindir = bindir
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="crawlq-pg-"))
        self.data = self.root / "data"
        self.run_as: str | None = None
        if os.geteuid() == 0:
            self.run_as = "postgres"
            user = pwd.getpwnam(self.run_as)
            os.chown(self.root, user.pw_uid, user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        self.start()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        argv = [str(self.bindir / tool), *args]
        if self.run_as:
            argv = ["runuser", "-u", self.run_as, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, cwd=self.root)

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root} "
            "-c fsync=off -c full_page_writes=off -c max_connections=200"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )
        wait_for_port(self.port, 30)

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def reload(self) -> None:
        """Read pg_hba.conf and the settings again."""
        self._run("pg_ctl", "-D", str(self.data), "reload")

    def restart(self, mode: str = "immediate") -> None:
        """Stop (by default like a crash: no checkpoint) and start again, same port."""
        self.stop(mode)
        self.start()

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class PrivateRedis:
    """A redis-server of our own, with an append-only file so a restart keeps every
    acknowledged write, as a production queue server must."""

    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            unavailable("Redis", "apt-get install redis-server")
        assert binary is not None
        self.binary = binary
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="crawlq-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [
            self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.root), "--appendonly", "yes", "--appendfsync", "everysec",
            "--save", "", "--maxmemory-policy", "noeviction", "--daemonize", "no",
            "--logfile", str(self.root / "log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, 30)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)
        self.proc = None

    def restart(self, sig: int = signal.SIGKILL) -> None:
        """Stop (by default killed, like a crash) and start again on the same port."""
        self.stop(sig)
        self.start()

    def close(self) -> None:
        self.stop(signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)


_SERVERS: dict[str, PrivatePostgres | PrivateRedis] = {}


def _close_all() -> None:
    for server in _SERVERS.values():
        server.close()


def postgres() -> PrivatePostgres:
    """The test session's private PostgreSQL, started on first use, closed at exit."""
    if "postgres" not in _SERVERS:
        if not _SERVERS:
            import atexit

            atexit.register(_close_all)
        _SERVERS["postgres"] = PrivatePostgres()
    server = _SERVERS["postgres"]
    assert isinstance(server, PrivatePostgres)
    return server


def redis() -> PrivateRedis:
    """The test session's private redis-server, started on first use, closed at exit."""
    if "redis" not in _SERVERS:
        if not _SERVERS:
            import atexit

            atexit.register(_close_all)
        _SERVERS["redis"] = PrivateRedis()
    server = _SERVERS["redis"]
    assert isinstance(server, PrivateRedis)
    return server


def isolated_name(directory: Path, prefix: str) -> str:
    """A short name unique to a test's directory: a PostgreSQL schema or a Redis prefix."""
    import hashlib

    return prefix + hashlib.sha1(str(directory).encode()).hexdigest()[:16]
