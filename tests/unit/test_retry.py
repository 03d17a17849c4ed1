from __future__ import annotations

import random

import pytest

import crawlq
from crawlq.retry import Backoff, decide


def test_backoff_grows_exponentially_with_bounded_jitter() -> None:
    backoff = Backoff(base=1.0, factor=2.0, max_delay=100.0, jitter=0.25)
    rng = random.Random(1)
    for attempt, expected in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (10, 100.0)]:
        delays = [backoff.delay(attempt, rng) for _ in range(200)]
        assert min(delays) >= expected * 0.75
        assert max(delays) <= expected * 1.25
        assert max(delays) - min(delays) > 0  # jitter is applied


def test_backoff_without_jitter_is_exact_and_capped() -> None:
    backoff = Backoff(base=3.0, factor=3.0, max_delay=50.0, jitter=0.0)
    assert [backoff.delay(n) for n in (1, 2, 3, 4)] == [3.0, 9.0, 27.0, 50.0]
    assert backoff.delay(10_000) == 50.0  # no overflow


@pytest.mark.parametrize(
    "kwargs", [{"base": -1.0}, {"factor": 0.5}, {"jitter": 1.5}, {"max_delay": -2.0}]
)
def test_bad_backoff_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(crawlq.ConfigurationError):
        Backoff(**kwargs)


def decision(exc: BaseException, attempts: int, max_attempts: int = 3) -> tuple[float | None, str]:
    d = decide(
        exc=exc,
        error="e",
        attempts=attempts,
        max_attempts=max_attempts,
        backoff=Backoff(base=10.0, jitter=0.0),
    )
    return d.delay, d.reason


def test_error_with_attempts_left_retries_with_backoff() -> None:
    assert decision(ValueError(), attempts=2) == (20.0, "error")


def test_error_without_attempts_left_is_dead() -> None:
    assert decision(ValueError(), attempts=3) == (None, "max_attempts")


def test_retry_with_delay_uses_it_until_attempts_run_out() -> None:
    assert decision(crawlq.Retry(delay=7.5), attempts=1) == (7.5, "retry")
    assert decision(crawlq.Retry(delay=7.5), attempts=3) == (None, "max_attempts")
    assert decision(crawlq.Retry(), attempts=1) == (10.0, "retry")


def test_discard_is_dead_at_once() -> None:
    assert decision(crawlq.Discard(), attempts=1) == (None, "discarded")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, "5"])
@pytest.mark.parametrize("control", [crawlq.Retry, crawlq.Snooze])
def test_retry_and_snooze_delays_follow_the_rule_of_every_duration(
    control: type[crawlq.TaskControl], bad: object
) -> None:
    with pytest.raises(crawlq.ConfigurationError) as caught:
        control(delay=bad)  # type: ignore[call-arg]
    assert str(caught.value) == (
        f"{control.__name__} delay must be a number of seconds >= 0, at most 3155760000 "
        f"(100 years), not {bad!r}"
    )
    assert control(delay=0).delay == 0.0  # type: ignore[call-arg]
