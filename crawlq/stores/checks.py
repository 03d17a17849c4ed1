"""The checks of the store gate (``crawlq.stores.gate``): arguments checked in Python
before any I/O, so that every store refuses the same values with the same message (and no
driver error for a bad value ever reaches a user), and the errors every store raises
alike. Each rule and each message is written here once."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from crawlq.crawls import check_seen_has_crawl, no_such_crawl
from crawlq.exceptions import ConfigurationError, CrawlClosed, StoreError, StoreUnavailable
from crawlq.fingerprint import check_fingerprint
from crawlq.jobs import JobSpec
from crawlq.payload import check_count, check_text
from crawlq.types import Timestamp

if TYPE_CHECKING:
    from crawlq.stores.base import Completion, Failure

T = TypeVar("T")


def check_finite(name: str, value: object) -> float:
    """``value`` as a float if it is a finite number (not a bool, NaN or infinity), else a
    ConfigurationError naming the argument ``name``."""
    if isinstance(value, float):
        number = value
    elif isinstance(value, int) and not isinstance(value, bool):
        number = float(value) if abs(value) < 2**1023 else math.inf
    else:
        number = math.nan
    if not math.isfinite(number):
        raise ConfigurationError(f"{name} must be a finite number, not {value!r:.40}")
    return number


def check_finites(name: str, values: Sequence[float | None]) -> None:
    """Each of ``values`` that is not None is a finite number (``check_finite``)."""
    for value in values:
        if value is not None:
            check_finite(name, value)


def check_now(now: Timestamp | None) -> None:
    """The ``now`` every store call takes: None (the store's clock) or a finite number."""
    if now is not None:
        check_finite("now", now)


def check_specs(specs: Sequence[JobSpec], *, crawl_given: bool = False) -> None:
    """Specs to schedule: a ``seen=`` fingerprint is 16 bytes and needs a crawl (unless
    ``crawl_given``: the store puts them into one, as ``crawl_create`` does), and their
    seconds are finite numbers."""
    if not crawl_given:
        check_seen_has_crawl(specs)
    for spec in specs:
        if spec.fingerprint is not None:
            check_fingerprint(spec.fingerprint)
        check_finite("delay", spec.delay)
        check_finite("lease_seconds", spec.lease_seconds)
        if spec.run_at is not None:
            check_finite("run_at", spec.run_at)
        if spec.timeout is not None:
            check_finite("timeout", spec.timeout)


def check_fingerprints(fingerprints: Sequence[bytes]) -> list[bytes]:
    """A seen set's fingerprints: 16 bytes each."""
    return [check_fingerprint(fp) for fp in fingerprints]


def found(crawl_id: int, answer: T | None) -> T:
    """``answer``, or ``CrawlNotFound`` when the store found no crawl ``crawl_id`` (None)."""
    if answer is None:
        raise no_such_crawl(crawl_id)
    return answer


@contextmanager
def driver_errors(
    store: str,
    operation: str,
    catch: type[Exception] | tuple[type[Exception], ...],
    transient: Callable[[Exception], str | None],
) -> Iterator[None]:
    """Turn the driver errors ``catch`` into crawlq errors, keeping the cause: the one
    rule of every store. ``transient(exc)`` says what went wrong when a later call may
    work (``StoreUnavailable``: "Redis could not be reached"); None means the same call
    would fail the same way (``StoreError``: "<store> failed during <operation>")."""
    try:
        yield
    except catch as exc:
        why = transient(exc)
        if why is not None:
            raise StoreUnavailable(f"{why} during {operation}: {exc}") from exc
        raise StoreError(f"{store} failed during {operation}: {exc}") from exc


def crawl_closed(crawl_id: int, state: str) -> CrawlClosed:
    """The error for scheduling into a crawl that has finished or was cancelled."""
    return CrawlClosed(f"crawl {crawl_id} is {state}: it takes no more jobs")


def check_cache_key(key: object) -> str:
    """A cache key: any str of valid Unicode."""
    return check_text(key, "a cache key")


def check_ttl(ttl: object) -> float:
    """A cache entry's time to live: a positive, finite number of seconds."""
    number = isinstance(ttl, int | float) and not isinstance(ttl, bool)
    seconds = float(ttl) if number else math.nan  # type: ignore[arg-type]
    if not (math.isfinite(seconds) and seconds > 0):
        raise ConfigurationError(
            f"a cache ttl is a positive number of seconds (e.g. 3600 or 0.5), not {ttl!r}"
        )
    return seconds


def check_results(items: Sequence[tuple[bytes, str]]) -> list[tuple[bytes, str]]:
    """``result_add``'s items: each a (16-byte key, record text) pair."""
    checked: list[tuple[bytes, str]] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise ConfigurationError(
                f"a result is a (16-byte key, record text) tuple, not {item!r:.80}"
            )
        key, record = item
        checked.append((check_fingerprint(key, "a result key"), check_text(record, "a result")))
    return checked


def check_records(outcomes: Sequence[Completion | Failure]) -> None:
    """The records that completions or failures keep: each a (crawl id, 16-byte key,
    record text) tuple."""
    for outcome in outcomes:
        for item in outcome.records:
            if not isinstance(item, tuple) or len(item) != 3:
                raise ConfigurationError(
                    f"a record is a (crawl id, 16-byte key, record text) tuple, not {item!r:.80}"
                )
            crawl_id, key, record = item
            check_count("crawl id", crawl_id, 1)
            check_fingerprint(key, "a result key")
            check_text(record, "a result")


def check_page(after: int, limit: int) -> tuple[int, int]:
    """``result_list``'s paging: whole numbers (``after`` below 0 reads from the start;
    ``limit`` 0 or less reads nothing)."""
    return max(operator.index(after), 0), max(operator.index(limit), 0)
