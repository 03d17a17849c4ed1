"""Waiting for one job to finish on PostgreSQL (``crawlq.stores.finished``): LISTEN on
``crawlq_finished``, register the job and read its state (``finished.sql``), then wait
for the NOTIFY its finishing transaction sends (migration 0009)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from crawlq.jobs import Job
from crawlq.stores._sqlfile import load_queries
from crawlq.stores.finished import MARK_MARGIN
from crawlq.stores.postgres.core import translate
from crawlq.stores.states import FINISHED
from crawlq.types import JobId

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import DictRow

    from crawlq.stores.postgres.store import PostgresStore

F = load_queries("crawlq.stores.postgres", "finished.sql")


def wait_finished(store: PostgresStore, job_id: JobId, timeout: float) -> Job | None:
    """``PostgresStore.job_wait_finished``."""
    deadline = time.monotonic() + timeout
    payload = f"{store.settings.schema}:{job_id}"
    with (
        translate("waiting for a job to finish"),
        store._listening(F["listen"], F["unlisten"]) as conn,
    ):
        with conn.transaction():
            args = {"id": job_id, "timeout": timeout, "margin": MARK_MARGIN}
            row = conn.execute(F["register"], args).fetchone()
        if row is not None and row["state"] not in FINISHED:
            _await_notify(conn, payload, deadline)
    return store.job_get(job_id)


def _await_notify(conn: Connection[DictRow], payload: str, deadline: float) -> None:
    """Return at the first notification with ``payload``, or at ``deadline``."""
    while (remaining := deadline - time.monotonic()) > 0:
        for notify in conn.notifies(timeout=remaining):
            if notify.payload == payload:
                return
