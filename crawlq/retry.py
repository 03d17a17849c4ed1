"""Retry policy: pure functions that turn an attempt's end into a decision. No I/O."""

from __future__ import annotations

import random
from dataclasses import dataclass

from crawlq.exceptions import ConfigurationError, Discard, Retry


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
        if self.base < 0 or self.factor < 1 or self.max_delay < 0:
            raise ConfigurationError(
                "Backoff needs base >= 0, factor >= 1 and max_delay >= 0 seconds"
            )
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"Backoff jitter must be between 0 and 1, not {self.jitter}")

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
