"""Same-machine liveness: a worker that starts returns at once the jobs of the workers
registered from its machine whose process has gone (``kill -9``, a crash), instead of
waiting ``DEAD_AFTER`` seconds for their heartbeat to lapse.

A worker registers the identity of its process, ``linux:<boot id>:<pid namespace>:<pid>:
<start>``, where start is the process's start time in clock ticks since boot
(``/proc/<pid>/stat``, field 22). The boot id and the pid namespace name the pid space
the pid belongs to: another machine, a reboot, or another container (even one with the
same hostname) is another space, and its workers are never judged from here. In the same
space, a worker is gone when no process with its pid has its start time: a pid reused by
a new process started at another time, and a zombie is gone too. Elsewhere than on Linux
the identity is None and nothing is judged: those workers wait for their heartbeat.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from crawlq.config import DEAD_AFTER
from crawlq.jobs import WorkerState
from crawlq.stores.base import JobStore

PROC = Path("/proc")


@functools.cache
def pid_space() -> str | None:
    """``linux:<boot id>:<pid namespace inode>`` of this process; None if unknown."""
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(PROC / "self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    inode = namespace.partition("[")[2].rstrip("]")
    if not boot or not inode.isdigit():
        return None
    return f"linux:{boot}:{inode}"


def status(pid: int) -> tuple[str, int] | None:
    """The state letter (``R``, ``S``, ``Z``...) and start time (clock ticks since boot)
    of the process ``pid``; None if ``/proc`` shows no such process."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # fields[0] is field 3, the state
    return fields[0], int(fields[19])


def identity(pid: int) -> str | None:
    """The identity a worker registers for the process ``pid`` (see the module)."""
    space = pid_space()
    found = status(pid)
    if space is None or found is None:
        return None
    return f"{space}:{pid}:{found[1]}"


def gone(process: str | None) -> bool:
    """True only if ``process`` (an identity) is of this pid space and no process with
    its pid and start time runs (a zombie does not run). A process that ``/proc`` hides
    from us (``hidepid``) counts as running."""
    head, _, start = (process or "").rpartition(":")
    space, _, pid = head.rpartition(":")
    if not space or space != pid_space() or not pid.isdigit() or not start.isdigit():
        return False
    found = status(int(pid))
    if found is not None:
        state, start_now = found
        return state in ("Z", "X") or start_now != int(start)
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it exists, but is not ours to see
    return False


def reclaim(store: JobStore, *, host: str, me: str) -> list[str]:
    """Declare dead, through ``JobStore.worker_reap``, the alive workers registered from
    this machine (``host`` and pid space) whose process has gone, other than ``me``,
    which returns their jobs at once. Returns the ids declared dead (workers whose
    heartbeat is overdue included)."""
    alive = (WorkerState.ALIVE, WorkerState.LOST)
    ended = [
        w.id
        for w in store.worker_list()
        if w.state in alive and w.id != me and w.host == host and gone(w.process)
    ]
    if not ended:
        return []
    return store.worker_reap(dead_after=DEAD_AFTER, gone=ended)
