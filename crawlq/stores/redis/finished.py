"""Waiting for one job to finish on Redis (``crawlq.stores.finished``): SUBSCRIBE to
``{p}:fdone:{id}``, mark the job and read its state (``job_finish_wait.lua``), then wait
for the message the script that finishes it publishes (``finish`` in the prelude)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from crawlq.exceptions import StoreError
from crawlq.jobs import Job
from crawlq.stores.finished import MARK_MARGIN
from crawlq.stores.redis import keys
from crawlq.stores.redis.core import translate
from crawlq.stores.states import FINISHED
from crawlq.types import JobId

if TYPE_CHECKING:
    from redis.client import PubSub

    from crawlq.stores.redis.store import RedisStore


def wait_finished(store: RedisStore, job_id: JobId, timeout: float) -> Job | None:
    """``RedisStore.job_wait_finished``."""
    deadline = time.monotonic() + timeout
    channel = keys.key("finish_channel", store._prefix, id=job_id)
    pubsub = store._pubsub()
    try:
        with translate("waiting for a job to finish"):
            store._subscribe(pubsub, {channel})
            try:
                args = ["", str(job_id), repr(timeout), repr(MARK_MARGIN)]
                state = store._run("waiting for a job to finish", "job_finish_wait", args)
                if state and state not in FINISHED:
                    _await_message(pubsub, channel, deadline)
            finally:
                pubsub.unsubscribe()  # type: ignore[no-untyped-call]
    except StoreError:
        store._drop_pubsub(pubsub)
        raise
    return store.job_get(job_id)


def _await_message(pubsub: PubSub, channel: str, deadline: float) -> None:
    """Return at the first message on ``channel``, or at ``deadline``."""
    while (remaining := deadline - time.monotonic()) > 0:
        message = pubsub.get_message(timeout=remaining)
        if message is not None and message["type"] == "message" and message["channel"] == channel:
            return
