"""The Redis store: many workers on many machines share one redis-server.

Every change that touches more than one key is one Lua script (``scripts/*.lua``; one
function library on Redis 7+, see ``lua.py``), so no two clients ever interleave:
claims, leases, uniqueness, counts and the dead-letter queue are atomic, and so are a
crawl's counters and finish and a limit key's front (the shared Lua of crawls and limits
is in ``scripts/prelude.lua``). The store's clock is the server's ``TIME``. The key
layout is in ``keys.py``.

A script runs at most once per call: the client does not retry on its own (a retried
script whose first reply was lost would run twice). A lost connection raises
``StoreUnavailable``; the next call reconnects, and a library or script the server does
not have is loaded again (``lua.py``).
"""

from __future__ import annotations

import logging
import threading
from contextlib import suppress
from typing import cast

from crawlq.exceptions import ConfigurationError
from crawlq.jobs import Job
from crawlq.stores.base import Capabilities
from crawlq.stores.redis import keys
from crawlq.types import JobId

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.client import PubSub
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ConfigurationError(
        "the Redis store needs the redis package: pip install 'crawlq[redis]'"
    ) from exc

from crawlq.stores.redis.core import RedisSettings, translate
from crawlq.stores.redis.crawl_delete import CrawlDeleteMixin
from crawlq.stores.redis.crawls import RedisCrawls
from crawlq.stores.redis.finished import wait_finished
from crawlq.stores.redis.jobs import RedisJobs
from crawlq.stores.redis.lua import FUNCTIONS_SINCE, SCRIPTS, LuaRunner, server_version
from crawlq.stores.redis.periodic import RedisPeriodic
from crawlq.stores.redis.queues import RedisQueues
from crawlq.stores.redis.storage import RedisStorage
from crawlq.stores.redis.waiting import HAND_OFF_SINCE, RedisWaiting
from crawlq.stores.redis.workers import RedisWorkers

logger = logging.getLogger("crawlq.stores.redis")


WARN_EVERY = 24 * 3600
"""Seconds between two logs of one warning about the server, per store (``_warn``)."""


class RedisStore(
    CrawlDeleteMixin,
    RedisPeriodic,
    RedisJobs,
    RedisQueues,
    RedisWaiting,
    RedisWorkers,
    RedisCrawls,
    RedisStorage,
):
    """The Redis store. Thread-safe: each call borrows a pooled connection.

    Each part of the store is a module of its own (``jobs.py``, ``queues.py``,
    ``waiting.py``, ``workers.py``, ``crawls.py``, ``storage.py``) behind the gate of its
    part (``crawlq.stores.gate``); this class connects, loads the scripts and checks the
    server's settings."""

    capabilities = Capabilities(notify=True, multi_host=True)

    def __init__(self, settings: RedisSettings) -> None:
        self.settings = settings
        self._prefix = settings.prefix
        self._local = threading.local()
        self._pubsubs: list[PubSub] = []
        self._pubsubs_lock = threading.Lock()
        try:
            self._client: redis.Redis = redis.Redis.from_url(
                settings.url,
                decode_responses=True,
                retry=Retry(NoBackoff(), 0),
                socket_timeout=settings.socket_timeout,
                socket_connect_timeout=settings.socket_connect_timeout,
            )
        except ValueError as exc:
            raise ConfigurationError(f"bad Redis URL {settings.url!r}: {exc}") from exc
        try:
            with translate("checking the server's settings"):
                version = server_version(self._client)
                self._lua = LuaRunner(
                    self._client, settings.functions and version >= FUNCTIONS_SINCE
                )
                self._hand_off = version >= HAND_OFF_SINCE
                self._check_server()
        except BaseException:
            self._client.close()
            raise

    def _check_server(self) -> None:
        """Refuse a server that may evict keys; warn about one that persists nothing."""
        try:
            config: dict[str, str] = {}
            for name in ("maxmemory-policy", "appendonly", "save"):
                config.update(cast("dict[str, str]", self._client.config_get(name)))
        except redis.ResponseError as exc:
            self._warn(
                "unchecked",
                f"could not check the Redis server's settings (CONFIG GET failed: {exc}): make "
                "sure it has maxmemory-policy noeviction and appendonly yes, or jobs can be lost",
            )
            return
        policy = config.get("maxmemory-policy", "noeviction")
        if policy != "noeviction":
            raise ConfigurationError(
                f"the Redis server at {self._where()} has maxmemory-policy {policy}: it may "
                "evict crawlq's keys and lose jobs. Run `CONFIG SET maxmemory-policy "
                "noeviction` (and set `maxmemory-policy noeviction` in redis.conf so it "
                "survives a restart)"
            )
        self._check_persistence(config.get("appendonly", "no"), config.get("save", ""))

    def _check_persistence(self, appendonly: str, save: str) -> None:
        if appendonly == "yes":
            return
        if save.strip():
            self._warn(
                "snapshots",
                f"the Redis server at {self._where()} saves snapshots only (appendonly no): a "
                "crash loses the jobs acknowledged since the last snapshot. Run `CONFIG SET "
                "appendonly yes` and set `appendonly yes` in redis.conf",
            )
            return
        message = (
            f'the Redis server at {self._where()} persists nothing (appendonly no, save ""): '
            "a restart loses every job. Run `CONFIG SET appendonly yes` and set "
            "`appendonly yes` in redis.conf"
        )
        if self.settings.require_persistence:
            raise ConfigurationError(message + " (refused because of ?require_persistence=1)")
        self._warn("nothing", message)

    def _warn(self, warning: str, message: str) -> None:
        """Log ``message`` if this store has not logged ``warning`` in the last day."""
        if not self.settings.warn:
            return
        name = keys.key("warned", self._prefix, warning=warning)
        try:
            first = self._client.set(name, "1", nx=True, ex=WARN_EVERY)
        except redis.ResponseError:  # a read-only replica, or out of memory: warn anyway
            first = True
        if first:
            logger.warning("%s (this warning shows once a day per store)", message)

    def _where(self) -> str:
        kwargs = self._client.connection_pool.connection_kwargs
        return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"

    def job_wait_finished(self, job_id: JobId, timeout: float) -> Job | None:
        return wait_finished(self, job_id, timeout)  # crawlq.stores.finished

    def close(self) -> None:
        with self._pubsubs_lock:
            pubsubs, self._pubsubs = self._pubsubs, []
        for pubsub in pubsubs:
            with suppress(redis.RedisError, OSError):
                pubsub.close()
        self._lua.close()
        self._client.close()


__all__ = ["SCRIPTS", "RedisSettings", "RedisStore"]
