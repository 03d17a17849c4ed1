"""Resources a task keeps on its event loop between jobs, closed with the loop.

An ``async def`` task may keep something bound to the running event loop for the next
jobs on the same loop (the crawler keeps its HTTP connection pool). It registers how to
close it with ``at_loop_close``; the runtime that owns the loop awaits
``close_loop_resources()`` before closing it: the asyncio runtime when the worker stops,
the thread runtime after each job (it runs each ``async def`` job in a loop of its own).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable

__all__ = ["at_loop_close", "close_loop_resources"]

logger = logging.getLogger("crawlq.worker")

_CLOSERS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, list[Callable[[], Awaitable[None]]]
] = weakref.WeakKeyDictionary()


def at_loop_close(closer: Callable[[], Awaitable[None]]) -> None:
    """Await ``closer()`` when the running event loop is closed by its runtime."""
    _CLOSERS.setdefault(asyncio.get_running_loop(), []).append(closer)


async def close_loop_resources() -> None:
    """Await every closer registered on the running loop (errors are logged)."""
    closers = _CLOSERS.pop(asyncio.get_running_loop(), [])
    for closer in closers:
        try:
            await closer()
        except Exception:
            logger.exception("closing a resource of the event loop failed")
