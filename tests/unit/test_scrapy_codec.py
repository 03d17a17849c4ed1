"""crawlq.scrapy.codec: Scrapy requests to JSON text and back, never pickle."""

from __future__ import annotations

import json

import pytest

scrapy = pytest.importorskip("scrapy")

from crawlq.scrapy.codec import JOB_META, Unserializable, decode, encode  # noqa: E402


class Spider(scrapy.Spider):
    name = "s"

    def parse_item(self, response: object) -> None:
        pass


def test_a_request_round_trips_with_bytes_and_odd_keys() -> None:
    spider = Spider()
    request = scrapy.FormRequest(
        "https://example.com/a?x=1",
        formdata={"q": "é"},
        headers={"X-Token": b"\x00\xff"},
        meta={"depth": 2, "pair": (1, 2), "raw": b"\x01", "by_int": {1: "one"}, JOB_META: 7},
        cb_kwargs={"page": 3},
        callback=spider.parse_item,
        priority=5,
    )
    text = encode(request, spider)
    json.loads(text)  # plain JSON
    back = decode(text, spider)
    assert type(back) is scrapy.FormRequest
    assert back.url == request.url and back.body == request.body
    assert back.headers.getlist("X-Token") == [b"\x00\xff"]
    assert back.meta == {"depth": 2, "pair": [1, 2], "raw": b"\x01", "by_int": {1: "one"}}
    assert back.cb_kwargs == {"page": 3} and back.priority == 5
    assert back.callback == spider.parse_item


def test_a_dict_that_looks_like_a_tag_survives() -> None:
    request = scrapy.Request("https://example.com/", meta={"m": {"__b64__": "AA=="}})
    assert decode(encode(request, None), None).meta == {"m": {"__b64__": "AA=="}}


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"callback": lambda r: None}, "not an instance method"),
        ({"meta": {"when": object()}}, "holds a object"),
        ({"meta": {"x": float("nan")}}, "not JSON compliant"),
    ],
)
def test_what_json_cannot_hold_is_refused(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(Unserializable, match=says):
        encode(scrapy.Request("https://example.com/", **kwargs), Spider())
