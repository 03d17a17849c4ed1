"""Stores: where jobs live. ``open_store(url)`` picks one by the URL's scheme."""

from __future__ import annotations

from collections.abc import Callable

from crawlq.config import StoreURL, parse_store_url
from crawlq.exceptions import ConfigurationError
from crawlq.stores.base import CrawlerStorage, CrawlStore, JobFilter, JobStore, Store


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


def _open_sqlite(url: StoreURL, create: bool) -> Store:
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
        create=create,
    )
    return SQLiteStore(settings)


def _bool_option(url: StoreURL, name: str, default: bool = False) -> bool:
    raw = url.options.get(name, "1" if default else "0").strip().lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off", ""):
        return False
    raise ConfigurationError(f"store URL option {name}={raw!r} is not a yes/no value: use 1 or 0")


def _open_redis(url: StoreURL, create: bool) -> Store:
    from crawlq.stores.redis.keys import DEFAULT_PREFIX
    from crawlq.stores.redis.store import RedisSettings, RedisStore

    known = {
        "prefix",
        "require_persistence",
        "socket_timeout",
        "socket_connect_timeout",
        "functions",
    }
    unknown = set(url.options) - known
    if unknown:
        raise ConfigurationError(
            f"unknown Redis store option(s) {sorted(unknown)}: known are "
            + ", ".join(sorted(known))
        )
    settings = RedisSettings(
        url=url.location,
        prefix=url.options.get("prefix", DEFAULT_PREFIX),
        require_persistence=_bool_option(url, "require_persistence"),
        socket_timeout=_float_option(url, "socket_timeout", 10.0),
        socket_connect_timeout=_float_option(url, "socket_connect_timeout", 5.0),
        functions=_bool_option(url, "functions", default=True),
        warn=create,
    )
    return RedisStore(settings)


def _open_postgres(url: StoreURL, create: bool) -> Store:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"the PostgreSQL store needs the psycopg driver ({exc}): pip install 'crawlq[postgres]'"
        ) from exc
    from crawlq.stores.postgres.store import PostgresSettings, PostgresStore

    own = {"schema", "pool_size", "pool_timeout"}
    raw_size = url.options.get("pool_size", "10")
    if not raw_size.isdigit():
        raise ConfigurationError(f"store URL option pool_size={raw_size!r} is not a whole number")
    settings = PostgresSettings(
        url=url.location,
        schema=url.options.get("schema", "crawlq"),
        pool_size=int(raw_size),
        pool_timeout=_float_option(url, "pool_timeout", 10.0),
        libpq={k: v for k, v in url.options.items() if k not in own},
    )
    return PostgresStore(settings)


_OPENERS: dict[str, Callable[[StoreURL, bool], Store]] = {
    "sqlite": _open_sqlite,
    "postgresql": _open_postgres,
    "postgres": _open_postgres,
    "redis": _open_redis,
    "rediss": _open_redis,
}


def open_store(url: str, *, create: bool = True) -> Store:
    """Open the store a URL names, e.g. ``sqlite:///jobs.db`` or
    ``postgresql://user@host:5432/db?schema=crawlq``.

    ``create=False`` is for callers that only look at (or act on) what a store holds, such
    as ``crawlq stats``: a missing SQLite file is refused with a ``ConfigurationError``
    naming it instead of being created, and the Redis store logs no warning about a server
    that persists nothing (that is about the work a caller adds). A file or schema made by
    an older crawlq is still migrated. A PostgreSQL schema that does not exist yet is
    created either way."""
    parsed = parse_store_url(url)
    opener = _OPENERS.get(parsed.scheme)
    if opener is None:
        raise ConfigurationError(
            f"no store for scheme {parsed.scheme!r} in {url!r}: supported are "
            + ", ".join(f"{s}://" for s in sorted(_OPENERS))
        )
    return opener(parsed, create)


__all__ = ["CrawlStore", "CrawlerStorage", "JobFilter", "JobStore", "Store", "open_store"]
