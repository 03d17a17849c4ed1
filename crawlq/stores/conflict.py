"""The ``on_conflict`` policies as pure functions, shared by every store.

A store calls these inside its own transaction (or script), so the decision and the
write are atomic; the functions themselves do no I/O.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace

from crawlq.jobs import ConflictPolicy, JobSpec
from crawlq.payload import dumps
from crawlq.types import JSONValue, Timestamp


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """The part of a job a later schedule request may change."""

    task: str
    args: list[JSONValue]
    kwargs: dict[str, JSONValue]
    priority: int
    run_at: Timestamp
    max_attempts: int
    lease_seconds: float
    timeout: float | None
    crawl: int | None = None
    limit_key: str | None = None

    @classmethod
    def from_spec(cls, spec: JobSpec, now: Timestamp) -> Request:
        return cls(
            task=spec.task,
            args=list(spec.args),
            kwargs=dict(spec.kwargs),
            priority=spec.priority,
            run_at=spec.run_at if spec.run_at is not None else now + spec.delay,
            max_attempts=spec.max_attempts,
            lease_seconds=spec.lease_seconds,
            timeout=spec.timeout,
            crawl=spec.crawl,
            limit_key=spec.limit_key,
        )

    def to_json(self) -> str:
        return dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Request:
        return cls(**json.loads(text))


def merge(existing: Request, incoming: Request, policy: ConflictPolicy) -> Request | None:
    """What the live request becomes under ``policy``; None when it stays unchanged.

    A request keeps its crawl and limit key whatever the policy: they are where the job
    is counted, not something a later request may move.
    """
    if policy is ConflictPolicy.KEEP:
        return None
    if policy is ConflictPolicy.REPLACE:
        merged = replace(incoming, crawl=existing.crawl, limit_key=existing.limit_key)
    else:
        merged = replace(
            existing,
            run_at=min(existing.run_at, incoming.run_at),
            priority=max(existing.priority, incoming.priority),
        )
    return None if merged == existing else merged
