"""Versioned schema migrations of the PostgreSQL store, applied in file-name order."""
