"""Every Redis key and channel name of the Redis store, built from one table.

``{p}`` is the store's prefix (URL option ``?prefix=``, default ``crawlq``), so several
apps share one server; ``{queue}`` is a queue name, ``{id}`` a job id, ``{priority}``
an integer, ``{crawl}`` a crawl id, ``{lkey}`` a limit key, ``{ckey}`` a cache key and
``{schedule}`` a periodic schedule's name.
All of one app's keys start with ``{p}:``.

Key layout::

    {p}:ids                   string  the last job id issued (INCR); ids never repeat
    {p}:seq                   string  a claim counter, mixed into lease tokens
    {p}:jobs                  zset    every job id, score = id: listing in id order
    {p}:job:{id}              hash    one job (below)
    {p}:followup:{id}         hash    the request remembered for a running keyed job:
                                      task, args, kwargs, sig, priority, run_at,
                                      max_attempts, lease_seconds, timeout, crawl_id,
                                      limit_key
    {p}:running               zset    running job ids, score = lease_expires_at
    {p}:queues                set     every queue that has or had jobs
    {p}:q:{queue}:prios       zset    the priorities that have pending jobs in the queue,
                                      member = the priority, score = -priority
    {p}:q:{queue}:p:{priority}
                              zset    the claim index: pending jobs of one priority
                                      (unkeyed ones and key fronts), score = run_at,
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
    {p}:q:{queue}:waiters     zset    workers blocked on their wake list for jobs of the
                                      queue (job_wait_begin.lua), score = when their
                                      registration runs out (Redis TIME)
    {p}:wwake:{worker}        list    a waiting worker's wake-ups: the earliest run_at of
                                      jobs that became pending in its queues; it BLPOPs
                                      it, and it expires a minute after the last push
    {p}:fwait:{id}            string  someone waits for the job to finish: the end of the
                                      wait (store seconds); expires a minute after it
    {p}:fdone:{id}            channel published (message: the state) when a job marked
                                      by {p}:fwait:{id} becomes done, dead or cancelled
    {p}:workers               zset    every registered worker id, score = started_at
    {p}:workers:alive         zset    alive worker ids, score = last_heartbeat (reap)
    {p}:workers:ended         zset    stopped and dead worker ids, score = stopped_at
                                      (prune)
    {p}:w:{worker}            hash    one worker: the fields of crawlq.jobs.WorkerInfo
                                      but id; queues as a JSON list; None fields absent
    {p}:wjobs:{worker}        set     ids of the running jobs the worker holds: added by
                                      the claim, removed by every way out of running
    {p}:duty:{duty}           hash    a maintenance lease: owner, expires_at
    {p}:crawlids              string  the last crawl id issued (INCR); never repeats
    {p}:crawls                zset    every crawl id, score = id: listing in id order
    {p}:crawl:{crawl}         hash    one crawl (below)
    {p}:seen:{crawl}          set     the crawl's seen set: raw 16-byte fingerprints
    {p}:cpend:{crawl}         set     ids of the crawl's pending jobs (any sub-state):
                                      pause, resume and cancel visit only these
    {p}:limit:{lkey}          hash    one limit key: max_running (absent = no cap),
                                      min_interval, source (none, default, override),
                                      blocked_until, running, last_start, pending
                                      (front + waiting + held), front (a job id)
    {p}:lwait:{lkey}          zset    the key's waiting jobs, score = -priority, member =
                                      16 hex digits of run_at (order-preserving IEEE
                                      encoding) then the id as in the pending zsets:
                                      the first member is the next front
    {p}:limitkeys             zset    every limit key name, score 0 (ZRANGEBYLEX lists)
    {p}:limitdefaults         hash    queue -> its default Limits as JSON
                                      {"max_running": n|null, "min_interval": s}
    {p}:rkeys:{crawl}         hash    the crawl's result keys: raw 16 bytes -> seq; its
                                      HLEN is the number of results and the last seq
                                      (seqs are 1, 2, 3, ... and never deleted)
    {p}:results:{crawl}       hash    the crawl's result records: seq -> record text
                                      (result_list reads seqs after+1 ... with HMGET)
    {p}:cache:{ckey}          hash    one cache entry: value, expires_at; it also
                                      expires natively (PEXPIRE) a minute after
                                      expires_at on the server's clock
    {p}:periodic:due          zset    unpaused periodic schedules, score = next_fire
    {p}:periodic:names        zset    every schedule name, score 0 (listing by name)
    {p}:periodic:s:{schedule} hash    one schedule: definition (JSON, crawlq.periodic),
                                      revision, paused (0/1), next_fire, last_fire,
                                      last_job, created_at, updated_at
    {p}:periodic:f:{schedule} hash    the schedule's ledger: fire time (%.17g) -> JSON
                                      [outcome, job id or false, fired_at]; HSETNX is
                                      the unique write of a fire time
    {p}:periodic:t:{schedule} zset    the ledger's fire times, score = fire time
    {p}:warned:{warning}      string  set (NX, one-day expiry) by the first opener to log
                                      a warning about the server (unchecked, snapshots,
                                      nothing): the others stay quiet until it expires

A job hash holds the fields of ``crawlq.jobs.Job`` except ``id`` (it is in the key); a
field that is None is absent. ``state`` is one of pending, running, done, dead,
cancelled. Numbers are decimal text that reads back as the exact same float (Lua writes
``%.17g``). ``args``, ``kwargs`` and ``result`` are JSON text. Keyed jobs also have
``sig``, a digest of their canonical arguments, so that the ``on_conflict`` rules can
compare arguments the way Python compares values (``1 == 1.0 == True``). A running job
whose key was scheduled again has ``has_followup`` = 1 while ``{p}:followup:{id}`` exists.
A job of a crawl has ``crawl_id``, a limited one ``limit_key`` (a follow-up keeps both).

Pending jobs are in one of three places, told by the job's ``sub`` field: absent = in
the claim index (``{p}:q:{queue}:p:{priority}``; for a keyed job that is its key's front,
with ``run_at`` gated to ``max(own run_at, last_start + min_interval, blocked_until)``
and the job's own run_at kept in ``own_run_at`` while the gate is later), ``waiting`` =
in ``{p}:lwait:{lkey}``, ``held`` = in a paused crawl (only in ``{p}:cpend:{crawl}``).
The queue counts hash has ``waiting`` and ``held`` beside ``pending`` (which includes
them).

A crawl hash: name, meta (JSON), state (running, paused, finished, cancelled),
on_finish (the spec row of store.py ``_spec_row`` as JSON, kwargs ``crawl_id`` added;
absent if none), on_finish_job, limits (JSON as in ``{p}:limitdefaults``; absent if
none), the counters pending, running, done, dead, cancelled, seen, then created_at and
finished_at. Counters change in the script that moves the job.

Memory (measured on Redis 7.0.15): a seen set of 100,000 random 16-byte fingerprints
has ``MEMORY USAGE`` 7,172,968 B, about 72 bytes per entry (a hashtable set: dict entry,
sds string and bucket), so 10 million seen URLs take about 720 MB of RAM.

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
    "waiters": "{p}:q:{queue}:waiters",
    "wait_list": "{p}:wwake:{worker}",
    "finish_wait": "{p}:fwait:{id}",
    "finish_channel": "{p}:fdone:{id}",
    "workers": "{p}:workers",
    "workers_alive": "{p}:workers:alive",
    "workers_ended": "{p}:workers:ended",
    "worker": "{p}:w:{worker}",
    "worker_jobs": "{p}:wjobs:{worker}",
    "duty": "{p}:duty:{duty}",
    "crawl_ids": "{p}:crawlids",
    "crawls": "{p}:crawls",
    "crawl": "{p}:crawl:{crawl}",
    "seen": "{p}:seen:{crawl}",
    "crawl_pending": "{p}:cpend:{crawl}",
    "limit": "{p}:limit:{lkey}",
    "limit_waiting": "{p}:lwait:{lkey}",
    "limit_keys": "{p}:limitkeys",
    "limit_defaults": "{p}:limitdefaults",
    "result_keys": "{p}:rkeys:{crawl}",
    "results": "{p}:results:{crawl}",
    "cache": "{p}:cache:{ckey}",
    "warned": "{p}:warned:{warning}",
    "periodic_due": "{p}:periodic:due",
    "periodic_names": "{p}:periodic:names",
    "periodic": "{p}:periodic:s:{schedule}",
    "periodic_fires": "{p}:periodic:f:{schedule}",
    "periodic_times": "{p}:periodic:t:{schedule}",
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
