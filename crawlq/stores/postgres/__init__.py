"""The PostgreSQL store (``postgresql://``): see ``store.py`` and docs/stores.md."""
