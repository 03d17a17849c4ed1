"""``JobStorage``: the finished Scrapyd jobs of every server, read from the store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from zope.interface import implementer

from crawlq.scrapyd.config import ScrapydSettings, app_for, project_of

from scrapyd.interfaces import IJobStorage  # isort: skip  (after the check in queue.py)
from scrapyd.launcher import ScrapyProcessProtocol  # isort: skip


@implementer(IJobStorage)
class JobStorage:
    """``jobstorage = crawlq.scrapyd.JobStorage``: the last ``finished_to_keep`` jobs
    that ran, on any server, newest first. A job is finished once it is done, dead, or
    was cancelled while running; a failed run that will be retried is not (it is
    pending again). Each item is a Scrapyd ``ScrapyProcessProtocol`` with ``project``,
    ``spider``, ``job``, ``start_time`` and ``end_time`` (of its last run), plus
    ``state`` (done, dead, cancelled), ``node`` (the crawlq worker id of the server that
    ran it last) and ``crawlq_id``.
    """

    def __init__(self, config: Any) -> None:
        self.settings = ScrapydSettings.from_config(config)
        self.app = app_for(self.settings)
        self.finished_to_keep = int(config.getint("finished_to_keep", 100))

    def add(self, job: Any) -> None:
        """Nothing to do: crawlq's launcher has recorded the job's end in the store."""

    def list(self) -> list[Any]:
        return list(iter(self))  # not list(self): that asks __len__, which asks list()

    def __len__(self) -> int:
        return len(self.list())

    def __iter__(self) -> Iterator[Any]:
        store = self.app.store
        queues = [s.queue for s in store.queue_stats() if project_of(s.queue) is not None]
        for job in store.job_recent(queues, self.finished_to_keep):
            if job.started_at is None or job.finished_at is None:
                continue  # cancelled before it ever ran: never a process
            project = project_of(job.queue)
            item = ScrapyProcessProtocol(
                project, job.task, str(job.kwargs.get("_job", job.id)), env={}, args=[]
            )
            item.start_time = datetime.fromtimestamp(job.started_at)
            item.end_time = datetime.fromtimestamp(job.finished_at)
            item.state = job.state.value
            item.node = job.worker_id
            item.crawlq_id = job.id
            yield item
