"""Many Scrapyd servers, one crawlq queue: ``crawlq.scrapyd`` gives Scrapyd (1.5 and
1.6) a spider queue, poller, launcher and job storage on one crawlq store, so that N
servers form one pool. In each server's ``scrapyd.conf``::

    [scrapyd]
    spiderqueue  = crawlq.scrapyd.SpiderQueue
    poller       = crawlq.scrapyd.Poller
    launcher     = crawlq.scrapyd.Launcher
    jobstorage   = crawlq.scrapyd.JobStorage
    crawlq_store = postgresql://...      ; or $CRAWLQ_STORE

See docs/scrapyd.md.
"""

from __future__ import annotations

from crawlq.scrapyd.queue import SpiderQueue  # first: it says which extra is missing

from crawlq.scrapyd.jobstorage import JobStorage  # isort: skip
from crawlq.scrapyd.launcher import Launcher  # isort: skip
from crawlq.scrapyd.poller import Poller  # isort: skip

__all__ = ["JobStorage", "Launcher", "Poller", "SpiderQueue"]
