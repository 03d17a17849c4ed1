"""``python -m crawlq`` runs the command line."""

from __future__ import annotations

from crawlq.cli import main

main()
