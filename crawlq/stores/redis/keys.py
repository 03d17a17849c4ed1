"""Every Redis key and channel name of the Redis store, built from one table.

``{p}`` is the store's prefix (URL option ``?prefix=``, default ``crawlq``), so several
apps share one server; ``{queue}`` is a queue name, ``{id}`` a job id and ``{priority}``
an integer. All of one app's keys start with ``{p}:``.

Key layout::

    {p}:ids                   string  the last job id issued (INCR); ids never repeat
    {p}:seq                   string  a claim counter, mixed into lease tokens
    {p}:jobs                  zset    every job id, score = id: listing in id order
    {p}:job:{id}              hash    one job (below)
    {p}:followup:{id}         hash    the request remembered for a running keyed job:
                                      task, args, kwargs, sig, priority, run_at,
                                      max_attempts, lease_seconds, timeout
    {p}:running               zset    running job ids, score = lease_expires_at
    {p}:queues                set     every queue that has or had jobs
    {p}:q:{queue}:prios       zset    the priorities that have pending jobs in the queue,
                                      member = the priority, score = -priority
    {p}:q:{queue}:p:{priority}
                              zset    pending jobs of one priority, score = run_at,
                                      member = the id as "<length letter><digits>"
                                      ("a"+1 digit ... "p"+16 digits) so equal run_at
                                      sort by id: claim order is prios, then this zset
    {p}:q:{queue}:keys        hash    unique key -> id of the live (pending or running)
                                      job holding it
    {p}:q:{queue}:counts      hash    state -> number of the queue's jobs in it
    {p}:q:{queue}:done        zset    done job ids, score = finished_at (prune, stats)
    {p}:q:{queue}:dead        zset    dead job ids, score = finished_at
    {p}:q:{queue}:cancelled   zset    cancelled job ids, score = finished_at
    {p}:wake:{queue}          channel published when jobs of the queue become pending;
                                      the message is the earliest run_at among them
    {p}:workers               zset    every registered worker id, score = started_at
    {p}:workers:alive         zset    alive worker ids, score = last_heartbeat (reap)
    {p}:workers:ended         zset    stopped and dead worker ids, score = stopped_at
                                      (prune)
    {p}:w:{worker}            hash    one worker: the fields of crawlq.jobs.WorkerInfo
                                      but id; queues as a JSON list; None fields absent
    {p}:wjobs:{worker}        set     ids of the running jobs the worker holds: added by
                                      the claim, removed by every way out of running
    {p}:duty:{duty}           hash    a maintenance lease: owner, expires_at

A job hash holds the fields of ``crawlq.jobs.Job`` except ``id`` (it is in the key); a
field that is None is absent. ``state`` is one of pending, running, done, dead,
cancelled. Numbers are decimal text that reads back as the exact same float (Lua writes
``%.17g``). ``args``, ``kwargs`` and ``result`` are JSON text. Keyed jobs also have
``sig``, a digest of their canonical arguments, so that the ``on_conflict`` rules can
compare arguments the way Python compares values (``1 == 1.0 == True``). A running job
whose key was scheduled again has ``has_followup`` = 1 while ``{p}:followup:{id}`` exists.

The Lua scripts build the same names with functions generated from ``TEMPLATES``
(``lua_key_builders``), so this table is the only place a key name is spelled out.
"""

from __future__ import annotations

import json
from string import Formatter

TEMPLATES: dict[str, str] = {
    "ids": "{p}:ids",
    "seq": "{p}:seq",
    "jobs": "{p}:jobs",
    "job": "{p}:job:{id}",
    "followup": "{p}:followup:{id}",
    "running": "{p}:running",
    "queues": "{p}:queues",
    "prios": "{p}:q:{queue}:prios",
    "level": "{p}:q:{queue}:p:{priority}",
    "keys": "{p}:q:{queue}:keys",
    "counts": "{p}:q:{queue}:counts",
    "finished": "{p}:q:{queue}:{state}",
    "wake": "{p}:wake:{queue}",
    "workers": "{p}:workers",
    "workers_alive": "{p}:workers:alive",
    "workers_ended": "{p}:workers:ended",
    "worker": "{p}:w:{worker}",
    "worker_jobs": "{p}:wjobs:{worker}",
    "duty": "{p}:duty:{duty}",
}
"""Key (and channel) name templates; ``finished`` takes state done, dead or cancelled."""

DEFAULT_PREFIX = "crawlq"


def key(name: str, prefix: str, **parts: object) -> str:
    """The name of one key, e.g. ``key("job", "crawlq", id=7)`` -> ``crawlq:job:7``."""
    return TEMPLATES[name].format(p=prefix, **parts)


def wake_channel(prefix: str, queue: str) -> str:
    """The pub/sub channel announcing new pending jobs of ``queue``."""
    return key("wake", prefix, queue=queue)


def _lua_builder(name: str, template: str) -> str:
    """``K.name = function(a, b) return PREFIX .. ":x:" .. a .. ":" .. b end``."""
    pieces: list[str] = []
    params: list[str] = []
    for literal, field, _spec, _conv in Formatter().parse(template):
        if literal:
            pieces.append(json.dumps(literal))
        if field == "p":
            pieces.append("PREFIX")
        elif field is not None:
            params.append(field)
            pieces.append(field)
    return f"K.{name} = function({', '.join(params)}) return {' .. '.join(pieces)} end"


def lua_key_builders() -> str:
    """Lua source defining ``K.<name>(...)`` for every template; part of the prelude."""
    lines = ["local K = {}"]
    lines.extend(_lua_builder(name, template) for name, template in TEMPLATES.items())
    return "\n".join(lines) + "\n"
