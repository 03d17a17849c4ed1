from __future__ import annotations

import datetime as dt
import math

import pytest

import crawlq
from crawlq.payload import encode_arguments


def encode(*args: object, max_bytes: int = 10_000, **kwargs: object) -> object:
    return encode_arguments("scrape", args, kwargs, names=("url", "depth"), max_bytes=max_bytes)


def test_json_values_pass_and_tuples_become_lists() -> None:
    args, kwargs = encode_arguments(
        "t", [("a", 1), {"k": [None, True, 1.5]}], {"x": "y"}, max_bytes=1000
    )
    assert args == [["a", 1], {"k": [None, True, 1.5]}]
    assert kwargs == {"x": "y"}


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (dt.datetime(2026, 1, 1), "datetime.datetime"),
        ({1, 2}, "builtins.set"),
        (b"bytes", "builtins.bytes"),
        (object(), "builtins.object"),
        (math.nan, "NaN"),
        (math.inf, "NaN or infinity"),
    ],
)
def test_non_json_argument_is_refused_naming_it(value: object, fragment: str) -> None:
    with pytest.raises(crawlq.PayloadError) as err:
        encode("https://a.example/", value)
    message = str(err.value)
    assert "'depth'" in message and "'scrape'" in message and fragment in message


def test_nested_bad_value_names_the_path() -> None:
    with pytest.raises(
        crawlq.PayloadError, match=r"argument 'url' of task 'scrape'\[0\]\['when'\]"
    ):
        encode([{"when": dt.date(2026, 1, 1)}])


def test_non_string_dict_key_is_refused() -> None:
    with pytest.raises(crawlq.PayloadError, match="keys must be strings"):
        encode({1: "a"})


def test_keyword_argument_is_named() -> None:
    with pytest.raises(crawlq.PayloadError, match="argument 'proxy'"):
        encode("u", proxy=object())


def test_payload_over_the_limit_names_the_largest_argument() -> None:
    with pytest.raises(crawlq.PayloadError) as err:
        encode("small", "x" * 500, max_bytes=200)
    assert "'depth'" in str(err.value)
    assert "over the limit of 200" in str(err.value)
