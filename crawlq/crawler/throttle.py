"""Adaptive politeness (``crawlq crawl --autothrottle``): each host's ``min_interval`` set
from its response times and error rate, for every worker at once.

The interval lives where the fixed one does: the host's limit key in the store
(``limit_set``), so the store spaces the host's fetches on every worker together and
``crawlq limit show`` shows it. Each process keeps, per host, a smoothed delay and error
rate from the pages it fetched (no store access per page), and from them the interval it
thinks right. Scrapy's AutoThrottle idea: a server that needs
``latency`` seconds per response gets one request every ``latency / target`` seconds, so
about ``target`` are in flight on average::

    delay    = (delay + latency / target) / 2, within [floor, max_interval]
    interval = delay * (1 + 10 * error_rate), within [floor, max_interval]

- ``delay`` starts at ``start``; each fetch's ``latency`` (its time per request,
  redirect hops counting as requests) moves it half way. A response that is not 2xx or
  3xx (or no response) never lowers it: errors often come back faster than pages.
- ``error_rate``: the share of network errors, deadlines, 429 and 5xx among the host's
  recent responses (each response moves it a tenth of the way): 10% errors double the
  interval, a host failing every request gets up to eleven times it.
- ``floor``: the crawl's ``delay`` and the host's robots.txt ``Crawl-delay``; the interval
  is never below it, even when it is above ``max_interval``.

A process writes the interval to the store only when it differs by more than 10% from the
value it last read or wrote there, at most once per host every 2 seconds. It reads the
key just before and starts again from the interval found there (``HostThrottle.rebase``:
the samples of every worker moved it), folds the new sample in, and writes only if that
still differs by more than 10%; the key's ``max_running`` is kept. Fetches that reached
no host (refused addresses, invalid URLs, DNS failures) are not samples.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawlq.exceptions import ConfigurationError, StoreUnavailable
from crawlq.payload import check_seconds

if TYPE_CHECKING:
    from crawlq.app import App
    from crawlq.crawler.fetch import FetchResult

__all__ = ["HostThrottle", "Sample", "Throttle", "ThrottleSettings", "sample_of"]

logger = logging.getLogger("crawlq.crawler")

_MAX_TARGET = 10_000.0
_ERROR_WEIGHT = 0.1
_ERROR_FACTOR = 10.0
_CHANGE = 0.1  # a write needs a change of more than this fraction of the stored value
_WRITE_EVERY = 2.0  # seconds, per host and process
_HOSTS = 4096  # hosts remembered per process
_NO_REQUEST = ("refused:", "invalid URL", "dns:")


@dataclass(frozen=True, kw_only=True, slots=True)
class ThrottleSettings:
    """``--autothrottle-target``, ``--autothrottle-start`` and ``--autothrottle-max``,
    checked (ConfigurationError naming the crawl setting)."""

    target: float = 1.0
    """Requests in flight per host to aim at, on average, across every worker."""
    start: float = 5.0
    """The interval a host starts with (never below the crawl's delay)."""
    max_interval: float = 60.0
    """The longest interval set (the crawl's delay and a Crawl-delay still win)."""

    def __post_init__(self) -> None:
        target = self.target
        if (
            isinstance(target, bool)
            or not isinstance(target, int | float)
            or not 0 < target <= _MAX_TARGET  # False for NaN
        ):
            raise ConfigurationError(
                f"autothrottle_target must be a number of requests above 0 and at most "
                f"{_MAX_TARGET:.0f}, not {target!r}"
            )
        object.__setattr__(self, "target", float(target))
        object.__setattr__(self, "start", check_seconds("autothrottle_start", self.start))
        object.__setattr__(
            self, "max_interval", check_seconds("autothrottle_max", self.max_interval)
        )

    def bounded(self, interval: float, floor: float) -> float:
        """``interval`` at most ``max_interval`` and at least ``floor`` (which wins)."""
        return max(floor, min(interval, self.max_interval))

    def start_interval(self, floor: float) -> float:
        """The interval a host starts with: ``start`` within the bounds."""
        return self.bounded(self.start, floor)


@dataclass(frozen=True, slots=True)
class Sample:
    """What one fetch says about its host."""

    latency: float
    """Seconds per request (the fetch's time over its requests, redirect hops included)."""
    ok: bool
    """A 2xx or 3xx response: only such a sample may lower the latency."""
    error: bool
    """No response (network error, deadline), a 429 or a 5xx."""


def sample_of(result: FetchResult) -> Sample | None:
    """The sample of a fetch; None when no request reached the host."""
    latency = result.elapsed_ms / 1000.0 / (1 + len(result.redirects))
    status = result.status
    if status is None:
        if result.error is None or result.error.startswith(_NO_REQUEST):
            return None
        return Sample(latency, ok=False, error=True)
    error = status == 429 or status >= 500
    return Sample(latency, ok=not error and 200 <= status < 400, error=error)


class HostThrottle:
    """One host in this process: its smoothed delay (latency over target) and error rate,
    and the interval last seen in the store."""

    __slots__ = ("busy", "checked", "delay", "error_rate", "known")

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.error_rate = 0.0
        self.known: float | None = None
        self.checked = -math.inf
        self.busy = False

    def fold(self, sample: Sample, settings: ThrottleSettings, floor: float) -> None:
        """Take one sample in."""
        self._move(sample, settings, floor)
        self.error_rate += _ERROR_WEIGHT * (float(sample.error) - self.error_rate)

    def _move(self, sample: Sample, settings: ThrottleSettings, floor: float) -> None:
        wanted = sample.latency / settings.target
        if sample.ok or wanted > self.delay:
            self.delay = settings.bounded((self.delay + wanted) / 2, floor)

    def rebase(
        self,
        stored: float,
        error_rate: float,
        sample: Sample,
        settings: ThrottleSettings,
        floor: float,
    ) -> None:
        """Start again from the interval the store holds, which every worker's samples
        moved: the delay that gives it with ``error_rate`` (this host's before
        ``sample``), then ``sample``'s latency folded in. So a worker that has seen fewer
        of the host's responses does not pull the shared value back."""
        self.delay = settings.bounded(stored / (1.0 + _ERROR_FACTOR * error_rate), floor)
        self._move(sample, settings, floor)

    def interval(self, settings: ThrottleSettings, floor: float) -> float:
        """The interval this host should have: its delay, longer with errors."""
        return settings.bounded(self.delay * (1.0 + _ERROR_FACTOR * self.error_rate), floor)

    def due(self, interval: float, now: float) -> bool:
        """Whether ``interval`` should be written now (and then the host is marked busy
        until ``written``)."""
        if self.busy or now - self.checked < _WRITE_EVERY:
            return False
        known = self.known
        if known is not None and abs(interval - known) <= _CHANGE * known:
            return False
        self.busy = True
        self.checked = now
        return True

    def written(self, stored: float | None) -> None:
        """The write is over: the store holds ``stored`` (None: not known)."""
        self.known = stored
        self.busy = False


class Throttle:
    """The hosts one process has fetched from (the last 4,096) and their intervals."""

    def __init__(self) -> None:
        self._hosts: OrderedDict[str, HostThrottle] = OrderedDict()
        self._lock = threading.Lock()  # pages may run on several event loops' threads

    def host(self, key: str) -> HostThrottle | None:
        """The state of ``key`` in this process, if it has any."""
        with self._lock:
            return self._hosts.get(key)

    async def observe(
        self,
        app: App,
        key: str,
        result: FetchResult,
        settings: ThrottleSettings,
        *,
        floor: float,
        max_running: int | None,
    ) -> None:
        """Fold the fetch ``result`` from limit key ``key`` in and, when due, write the
        host's new interval to the store. ``floor``: the crawl's delay or the host's
        Crawl-delay, the larger; ``max_running``: the key's concurrency if the store has
        no record of it."""
        sample = sample_of(result)
        if sample is None:
            return
        with self._lock:
            host = self._hosts.get(key)
            if host is None:
                host = self._hosts[key] = HostThrottle(settings.start_interval(floor))
                while len(self._hosts) > _HOSTS:
                    self._hosts.popitem(last=False)
            else:
                self._hosts.move_to_end(key)
            before = host.error_rate
            host.fold(sample, settings, floor)
            if not host.due(host.interval(settings, floor), time.monotonic()):
                return
        stored = host.known
        try:
            stored = await asyncio.to_thread(
                self._settle, app, key, host, sample, before, settings,
                floor=floor, max_running=max_running,
            )  # fmt: skip
        except StoreUnavailable as exc:  # the page stands; a later sample tries again
            logger.warning("autothrottle: could not set the interval of %s: %s", key, exc)
        finally:
            with self._lock:
                host.written(stored)

    def _settle(
        self,
        app: App,
        key: str,
        host: HostThrottle,
        sample: Sample,
        before: float,
        settings: ThrottleSettings,
        *,
        floor: float,
        max_running: int | None,
    ) -> float:
        """Read ``key``, re-base ``host`` on the interval the store holds and write the
        new one if it differs from it by more than 10% (keeping the key's max_running);
        the interval the store holds then. ``before``: the host's error rate before
        ``sample``."""
        (state,) = app.limits(key)
        with self._lock:
            if state is not None:
                host.rebase(state.limits.min_interval, before, sample, settings, floor)
            interval = host.interval(settings, floor)
        if state is not None:
            stored = state.limits.min_interval
            if abs(interval - stored) <= _CHANGE * stored:
                return stored
            max_running = state.limits.max_running
        app.set_limit(key, max_running=max_running, min_interval=interval)
        logger.debug(
            "autothrottle: %s min_interval %.3f s (delay %.3f s, errors %.0f%%)",
            key,
            interval,
            host.delay,
            100 * host.error_rate,
        )
        return interval
