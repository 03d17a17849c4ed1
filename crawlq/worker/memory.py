"""Resident memory of a process, for the worker's record and for recycling children."""

from __future__ import annotations


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
