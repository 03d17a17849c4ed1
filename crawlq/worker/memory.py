"""Resident memory of a process, for the worker's record and for recycling children."""

from __future__ import annotations

import os


def resident_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` (Linux /proc), or None if unknown."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def tree_resident_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` and of every process under it (a child's
    browser counts), or None if unknown. Shared pages are counted once per process."""
    own = resident_bytes(pid)
    if own is None:
        return None
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return own
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces
        parents.setdefault(int(fields[1]), []).append(int(entry))
    total, todo, seen = 0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        total += resident_bytes(current) or 0
        todo.extend(parents.get(current, ()))
    return total
