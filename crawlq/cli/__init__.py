"""The ``crawlq`` command (placeholder until the CLI lands)."""

from __future__ import annotations


def main() -> None:
    raise SystemExit("crawlq: the command line is not built yet")
