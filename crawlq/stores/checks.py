"""Arguments of the cache and of crawl results, checked in Python before any I/O, so that
every store refuses the same values with the same message (and no driver error for a bad
value ever reaches a user)."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence

from crawlq.exceptions import ConfigurationError
from crawlq.fingerprint import check_fingerprint
from crawlq.payload import check_text


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


def check_page(after: int, limit: int) -> tuple[int, int]:
    """``result_list``'s paging: whole numbers (``after`` below 0 reads from the start;
    ``limit`` 0 or less reads nothing)."""
    return max(operator.index(after), 0), max(operator.index(limit), 0)
