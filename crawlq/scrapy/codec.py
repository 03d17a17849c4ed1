"""Scrapy requests as JSON text, never pickle.

``Request.to_dict`` gives a dict holding bytes (the body, headers as ``{bytes: [bytes]}``)
and whatever the spider put in ``meta`` and ``cb_kwargs``. It is stored as JSON with two
tags: ``{"__b64__": "..."}`` for bytes and ``{"__pairs__": [[k, v], ...]}`` for a dict
whose keys are not all str. A tuple becomes a list. Anything else (an object in meta, a
lambda callback) cannot be stored, and ``encode`` says so with ``Unserializable``.
"""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from crawlq.exceptions import CrawlqError

if TYPE_CHECKING:
    from scrapy import Request, Spider

JOB_META = "crawlq_job"
"""The ``meta`` key carrying the id of the crawlq job a request is the fetch of. Scrapy's
redirect and retry middlewares copy meta, so they stay that job; it is never stored."""

_BYTES = "__b64__"
_PAIRS = "__pairs__"


class Unserializable(CrawlqError):
    """This request cannot be stored as JSON."""


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, bytes | bytearray):
        return {_BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, list | tuple):
        return [_plain(v, where) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value) and not ({_BYTES, _PAIRS} & value.keys()):
            return {k: _plain(v, f"{where}[{k!r}]") for k, v in value.items()}
        return {_PAIRS: [[_plain(k, where), _plain(v, where)] for k, v in value.items()]}
    raise Unserializable(f"{where} holds a {type(value).__name__}, which JSON cannot store")


def _restore(value: Any) -> Any:
    if isinstance(value, list):
        return [_restore(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and _BYTES in value:
            return base64.b64decode(value[_BYTES])
        if len(value) == 1 and _PAIRS in value:
            return {_hashable(_restore(k)): _restore(v) for k, v in value[_PAIRS]}
        return {k: _restore(v) for k, v in value.items()}
    return value


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def encode(request: Request, spider: Spider | None) -> str:
    """The request as JSON text; ``Unserializable`` says why it cannot be."""
    try:
        data = request.to_dict(spider=spider)
    except ValueError as exc:  # a callback that is not a method of the spider
        raise Unserializable(str(exc)) from None
    meta = data.get("meta")
    if meta and JOB_META in meta:
        data["meta"] = {k: v for k, v in meta.items() if k != JOB_META}
    plain = {k: _plain(v, k) for k, v in data.items()}
    try:
        return json.dumps(plain, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        raise Unserializable(str(exc)) from None


def decode(text: str, spider: Spider | None) -> Request:
    """The request ``encode`` stored."""
    from scrapy.utils.request import request_from_dict

    return request_from_dict(_restore(json.loads(text)), spider=spider)
