"""The PostgreSQL store's connections: a small pool whose callers connect themselves.

psycopg_pool connects in background threads and, after a failed attempt, waits 1, 2, 4,
8 ... s before the next one, logging a warning each time: after a 30 s outage a call
waited up to half a minute more for a connection, and a missing database cost
``pool_timeout`` and four warnings before the error. Here a call that finds no idle
connection opens one in its own thread, and a failed attempt is judged once
(``_permanent``):

- permanent (no such database or role, a bad password, ``pg_hba.conf`` refuses; and,
  when the store opens, a refused connection or an unknown host): ``StoreError`` at once,
  saying it is not retried;
- transient (refused or reset while the server restarts, "starting up", too many
  clients, a timeout): tried again every ``RETRY_EVERY`` s until ``pool_timeout``, then
  ``StoreUnavailable``. So a call works within ``RETRY_EVERY`` of the server accepting
  connections again, however long it was away.

Nothing is logged: the caller gets one error that says what was wrong.
"""

from __future__ import annotations

import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow

from crawlq.exceptions import StoreError, StoreUnavailable

Conn = psycopg.Connection[DictRow]

RETRY_EVERY = 0.1
"""Seconds between two attempts to connect while the server refuses (transient)."""

_PERMANENT = (
    "does not exist",  # database "x" / role "x" does not exist
    "authentication failed",  # password, ident, peer, SCRAM
    "no password supplied",
    "no pg_hba.conf entry",
    "permission denied",  # no CONNECT privilege on the database
    "not currently accepting connections",  # ALLOW_CONNECTIONS false
)
"""Parts of libpq's message for a refusal that connecting again will not change."""

_PERMANENT_AT_START = (
    "connection refused",
    "failed to resolve host",
    "could not translate host name",
    "no such file or directory",  # a Unix socket that is not there
)
"""Refusals that are permanent when the store opens (nothing listens there: a wrong
host or port, or the server is not running) and transient later (a restart)."""


def _reason(exc: psycopg.OperationalError) -> str:
    """libpq's reason on one line, without its 'connection to server at ... failed:'
    prefix and its hint lines."""
    text = str(exc).removeprefix("connection failed: ")
    last = text.rsplit(" failed: ", 1)[-1]
    first_line = last.strip().splitlines()[0] if last.strip() else text
    return " ".join(first_line.replace("FATAL:", "").split())


def _permanent(exc: psycopg.OperationalError, *, starting: bool) -> str | None:
    """How to fix a failed attempt to connect that is permanent (see the module
    docstring); None if it is transient."""
    text = str(exc).lower()
    if any(part in text for part in _PERMANENT):
        return "check the database, user and password in the store URL"
    if starting and any(part in text for part in _PERMANENT_AT_START):
        return "check the host and port in the store URL, and that PostgreSQL runs there"
    return None


def describe(conninfo: str) -> str:
    """``user@host:port/dbname`` of a connection string, without its password."""
    params = conninfo_to_dict(conninfo)
    host = params.get("host") or params.get("hostaddr") or "localhost"
    user = f"{params['user']}@" if params.get("user") else ""
    return f"{user}{host}:{params.get('port') or 5432}/{params.get('dbname') or ''}"


def _socket_readable(conn: Conn) -> bool:
    """An idle connection has nothing to read unless the server closed it or spoke."""
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([conn.fileno()], [], [], 0)[0])
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def unwell(conn: Conn) -> bool:
    """Whether an idle connection is closed, or the server closed it (a restart, an
    administrator). A round trip only for a connection that looks unwell."""
    if conn.closed or conn.broken:
        return True
    if not _socket_readable(conn):
        return False
    try:
        conn.execute("")
    except psycopg.Error:
        return True
    return False


class Connections:
    """At most ``size`` connections lent at once; idle ones are kept for the next call.
    Thread-safe."""

    def __init__(
        self, connect: Callable[[], Conn], *, conninfo: str, size: int, timeout: float
    ) -> None:
        self._connect = connect
        self._where = describe(conninfo)
        self._timeout = timeout
        self._size = size
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[Conn] = []
        self._lock = threading.Lock()
        self._closed = False

    def open(self) -> None:
        """Connect once, to say at once what is wrong if the server cannot be used."""
        self._give_back(self.connect(time.monotonic() + self._timeout, starting=True))

    def connect(self, deadline: float, *, starting: bool = False) -> Conn:
        """A new connection, trying again after transient refusals until ``deadline``
        (no retry if it has passed)."""
        started = time.monotonic()
        while True:
            try:
                return self._connect()
            except psycopg.OperationalError as exc:
                fix = _permanent(exc, starting=starting)
                if fix is not None:
                    raise StoreError(
                        f"cannot connect to PostgreSQL at {self._where}: {_reason(exc)} "
                        f"(permanent, not retried: {fix})"
                    ) from exc
                now = time.monotonic()
                if now + RETRY_EVERY >= deadline:
                    tried = f", retried for {now - started:.1f} s" if now > started + 0.05 else ""
                    raise StoreUnavailable(
                        f"cannot connect to PostgreSQL at {self._where}: {_reason(exc)} "
                        f"(transient{tried}; calls retry for up to pool_timeout, "
                        f"{self._timeout:g} s)"
                    ) from exc
            time.sleep(RETRY_EVERY)

    @contextmanager
    def borrow(self) -> Iterator[Conn]:
        """A connection for one call: an idle one that is well, else a new one."""
        deadline = time.monotonic() + self._timeout
        if not self._slots.acquire(timeout=self._timeout):
            raise StoreUnavailable(
                f"all {self._size} connections of this PostgreSQL store stayed in use for "
                f"{self._timeout:g} s: raise pool_size, or pool_timeout"
            )
        try:
            conn = self._take_idle() or self.connect(deadline)
            try:
                yield conn
            finally:
                self._give_back(conn)
        finally:
            self._slots.release()

    def _take_idle(self) -> Conn | None:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not unwell(conn):
                return conn
            conn.close()

    def _give_back(self, conn: Conn) -> None:
        idle = not conn.closed and conn.info.transaction_status == TransactionStatus.IDLE
        with self._lock:
            if idle and not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
