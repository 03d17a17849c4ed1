"""Retry policy: pure functions that turn an attempt's end into a decision. No I/O."""

from __future__ import annotations

import random
from dataclasses import dataclass

from crawlq.exceptions import ConfigurationError, Discard, Retry
from crawlq.payload import check_seconds


@dataclass(frozen=True, kw_only=True, slots=True)
class Backoff:
    """Exponential backoff with jitter: attempt n waits ``base * factor**(n-1)`` seconds,
    capped at ``max_delay``, then multiplied by a random factor in [1-jitter, 1+jitter].

    Defaults: base 2 s, factor 2, max_delay 1 hour, jitter 0.25.
    """

    base: float = 2.0
    factor: float = 2.0
    max_delay: float = 3600.0
    jitter: float = 0.25

    def __post_init__(self) -> None:
        check_seconds("Backoff base", self.base, zero=True)
        check_seconds("Backoff max_delay", self.max_delay, zero=True)
        for name, low, high in (("factor", 1, 100), ("jitter", 0, 1)):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not low <= value <= high
            ):
                raise ConfigurationError(
                    f"Backoff {name} must be a number from {low} to {high}, not {value!r:.40}"
                )

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        exponent = max(attempt - 1, 0)
        raw = min(self.max_delay, self.base * self.factor ** min(exponent, 64))
        spread = (rng or random).uniform(1 - self.jitter, 1 + self.jitter)
        return max(0.0, raw * spread)


@dataclass(frozen=True, kw_only=True, slots=True)
class RetryDecision:
    """What to record for a failed attempt: retry after ``delay`` s, or dead (delay None)."""

    delay: float | None
    reason: str
    error: str


def decide(
    *,
    exc: BaseException,
    error: str,
    attempts: int,
    max_attempts: int,
    backoff: Backoff,
    reason: str = "error",
) -> RetryDecision:
    """Decide a failed attempt's fate. ``attempts`` counts the attempt that just failed."""
    if isinstance(exc, Discard):
        return RetryDecision(delay=None, reason="discarded", error=error)
    if attempts >= max_attempts:
        final = "max_attempts" if reason == "error" else reason
        return RetryDecision(delay=None, reason=final, error=error)
    if isinstance(exc, Retry):  # asked for by the task: reason "retry"
        delay = backoff.delay(attempts) if exc.delay is None else max(0.0, exc.delay)
        return RetryDecision(delay=delay, reason="retry", error=error)
    return RetryDecision(delay=backoff.delay(attempts), reason=reason, error=error)
