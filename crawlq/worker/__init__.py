"""Workers: claim jobs, run them in a runtime, report what happened."""

from __future__ import annotations

from crawlq.worker.worker import Worker

__all__ = ["Worker"]
