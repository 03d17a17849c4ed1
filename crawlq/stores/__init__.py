"""Stores: where jobs live. ``open_store(url)`` picks one by the URL's scheme."""

from __future__ import annotations

from collections.abc import Callable

from crawlq.config import StoreURL, parse_store_url
from crawlq.exceptions import ConfigurationError
from crawlq.stores.base import Store


def _float_option(url: StoreURL, name: str, default: float) -> float:
    raw = url.options.get(name)
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigurationError(
            f"store URL option {name}={raw!r} is not a number of seconds"
        ) from None


def _open_sqlite(url: StoreURL) -> Store:
    from crawlq.stores.sqlite.store import SQLiteSettings, SQLiteStore

    unknown = set(url.options) - {"busy_timeout", "synchronous", "poll_interval"}
    if unknown:
        raise ConfigurationError(
            f"unknown SQLite store option(s) {sorted(unknown)}: known are busy_timeout, "
            "synchronous and poll_interval"
        )
    settings = SQLiteSettings(
        path=url.location,
        busy_timeout=_float_option(url, "busy_timeout", 60.0),
        synchronous=url.options.get("synchronous", "normal").lower(),
        poll_interval=_float_option(url, "poll_interval", 0.002),
    )
    return SQLiteStore(settings)


_OPENERS: dict[str, Callable[[StoreURL], Store]] = {"sqlite": _open_sqlite}


def open_store(url: str) -> Store:
    """Open the store a URL names, e.g. ``sqlite:///jobs.db``."""
    parsed = parse_store_url(url)
    opener = _OPENERS.get(parsed.scheme)
    if opener is None:
        raise ConfigurationError(
            f"no store for scheme {parsed.scheme!r} in {url!r}: supported are "
            + ", ".join(f"{s}://" for s in sorted(_OPENERS))
        )
    return opener(parsed)


__all__ = ["Store", "open_store"]
