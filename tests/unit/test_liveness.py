"""Same-machine liveness (crawlq.worker.liveness): a worker's process identity, and when
a registered worker counts as gone: never a live process, never one of another machine or
pid namespace; a killed one, a zombie, and a reused pid (another start time) are gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from crawlq.app import App
from crawlq.jobs import WorkerInfo, WorkerState
from crawlq.stores.base import ClaimParams
from crawlq.worker.liveness import gone, identity, pid_space, reclaim, status

pytestmark = pytest.mark.skipif(pid_space() is None, reason="needs Linux /proc")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_identity_names_the_pid_space_the_pid_and_its_start_time() -> None:
    mine = identity(os.getpid())
    assert mine is not None
    space = pid_space()
    assert space is not None and mine.startswith(space + ":")
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert space.startswith(f"linux:{boot}:")
    pid, start = mine.removeprefix(space + ":").split(":")
    assert int(pid) == os.getpid()
    assert int(start) == status(os.getpid())[1]  # type: ignore[index]
    assert identity(os.getpid()) == mine  # stable
    assert not gone(mine)


def test_a_live_process_is_not_gone(child: subprocess.Popen[bytes]) -> None:
    theirs = identity(child.pid)
    assert theirs is not None and theirs != identity(os.getpid())
    assert not gone(theirs)


def test_a_killed_process_is_gone_even_as_a_zombie(child: subprocess.Popen[bytes]) -> None:
    theirs = identity(child.pid)
    child.send_signal(signal.SIGKILL)
    while (found := status(child.pid)) is not None and found[0] != "Z":
        pass  # not yet reaped by us: a zombie, which runs nothing
    assert gone(theirs)
    child.wait()
    assert status(child.pid) is None
    assert gone(theirs)


def test_a_reused_pid_with_another_start_time_is_gone() -> None:
    mine = identity(os.getpid())
    assert mine is not None
    head, _, start = mine.rpartition(":")
    assert gone(f"{head}:{int(start) - 1}")  # this pid, but a process started earlier


def test_a_worker_of_another_machine_or_namespace_is_never_judged(
    child: subprocess.Popen[bytes],
) -> None:
    theirs = identity(child.pid)
    assert theirs is not None
    child.kill()
    child.wait()
    _, boot, namespace, pid, start = theirs.split(":")
    other_boot = "00000000-0000-0000-0000-000000000000"
    for other in (
        f"linux:{other_boot}:{namespace}:{pid}:{start}",  # another machine, or a reboot
        f"linux:{boot}:1:{pid}:{start}",  # another container of this kernel
    ):
        assert not gone(other)
    assert gone(theirs)
    for nothing in (None, "", "linux", "linux:x:y:z:w", "darwin:1:2:3:4", "garbage:::"):
        assert not gone(nothing)


def register(app: App, worker_id: str, host: str, process: str | None) -> None:
    info = WorkerInfo(
        id=worker_id, host=host, pid=1, process=process, queues=("q",), runtime="thread",
        concurrency=1,
    )  # fmt: skip
    app.store.worker_register(info)


def test_reclaim_reaps_only_gone_workers_of_this_host(
    app: App, child: subprocess.Popen[bytes]
) -> None:
    """Through the store's reap: their running jobs are pending again at once."""
    mine = identity(os.getpid())
    theirs = identity(child.pid)
    child.kill()
    child.wait()
    register(app, "me", "box", mine)
    register(app, "crashed", "box", theirs)
    register(app, "same-pid-elsewhere", "other-box", theirs)  # another hostname
    register(app, "unknown", "box", None)  # not Linux: waits for its heartbeat
    register(app, "alive", "box", identity(os.getpid()))
    register(app, "stopped", "box", theirs)
    app.store.worker_stop("stopped", done=0, failed=0)
    app.task(name="q")(lambda ctx: None).schedule()
    [job] = app.store.job_claim(ClaimParams(queues=["q"], worker_id="crashed"))

    assert reclaim(app.store, host="box", me="me") == ["crashed"]
    states = {w.id: w.state for w in app.workers()}
    assert states == {
        "me": WorkerState.ALIVE,
        "crashed": WorkerState.DEAD,
        "same-pid-elsewhere": WorkerState.ALIVE,
        "unknown": WorkerState.ALIVE,
        "alive": WorkerState.ALIVE,
        "stopped": WorkerState.STOPPED,
    }
    assert app.get_job(job.id).state == "pending"  # type: ignore[union-attr]
    assert reclaim(app.store, host="box", me="me") == []
