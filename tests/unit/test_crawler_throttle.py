"""The autothrottle's rules (crawlq.crawler.throttle): samples, smoothing, bounds, the
settings' checks, and the interval it keeps in a real store. Two worker processes and a
server that slows down are in tests/integration/test_autothrottle.py."""

from __future__ import annotations

import asyncio

import pytest

import crawlq
from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.fetch import FetchResult
from crawlq.crawler.throttle import HostThrottle, Sample, Throttle, ThrottleSettings, sample_of
from crawlq.exceptions import ConfigurationError

URL = "http://example.com/"


def fetched(
    seconds: float, status: int | None = 200, error: str | None = None, redirects: int = 0
) -> FetchResult:
    return FetchResult(
        url=URL,
        final_url=URL,
        status=status,
        elapsed_ms=round(seconds * 1000),
        redirects=[URL] * redirects,
        error=error,
    )


def test_a_sample_is_the_time_per_request_and_says_whether_it_was_an_error() -> None:
    assert sample_of(fetched(0.4)) == Sample(0.4, ok=True, error=False)
    assert sample_of(fetched(0.4, status=301)) == Sample(0.4, ok=True, error=False)
    assert sample_of(fetched(0.9, redirects=2)) == Sample(0.3, ok=True, error=False)
    assert sample_of(fetched(0.1, status=404)) == Sample(0.1, ok=False, error=False)
    assert sample_of(fetched(0.1, status=429)) == Sample(0.1, ok=False, error=True)
    assert sample_of(fetched(0.1, status=503)) == Sample(0.1, ok=False, error=True)
    timeout = fetched(30.0, status=None, error="deadline: fetch took over 30 s")
    assert sample_of(timeout) == Sample(30.0, ok=False, error=True)
    reset = fetched(0.0, status=None, error="ReadError: connection reset")
    assert sample_of(reset) == Sample(0.0, ok=False, error=True)
    capped = fetched(0.5, status=200, error="body over 10 bytes")
    assert sample_of(capped) == Sample(0.5, ok=True, error=False)
    for nowhere in ("refused: 10.0.0.1 is private", "invalid URL: no host", "dns: x: no"):
        assert sample_of(fetched(0.0, status=None, error=nowhere)) is None


def test_the_delay_averages_latency_over_target_and_errors_never_lower_it() -> None:
    settings = ThrottleSettings(target=2.0, start=5.0, max_interval=10.0)
    host = HostThrottle(delay=settings.start_interval(0.25))
    assert host.delay == 5.0
    host.fold(Sample(2.0, ok=True, error=False), settings, 0.25)
    assert host.delay == 3.0  # the average of 5 and 2.0 / 2
    host.fold(Sample(0.01, ok=False, error=True), settings, 0.25)  # a fast error
    assert host.delay == 3.0
    assert host.error_rate == pytest.approx(0.1)
    assert host.interval(settings, 0.25) == pytest.approx(6.0)  # 10% errors: twice
    host.fold(Sample(10.0, ok=False, error=True), settings, 0.25)  # a slow one raises it
    assert host.delay == 4.0
    assert host.error_rate == pytest.approx(0.19)
    assert host.interval(settings, 0.25) == 10.0  # the maximum
    assert host.interval(settings, 30.0) == 30.0  # a Crawl-delay above it wins
    for _ in range(10):
        host.fold(Sample(0.001, ok=True, error=False), settings, 0.25)
    assert host.delay == 0.25  # never below the floor
    assert host.error_rate == pytest.approx(0.19 * 0.9**10)
    host.fold(Sample(1.0, ok=True, error=False), settings, 0.25)
    assert host.delay == 0.375  # from the floor, not from a smaller latency
    assert ThrottleSettings(start=90.0, max_interval=60.0).start_interval(0.25) == 60.0
    assert ThrottleSettings(start=1.0).start_interval(7.0) == 7.0


def test_settings_are_checked_with_the_crawl_setting_named() -> None:
    config = CrawlConfig(start_urls=(URL,), autothrottle=True)
    assert config.throttle == ThrottleSettings()
    assert config.limits.min_interval == 5.0  # a new host starts at the start interval
    assert CrawlConfig(start_urls=(URL,)).throttle is None
    assert CrawlConfig(start_urls=(URL,)).limits.min_interval == 0.25
    again = CrawlConfig.from_meta(config.to_meta())
    assert again == config and again.throttle == config.throttle
    bad = {
        "autothrottle_target": (0, "autothrottle_target must be a number of requests above 0"),
        "autothrottle_start": (-1, "autothrottle_start must be a positive number of seconds"),
        "autothrottle_max": (float("nan"), "autothrottle_max must be a positive number"),
        "autothrottle": ("yes", "autothrottle must be true or false"),
    }
    for name, (value, message) in bad.items():
        with pytest.raises(ConfigurationError, match=message):
            CrawlConfig(start_urls=(URL,), **{"autothrottle": True, name: value})  # type: ignore[arg-type]
    with pytest.raises(
        ConfigurationError, match=r"autothrottle_max \(2 s\) is below delay \(3 s\)"
    ):
        CrawlConfig(start_urls=(URL,), autothrottle=True, delay=3.0, autothrottle_max=2.0)


def test_the_interval_goes_to_the_store_only_when_it_moves_and_keeps_max_running(
    app: crawlq.App,
) -> None:
    key = "example.com"
    app.set_limit(key, max_running=3, min_interval=0.25)
    settings = ThrottleSettings(target=1.0, start=0.25, max_interval=10.0)
    throttle = Throttle()

    def observe(seconds: float, status: int | None = 200) -> float:
        asyncio.run(
            throttle.observe(
                app, key, fetched(seconds, status), settings, floor=0.25, max_running=2
            )
        )
        host = throttle.host(key)
        assert host is not None
        host.checked = -1e9  # as if the last write were long ago
        (state,) = app.limits(key)
        assert state is not None and state.limits.max_running == 3
        return state.limits.min_interval

    assert observe(0.01) == 0.25  # fast: the floor, as stored
    assert observe(2.25) == pytest.approx(1.25)  # the average of 0.25 and 2.25
    assert observe(1.3) == pytest.approx(1.25)  # 1.275: within 10%, not written
    assert observe(2.0) == pytest.approx(1.625)  # (1.25 as stored + 2.0) / 2
    app.set_limit(key, max_running=3, min_interval=2.0)  # another worker wrote it
    assert observe(2.1625) == 2.0  # re-based on 2.0: 2.08, within 10%: not written
    assert throttle.host(key).known == 2.0  # type: ignore[union-attr]
    # a worker that has seen less of the host starts from the value in the store, not
    # from its own (0.25 + 1.9) / 2
    other = Throttle()
    lagging = other.observe(app, key, fetched(1.9), settings, floor=0.25, max_running=2)
    asyncio.run(lagging)
    assert other.host(key).delay == pytest.approx(1.95)  # type: ignore[union-attr]
    (state,) = app.limits(key)
    assert state is not None and state.limits.min_interval == 2.0  # within 10%: left
    for _ in range(20):
        interval = observe(0.05, status=503)  # fast errors: slower and slower
    assert 9.0 < interval <= 10.0  # the maximum, within the 10% a write needs
