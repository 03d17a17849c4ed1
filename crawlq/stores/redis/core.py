"""The Redis store's settings, error translation, how arguments are written for the
scripts, and the call every part of the store (``jobs.py``, ``queues.py``,
``waiting.py``, ``workers.py``, ``crawls.py``, ``storage.py``) runs a script through.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import redis
from redis.client import PubSub

from crawlq.crawls import no_such_crawl
from crawlq.exceptions import ConfigurationError
from crawlq.stores.checks import crawl_closed, driver_errors
from crawlq.stores.redis import keys
from crawlq.stores.redis.lua import LuaRunner
from crawlq.types import Timestamp


@dataclass(frozen=True, kw_only=True, slots=True)
class RedisSettings:
    """How the Redis store connects.

    - ``url``: ``redis://[user:password@]host:port/db`` (or ``rediss://`` for TLS).
    - ``prefix``: the first part of every key, so several apps share a server
      (default ``crawlq``).
    - ``require_persistence``: refuse a server that persists nothing (default False:
      log a warning).
    - ``socket_timeout``: seconds a command may take before ``StoreUnavailable`` (10).
    - ``socket_connect_timeout``: seconds to connect (5).
    - ``functions``: run the scripts as one Redis Functions library when the server has
      them (7.0 and later; default True); False sends them with ``EVALSHA``, as on Redis
      6, for a proxy or an ACL that refuses ``FUNCTION`` (``crawlq.stores.redis.lua``).
    - ``warn``: log the warnings about a server that may lose jobs (default True), each at
      most once a day per store: the first opener on any machine to set the store's
      ``{p}:warned:{warning}`` key (``SET NX`` with a one-day expiry) logs it. False (a
      caller that only looks) logs none; ``require_persistence`` still refuses.
    """

    url: str
    prefix: str = keys.DEFAULT_PREFIX
    require_persistence: bool = False
    socket_timeout: float = 10.0
    socket_connect_timeout: float = 5.0
    functions: bool = True
    warn: bool = True

    def __post_init__(self) -> None:
        if not self.prefix or any(c.isspace() for c in self.prefix):
            raise ConfigurationError(
                f"Redis key prefix {self.prefix!r} must be a non-empty word, e.g. ?prefix=crawlq"
            )
        if self.socket_timeout <= 0 or self.socket_connect_timeout <= 0:
            raise ConfigurationError("socket_timeout and socket_connect_timeout must be positive")


_TRANSIENT = (
    redis.exceptions.OutOfMemoryError,  # maxmemory reached: frees up as jobs are pruned
    redis.exceptions.ReadOnlyError,  # a replica during a failover
    redis.exceptions.TryAgainError,
)
"""Redis errors other than connection trouble that a later call may not meet."""


def _transient(exc: Exception) -> str | None:
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return "Redis could not be reached"
    if isinstance(exc, _TRANSIENT):  # the same call may work later: retried, not given up
        return "Redis is unavailable"
    return None


def translate(operation: str) -> AbstractContextManager[None]:
    """Turn driver errors into crawlq errors, keeping the cause."""
    return driver_errors("Redis", operation, redis.RedisError, _transient)


def number(value: float) -> str:
    """A number as the scripts read it (the gate checked it is finite)."""
    return repr(float(value))


def opt(value: str | None) -> str:
    """'' for None, '=' + value otherwise (the scripts' optional-string convention)."""
    return "" if value is None else "=" + value


def opt_number(value: float | None) -> str:
    return "" if value is None else "=" + number(value)


def now_arg(now: Timestamp | None) -> str:
    """``now`` as every script takes it: '' for the server's clock."""
    return "" if now is None else number(now)


def refused(reply: Any) -> None:
    """Raise for a script's refusal ``[kind, crawl, state]`` (closed_crawl, prelude)."""
    if reply and isinstance(reply[0], str):
        kind, crawl, state = reply
        if kind == "crawl_not_found":
            raise no_such_crawl(crawl)
        raise crawl_closed(crawl, state)


class RedisCore:
    """What every part of the Redis store runs its scripts and commands through."""

    settings: RedisSettings
    _prefix: str
    _client: redis.Redis
    _lua: LuaRunner
    _hand_off: bool
    """Waits hand jobs over with the wake-up (``waiting.py``; Redis 6 and later)."""
    _local: threading.local
    _pubsubs: list[PubSub]
    _pubsubs_lock: threading.Lock

    def _run(self, operation: str, script: str, args: Sequence[str]) -> Any:
        with translate(operation):
            return self._lua(script, [self._prefix, *args])

    def now(self) -> Timestamp:
        with translate("reading the server's clock"):
            seconds, micros = self._client.time()
        return float(seconds) + float(micros) / 1_000_000

    def _next_due_and_now(self, queues: Sequence[str]) -> tuple[float | None, float]:
        first, now = self._run("finding the next due job", "job_next_due", ["", *queues])
        return (float(first) if first else None), float(now)
