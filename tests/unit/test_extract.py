"""``--extract`` queries read as Scrapy reads them: checked against parsel itself."""

from __future__ import annotations

import pytest
from parsel import Selector as ScrapySelector

from crawlq.crawler.extract import Document, Extractor, Selector, parse_field
from crawlq.crawler.links import parse_html
from crawlq.exceptions import ConfigurationError

HTML = (
    b"<html><head><title>T</title></head><body>"
    b'<div id="a"> x <b>bold</b> y <i>it<u>u</u></i></div>'
    b'<p class="k" data-x="1">p1</p><p>p2 <a href="/z" rel=next>z</a></p>'
    b'<ul><li class="price">1.50</li><li class="price">2.00</li></ul>'
    b"</body></html>"
)
QUERIES = [
    "div ::text",
    "div::text",
    "div *::text",
    "::text",
    "*::text",
    "p::attr(class)",
    "p ::attr(class)",
    "a::attr(href)",
    "a::attr(missing)",
    "p",
    "div > b::text",
    "b::text, p::text",
    "li.price::text",
    "ul li:nth-child(2)::text",
    "h5::text",
    "xpath://p/@class",
    "xpath://li[@class='price']/text()",
    "xpath://p",
    "xpath:string(//div)",
]


def page() -> Document:
    return Document(parse_html(HTML), HTML, "utf-8")


@pytest.mark.parametrize("query", QUERIES)
def test_queries_give_what_scrapy_gives(query: str) -> None:
    scrapy = ScrapySelector(body=HTML, type="html")
    if query.startswith("xpath:"):
        wanted = scrapy.xpath(query[6:]).getall()
    else:
        wanted = scrapy.css(query).getall()
    got = Selector(query).values(page())
    assert [str(v) for v in got] == wanted


def test_fields_take_the_first_match_or_every_match() -> None:
    extractor = Extractor(["price=li.price::text", "prices[]=li.price::text", "none=h5"])
    assert extractor.extract(page()) == {"price": "1.50", "prices": ["1.50", "2.00"], "none": None}
    assert extractor.empty() == {"price": None, "prices": None, "none": None}
    assert Extractor(["n=xpath:count(//li)"]).extract(page()) == {"n": 2.0}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("price", "give NAME=QUERY"),
        ("=p", "the name '' must be"),
        ("url=p", "'url' is a field every record has"),
        ("items=p", "'items' is a field every record has"),
        ("a=p[", "invalid CSS selector 'p['"),
        ("a=xpath://p[", "invalid XPath '//p['"),
        ("a=", "the query is empty"),
    ],
)
def test_bad_fields_are_refused_in_one_line(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match="--extract") as info:
        parse_field(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_name_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'a' is given twice"):
        Extractor(["a=p", "a[]=li"])


def test_xpath_without_lxml_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "lxml" else real(name, *a)
    )
    with pytest.raises(ConfigurationError) as info:
        parse_field("price=xpath://span/text()")
    assert str(info.value) == (
        "XPath extraction (xpath://span/text()) needs lxml: pip install 'crawlq[extract]', "
        "or use a CSS query"
    )
    assert Extractor(["price=span::text"]).names == ["price"]  # CSS needs nothing more
