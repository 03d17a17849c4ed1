"""The WARC file of a crawl: warcinfo, request and response records, real status lines,
no credential, valid by ``warcio check``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

import crawlq
from crawlq.crawler.runner import EXIT_FINISHED
from tests.unit.test_crawler_run import SITE, Site, config, crawl, site

__all__ = ["site"]  # the fixture, shared with test_crawler_run

SECRET = "warc-secret-7d1e"


def read(path: Path) -> list[Any]:
    with open(path, "rb") as stream:
        return [(record, record.content_stream().read()) for record in ArchiveIterator(stream)]


def test_the_warc_has_warcinfo_request_and_response_records_and_passes_warcio_check(
    app: crawlq.App, site: Site, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SITE_TOKEN", SECRET)
    warc = tmp_path / "pages.warc.gz"
    cfg = config(
        site, warc=str(warc), max_depth=1, contact="ops@example.org",
        auth="bearer", auth_env="SITE_TOKEN", cookies=[("lang", "fr")],
        headers=[("Accept-Language", "fr")],
    )  # fmt: skip
    code, pages = crawl(app, cfg, tmp_path / "o.jsonl")
    assert code == EXIT_FINISHED
    check = subprocess.run(
        [sys.executable, "-c", "import sys; from warcio.cli import main; sys.exit(main())",
         "check", "-v", str(warc)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert "digest pass" in check.stdout
    assert SECRET.encode() not in warc.read_bytes()  # gzip members: read them decoded too
    records = read(warc)
    info, info_body = records[0]
    assert info.rec_type == "warcinfo"
    assert info.rec_headers.get_header("WARC-Filename") == "pages.warc.gz"
    assert info.rec_headers.protocol == "WARC/1.1"
    fields = dict(line.split(": ", 1) for line in info_body.decode().splitlines())
    assert fields["software"] == f"crawlq/{crawlq.__version__} (warcio)"
    assert fields["isPartOf"] == "crawlq crawl 1"
    assert fields["robots"] == "obey"
    assert fields["operator"] == "ops@example.org"
    assert fields["http-header-user-agent"].endswith("(+mailto:ops@example.org)")
    info_id = info.rec_headers.get_header("WARC-Record-ID")
    rest = records[1:]
    # warcio writes each response, then its request
    assert [r.rec_type for r, _ in rest] == ["response", "request"] * (len(rest) // 2)
    responses = {}
    for (response, _), (request, body) in zip(rest[::2], rest[1::2], strict=True):
        uri = response.rec_headers.get_header("WARC-Target-URI")
        assert request.rec_headers.get_header("WARC-Target-URI") == uri
        assert request.rec_headers.get_header("WARC-Concurrent-To") == (
            response.rec_headers.get_header("WARC-Record-ID")
        )
        for record in (request, response):
            assert record.rec_headers.get_header("WARC-Warcinfo-ID") == info_id
        path = uri.split("/", 3)[3]
        assert request.http_headers.protocol == "GET"
        assert request.http_headers.statusline == f"/{path} HTTP/1.1"
        assert request.http_headers.get_header("Host") == uri.split("/")[2]
        assert request.http_headers.get_header("Accept-Language") == "fr"
        assert request.http_headers.get_header("User-Agent").endswith("(+mailto:ops@example.org)")
        assert request.http_headers.get_header("Authorization") is None
        assert request.http_headers.get_header("Cookie") is None
        assert body == b""
        assert SECRET not in str(request.http_headers)
        responses[path] = response.http_headers.statusline
    assert responses[""] == "200 OK"
    assert responses["missing"] == "404 Not Found"
    assert pages["/missing"]["status"] == 404 and SITE["/"][0] == 200
