"""Serving a test HTTP server on 127.0.0.1 for the length of a test."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

S = TypeVar("S", bound=socketserver.BaseServer)


@contextmanager
def serving(server: S) -> Iterator[S]:
    """``server`` answering in a daemon thread; shut down and closed afterwards."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
