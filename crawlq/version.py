"""The version of crawlq, in one place (``crawlq.__version__``, the crawler's User-Agent
and WARC records)."""

from __future__ import annotations

__version__ = "0.1.0"
