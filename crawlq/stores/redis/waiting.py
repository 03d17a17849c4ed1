"""The Redis store's waits for work.

- ``job_wait``: subscribe to the queues' wake-up channels, then look for due jobs, then
  listen until the next one is due.
- ``job_wait_claim`` (a worker's wait): register as a waiter of the queues and read the
  first due time (``job_wait_begin.lua``), then block on the worker's own wake list with
  the claim pipelined behind (``job_wait_end.lua``, ``LuaRunner.after_pop``): a job that
  becomes pending wakes the worker and is claimed for it in one round trip.
"""

from __future__ import annotations

import time
from contextlib import suppress

import redis
from redis.client import PubSub

from crawlq.exceptions import StoreError, StoreUnavailable
from crawlq.jobs import Job
from crawlq.stores.base import ClaimParams, WaitParams
from crawlq.stores.codec import jobs_from_reply
from crawlq.stores.gate import JobGate
from crawlq.stores.redis import keys
from crawlq.stores.redis.core import RedisCore, now_arg, number, translate

SUBSCRIBE_TIMEOUT = 5.0
HAND_OFF_SINCE = (6, 0)
"""The first Redis version whose BLPOP takes a timeout in fractions of a second."""
REGISTRATION_GRACE = 1.0
"""Seconds a waiter stays registered beyond its wait, so that the registration outlasts
the BLPOP, which starts a round trip after it (the claim behind the pop deregisters)."""
SHORTEST_BLOCK = 0.001
"""A wait shorter than this (a job is due now) claims without blocking."""


class RedisWaiting(RedisCore, JobGate):
    """``job_wait``: pub/sub wake-ups, one connection per waiting thread;
    ``job_wait_claim``: wake lists, the claim in the wake-up's round trip."""

    def _job_wait_claim(self, params: ClaimParams, timeout: float) -> list[Job]:
        """Register, then BLPOP the wake list with the claim pipelined behind it. On
        Redis 5 (BLPOP takes whole seconds) and on a server that refuses ``INFO``: the
        gate's default (``job_wait``, then a claim)."""
        if not self._hand_off:
            return super()._job_wait_claim(params, timeout)
        # the reply must come back before the socket gives up on it
        timeout = max(0.0, min(timeout, self.settings.socket_timeout / 2))
        claim = [now_arg(params.now), params.worker_id, str(params.limit), *params.queues]
        args = [params.worker_id, number(timeout + REGISTRATION_GRACE), *params.queues]
        first, now = self._run("waiting for jobs", "job_wait_begin", ["", *args])
        if first:
            timeout = max(0.0, min(timeout, float(first) - float(now)))
        if timeout < SHORTEST_BLOCK:
            return jobs_from_reply(self._run("claiming jobs", "job_wait_end", claim))
        wake_list = keys.key("wait_list", self._prefix, worker=params.worker_id)
        with translate("waiting for jobs"):
            reply = self._lua.after_pop(wake_list, timeout, "job_wait_end", [self._prefix, *claim])
        return jobs_from_reply(reply)

    def job_wait(self, params: WaitParams) -> None:
        """Subscribe to the queues' wake-up channels, then return at once if a job is
        due; else wait until the next run_at (the earliest pending one, or one a wake-up
        announces) or the timeout, whichever is first.

        The subscription lasts only as long as the wait, so the server never buffers
        wake-ups for a worker that is busy running jobs."""
        deadline = time.monotonic() + params.timeout
        if not params.queues:
            time.sleep(max(0.0, params.timeout))
            return
        channels = {keys.wake_channel(self._prefix, q) for q in params.queues}
        pubsub = self._pubsub()
        try:
            with translate("waiting for jobs"):
                self._subscribe(pubsub, channels)
                try:
                    next_due, now = self._next_due_and_now(params.queues)
                    offset = now - time.monotonic()  # server clock - this host's monotonic
                    if next_due is not None:
                        deadline = min(deadline, next_due - offset)
                    self._listen(pubsub, channels, deadline, offset)
                finally:
                    pubsub.unsubscribe()  # type: ignore[no-untyped-call]
        except StoreError:
            self._drop_pubsub(pubsub)
            raise

    def _pubsub(self) -> PubSub:
        """This thread's pub/sub connection: made on its first wait, and made again when
        the last one was closed meanwhile (e.g. by a server restart)."""
        pubsub: PubSub | None = getattr(self._local, "pubsub", None)
        if pubsub is not None and not self._healthy(pubsub):
            self._drop_pubsub(pubsub)
            pubsub = None
        if pubsub is None:
            pubsub = self._client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis-py 8
            self._local.pubsub = pubsub
            with self._pubsubs_lock:
                self._pubsubs.append(pubsub)
        return pubsub

    @staticmethod
    def _healthy(pubsub: PubSub) -> bool:
        """Between two waits nothing but the last wait's leftovers may arrive: read them;
        anything readable after that is the server closing the connection."""
        try:
            while pubsub.get_message(timeout=0.0) is not None:
                pass
            connection = pubsub.connection
            return connection is None or not connection.can_read(timeout=0)
        except (redis.RedisError, OSError):
            return False

    def _drop_pubsub(self, pubsub: PubSub) -> None:
        """Forget a pub/sub connection that failed; the next wait makes a new one."""
        self._local.pubsub = None
        with self._pubsubs_lock:
            if pubsub in self._pubsubs:
                self._pubsubs.remove(pubsub)
        with suppress(redis.RedisError, OSError):
            pubsub.close()

    @staticmethod
    def _subscribe(pubsub: PubSub, channels: set[str]) -> None:
        """Subscribe and read up to the server's confirmations, so that the due check
        that follows misses no wake-up. What came before them (wake-ups from before this
        wait, the last wait's unsubscribe) is skipped: the due check covers it."""
        pubsub.subscribe(*sorted(channels))
        unconfirmed = set(channels)
        deadline = time.monotonic() + SUBSCRIBE_TIMEOUT
        while unconfirmed:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StoreUnavailable(
                    f"Redis did not confirm a SUBSCRIBE within {SUBSCRIBE_TIMEOUT} s"
                )
            message = pubsub.get_message(timeout=remaining)
            if message is not None and message["type"] == "subscribe":
                unconfirmed.discard(message["channel"])

    @staticmethod
    def _listen(pubsub: PubSub, channels: set[str], deadline: float, offset: float) -> None:
        """Wait until ``deadline`` (monotonic), or until a wake-up's job is due; a wake-up
        for a later job moves the deadline earlier if it is due before it."""
        while (remaining := deadline - time.monotonic()) > 0:
            message = pubsub.get_message(timeout=remaining)
            if message is None or message["type"] != "message":
                continue
            if message["channel"] not in channels:
                continue
            try:
                due = float(message["data"]) - offset
            except ValueError:
                return  # not one of ours: returning early is always allowed
            deadline = min(deadline, due)
