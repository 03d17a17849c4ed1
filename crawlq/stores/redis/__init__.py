"""The Redis store: ``redis://host:port/db?prefix=crawlq``. See ``store.py`` and ``keys.py``."""
