"""Jobs the store leased to this worker that it never received.

A claim whose reply is lost (the connection dropped after its transaction committed: a
server stopped or restarted mid-call) leaves the jobs it leased running under this
worker's id, with tokens nobody holds, until their lease expires (``lease=300`` keeps
them away for five minutes). So after a claim call fails, the worker lists the running
jobs the store says it holds (``leased_to``) and gives back those it does not hold, once
every outcome it has is recorded (``Worker._give_back_orphans``). A give-back carries
the job's token, so one whose lease has meanwhile ended changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from crawlq.jobs import Job, JobState
from crawlq.stores.base import JobFilter, JobStore

PAGE = 500
"""Running jobs read per listing call."""


def leased_to(store: JobStore, worker_id: str, queues: Sequence[str]) -> list[Job]:
    """The running jobs of ``queues`` the store says ``worker_id`` holds."""
    found: list[Job] = []
    for queue in dict.fromkeys(queues):
        after = 0
        while True:
            where = JobFilter(queue=queue, state=JobState.RUNNING, after_id=after, limit=PAGE)
            page = store.job_list(where)
            found.extend(job for job in page if job.worker_id == worker_id)
            if len(page) < PAGE:
                break
            after = page[-1].id
    return found
