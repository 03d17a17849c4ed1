"""Where page records and bodies go: JSON Lines files and WARC files.

``JsonLines`` appends records to a file (or stdout) one per line, flushed per batch.
``WarcFile`` writes WARC 1.1 with warcio: a ``warcinfo`` record each time a process opens
the file (software, crawl, host, User-Agent, robots policy, operator), then per page a
``request`` record (the GET as sent, without the crawl's credentials) and its
``response`` record (the server's status line and reason phrase), linked by
``WARC-Concurrent-To``, both naming the warcinfo in ``WARC-Warcinfo-ID``. Each record is
a gzip member of its own, so a file cut short by a crash loses at most the record being
written, and several writers never interleave inside a record (one lock per process,
append mode). Bodies are stored decoded: ``Content-Encoding`` and ``Transfer-Encoding``
are left out of the stored headers and ``Content-Length`` is the decoded length, so any
WARC reader replays what the crawler parsed. ``warcio check`` validates the files.
"""

from __future__ import annotations

import io
import os
import socket
import sys
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from crawlq.crawler.fetch import FetchResult
from crawlq.exceptions import ConfigurationError
from crawlq.version import __version__

__all__ = ["JsonLines", "WarcFile", "check_writable", "worker_warc_path"]

_DROPPED = frozenset({"content-encoding", "transfer-encoding", "content-length"})
_WARC_1_1 = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


def check_writable(path: str, what: str) -> None:
    """Refuse, with ``ConfigurationError`` and how to fix it, a ``path`` that cannot be
    written as ``what`` ("the output file"), before anything is created: its directory
    must exist (none is ever made) and be writable, and the path must not be a directory.
    "-" (stdout) passes."""
    if path == "-":
        return
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        raise ConfigurationError(
            f"cannot write {what} {path}: the directory {parent} does not exist "
            "(create it first, or give a path in an existing directory)"
        )
    if target.is_dir():
        raise ConfigurationError(f"cannot write {what} {path}: it is a directory (give a file)")
    exists = target.exists()
    if not os.access(target if exists else parent, os.W_OK):
        where = path if exists else f"the directory {parent}"
        raise ConfigurationError(
            f"cannot write {what} {path}: {where} is not writable (give another path)"
        )


class JsonLines:
    """JSON Lines output to ``path`` ("-" for stdout); ``truncate`` starts it afresh.

    When the reader of stdout goes away (``crawlq crawl -o - | head -1``), ``write``
    raises ``BrokenPipeError`` once, after pointing stdout at the null device so that
    nothing (not even the interpreter's last flush) writes to the closed pipe again;
    later writes do nothing."""

    def __init__(self, path: str, *, truncate: bool = True) -> None:
        self.path = path
        self._stream: IO[str]
        if path == "-":
            self._stream, self._owned = sys.stdout, False
            return
        try:
            self._stream = open(path, "w" if truncate else "a", encoding="utf-8")
        except OSError as exc:
            raise ConfigurationError(f"cannot write the output file {path!r}: {exc}") from None
        self._owned = True

    broken = False
    """The reader of stdout went away."""

    def write(self, lines: Iterable[str]) -> int:
        """Append JSON texts, one per line; returns how many."""
        if self.broken:
            return 0
        count = 0
        try:
            for line in lines:
                self._stream.write(line)
                self._stream.write("\n")
                count += 1
            if count:
                self._stream.flush()
        except BrokenPipeError:
            self.broken = True
            _silence(self._stream)
            raise
        return count

    def close(self) -> None:
        if self._owned:
            self._stream.close()


def _silence(stream: IO[str]) -> None:
    """Point the file descriptor of a stream whose pipe closed at the null device."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return  # not a real file (a test's capture): nothing to silence
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def worker_warc_path(path: str) -> str:
    """The WARC file a process other than ``crawlq crawl`` writes for ``path``:
    ``name-HOST-PID.warc.gz`` next to it, so workers never share a file."""
    target = Path(path)
    name = target.name
    for suffix in (".warc.gz", ".warc"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return str(target.with_name(f"{name}-{socket.gethostname()}-{os.getpid()}.warc.gz"))


class WarcFile:
    """Appends WARC records (gzip) to one file; thread-safe. ``make_dirs`` creates its
    directory (for a worker on another machine, ``worker_warc_path``). ``info`` are the
    fields of the ``warcinfo`` record written first (empty values are left out)."""

    def __init__(
        self, path: str, *, make_dirs: bool = False, info: Mapping[str, str | None] | None = None
    ) -> None:
        self.path = path
        self._lock = threading.Lock()
        try:
            if make_dirs:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._stream: IO[bytes] = open(path, "ab")
        except OSError as exc:
            raise ConfigurationError(f"cannot write the WARC file {path!r}: {exc}") from None
        # warcio is imported by the first WARC file: a crawl without --warc never loads it.
        from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]
        from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

        self._status_and_headers: Any = StatusAndHeaders
        self._writer: Any = WARCWriter(self._stream, gzip=True, warc_version="1.1")
        fields = {"software": f"crawlq/{__version__} (warcio)", "hostname": socket.gethostname()}
        fields.update({k: v for k, v in (info or {}).items() if v})
        fields.setdefault("format", "WARC File Format 1.1")
        fields.setdefault("conformsTo", _WARC_1_1)
        warcinfo = self._writer.create_warcinfo_record(Path(path).name, fields)
        self._info_id: str = warcinfo.rec_headers.get_header("WARC-Record-ID")
        with self._lock:
            self._writer.write_record(warcinfo)
            self._stream.flush()

    def write(self, result: FetchResult, revisit_of: tuple[str, str] | None = None) -> None:
        """A request and a response record for a fetch that got a response; with
        ``revisit_of`` (the URI and date of the earlier capture a 304 confirms) a
        ``revisit`` record of profile server-not-modified instead of the response."""
        if result.status is None:
            return
        link = {"WARC-Warcinfo-ID": self._info_id}
        kind, extra = "response", {}
        if revisit_of is not None:
            kind = "revisit"
            extra = {
                "WARC-Profile": _NOT_MODIFIED,
                "WARC-Refers-To-Target-URI": revisit_of[0],
                "WARC-Refers-To-Date": revisit_of[1],
            }
        headers = [(k, v) for k, v in result.headers.items() if k not in _DROPPED]
        headers.append(("content-length", str(len(result.body))))
        status = f"{result.status} {result.reason}".rstrip()
        http_headers = self._status_and_headers(status, headers, protocol=result.http_version)
        response = self._writer.create_warc_record(
            result.final_url,
            kind,
            payload=io.BytesIO(result.body),
            length=len(result.body),
            http_headers=http_headers,
            warc_headers_dict={**link, **extra},
        )
        parts = urllib.parse.urlsplit(result.final_url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_line = f"GET {target} {result.http_version}"
        request = self._writer.create_warc_record(
            result.final_url,
            "request",
            payload=io.BytesIO(b""),
            length=0,
            http_headers=self._status_and_headers(
                request_line, list(result.request_headers), is_http_request=True
            ),
            warc_headers_dict=dict(link),
        )
        with self._lock:
            self._writer.write_request_response_pair(request, response)
            self._stream.flush()

    def close(self) -> None:
        with self._lock:
            self._stream.close()
