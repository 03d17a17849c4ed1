from __future__ import annotations

import datetime as dt
import enum
import json
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


class Level(enum.IntEnum):
    DEEP = 3


class Url(str):
    def __str__(self) -> str:
        return "shown"


@pytest.mark.parametrize(
    "values",
    [
        ("https://a.example/", 2, 1.5, True, None, "\ud800"),
        (Level.DEEP, "u"),
        (Url("https://b.example/"), 0),
        (1.0, -0.0, 2**70),
    ],
)
def test_flat_arguments_come_back_as_json_gives_them(values: tuple[object, ...]) -> None:
    """Arguments of plain scalars are copied, not sent through JSON and back: what comes
    back is equal, of the same types, to what the JSON round trip gives."""
    kwargs = {"k": values[0]}
    args, kwargs_out = encode_arguments("t", values, kwargs, max_bytes=1000)
    expected = json.loads(json.dumps([list(values), kwargs]))
    assert [args, kwargs_out] == expected
    assert [type(v) for v in [*args, *kwargs_out.values()]] == [
        type(v) for v in [*expected[0], *expected[1].values()]
    ]
    assert type(args) is list and type(kwargs_out) is dict and kwargs_out is not kwargs


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
