"""URL fingerprints: the 16-byte keys of a crawl's seen set.

The rule, so two spellings of one page share a fingerprint:

1. ``w3lib.url.canonicalize_url``: scheme and host lowercased, query arguments sorted,
   the fragment dropped, percent-encoding normalised;
2. the default port dropped (``:80`` for http, ``:443`` for https), and an empty path
   written ``/``;
3. the first 16 bytes of the SHA-256 of the UTF-8 result.

Keys that are not URLs (``fingerprint_key``) skip steps 1 and 2.
"""

from __future__ import annotations

import functools
import hashlib
from urllib.parse import urlsplit, urlunsplit

from crawlq.exceptions import ConfigurationError

FINGERPRINT_BYTES = 16
_DEFAULT_PORTS = {"http": 80, "https": 443}
_CACHED = 32_768


@functools.lru_cache(maxsize=_CACHED)
def canonical_url(url: str) -> str:
    """The canonical form of ``url`` (steps 1 and 2 of the module's rule); the last
    ``_CACHED`` answers are remembered (a crawl meets the same links on many pages).
    w3lib is imported on the first call: a worker that meets no URL key never loads it."""
    from w3lib.url import canonicalize_url

    canonical = canonicalize_url(url)
    parts = urlsplit(canonical)
    netloc = parts.netloc
    try:
        port = parts.port
    except ValueError:
        port = None  # an invalid port stays as written: it is its own page
    if port is not None and _DEFAULT_PORTS.get(parts.scheme) == port:
        netloc = netloc.rsplit(":", 1)[0]
    path = parts.path or ("/" if parts.scheme in _DEFAULT_PORTS else "")
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


def fingerprint_key(key: str) -> bytes:
    """The fingerprint of any string, taken as it is."""
    return hashlib.sha256(key.encode("utf-8")).digest()[:FINGERPRINT_BYTES]


@functools.lru_cache(maxsize=_CACHED)
def fingerprint(url: str) -> bytes:
    """The fingerprint of ``url``: the same for every spelling of one page."""
    return fingerprint_key(canonical_url(url))


def fingerprint_of(value: str) -> bytes:
    """``fingerprint`` for an http(s) URL, ``fingerprint_key`` for any other string."""
    if value[:8].lower().startswith(("http://", "https://")):
        return fingerprint(value)
    return fingerprint_key(value)


def check_fingerprint(value: object, what: str = "a fingerprint") -> bytes:
    """``value`` if it is a fingerprint (16 bytes), else a ConfigurationError that calls
    it ``what`` (a result key is a fingerprint too)."""
    if not isinstance(value, bytes) or len(value) != FINGERPRINT_BYTES:
        if isinstance(value, bytes):
            shown = f"{len(value)} bytes" + (f" ({value!r})" if len(value) <= 64 else "")
        else:
            shown = f"a {type(value).__name__}: {value!r:.80}"
        raise ConfigurationError(
            f"{what} is {FINGERPRINT_BYTES} bytes (crawlq.fingerprint), not {shown}"
        )
    return value
