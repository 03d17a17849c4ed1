"""Links: extraction from pages (also hostile ones), scope rules and content types."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from crawlq.crawler.links import (
    MAX_URL_LENGTH,
    Scope,
    extract_links,
    is_html,
    page_title,
    resolve_link,
)
from crawlq.exceptions import ConfigurationError
from crawlq.fingerprint import canonical_url

PAGE = "https://example.com/dir/page.html"


def links(body: str | bytes, url: str = PAGE, **kwargs: object) -> list[str]:
    return extract_links(body, url, **kwargs)  # type: ignore[arg-type]


# --- extraction --------------------------------------------------------------------------


def test_relative_absolute_and_protocol_relative() -> None:
    body = """
        <a href="other.html">1</a>
        <a href="/root">2</a>
        <a href="../up/">3</a>
        <a href="?q=1">4</a>
        <a href="http://elsewhere.org/x">5</a>
        <a href="//cdn.example.net/y">6</a>
        <map><area href="area.html"></map>
    """
    assert links(body) == [
        "https://example.com/dir/other.html",
        "https://example.com/root",
        "https://example.com/up/",
        "https://example.com/dir/page.html?q=1",
        "http://elsewhere.org/x",
        "https://cdn.example.net/y",
        "https://example.com/dir/area.html",
    ]


def test_protocol_relative_follows_page_scheme() -> None:
    assert links('<a href="//h.org/">x</a>', "http://example.com/") == ["http://h.org/"]


def test_base_href_first_one_resolved_against_page() -> None:
    body = """<head><base href="/assets/v2/"><base href="http://wrong.org/"></head>
        <a href="img.html">1</a><a href="/abs">2</a><a href="//o.org/z">3</a>"""
    assert links(body) == [
        "https://example.com/assets/v2/img.html",
        "https://example.com/abs",
        "https://o.org/z",
    ]


def test_base_href_absolute_and_invalid() -> None:
    assert links('<base href="http://b.org/x/"><a href="y">1</a>') == ["http://b.org/x/y"]
    # a base that is not http(s) is ignored: the page URL stays the base
    assert links('<base href="javascript:void(0)"><a href="y">1</a>') == [
        "https://example.com/dir/y"
    ]
    # <base> without href does not count; the next one with href does
    assert links('<base target="_blank"><base href="/b/"><a href="y">1</a>') == [
        "https://example.com/b/y"
    ]


def test_nofollow() -> None:
    body = """<a href="/a" rel="nofollow">1</a><a href="/b" rel="noopener NoFollow">2</a>
        <a href="/c" rel="nofollowers">3</a><a href="/d">4</a>"""
    assert links(body) == ["https://example.com/c", "https://example.com/d"]
    assert links(body, follow_nofollow=True) == [
        "https://example.com/a",
        "https://example.com/b",
        "https://example.com/c",
        "https://example.com/d",
    ]


@pytest.mark.parametrize(
    "href",
    [
        "javascript:alert(1)",
        " JavaScript:alert(1)",
        "java\tscript:alert(1)",
        "mailto:a@example.com",
        "tel:+3312345678",
        "data:text/html,<b>x</b>",
        "ftp://example.com/file",
        "#top",
        "#",
        "",
        "   ",
        "http:///nohost",
        "http://example.com:99999/",
        "http://example.com:port/",
        "http://[::1/",
        "file:///etc/passwd",
        "http://a..b/",
        "http://.example.com/",
        "http://exa\x00mple.com/",
        "http://exa mple.com/",
        "http://exa%41mple.com/",
        "http://a<b/",
    ],
)
def test_skipped(href: str) -> None:
    assert links(f'<a href="{href}">x</a><a href="/ok">ok</a>') == ["https://example.com/ok"]


def test_whitespace_stripped_and_fragments_dropped() -> None:
    body = '<a href="  \n/a b#frag\t ">1</a><a href="/x\n/y">2</a>'
    assert links(body) == ["https://example.com/a b", "https://example.com/x/y"]


def test_duplicates_in_other_spellings_collapse_first_spelling_kept() -> None:
    body = """
        <a href="/p?b=2&a=1">1</a>
        <a href="/p?a=1&b=2">2</a>
        <a href="HTTPS://EXAMPLE.COM:443/p?a=1&b=2#x">3</a>
        <a href="https://example.com/p?a=1&amp;b=2">4</a>
        <a href="/%7Euser">5</a>
        <a href="/~user">6</a>
        <a href="https://example.com">7</a>
        <a href="/">8</a>
        <a href="http://example.com/">9</a>
    """
    assert links(body) == [
        "https://example.com/p?b=2&a=1",
        "https://example.com/%7Euser",
        "https://example.com",
        "http://example.com/",
    ]


def test_overlong_urls_are_skipped() -> None:
    fits = "/" + "a" * (MAX_URL_LENGTH - len("https://example.com/"))
    body = f'<a href="{fits}">1</a><a href="{fits}b">2</a><a href="/{"x" * 10**6}">3</a>'
    assert links(body) == ["https://example.com" + fits]


def test_page_order_and_self_link() -> None:
    body = '<a href="/b">b</a><a href="page.html">self</a><a href="/a">a</a><a href="/b">b</a>'
    assert links(body) == [
        "https://example.com/b",
        "https://example.com/dir/page.html",
        "https://example.com/a",
    ]


def test_encoding_hint_and_detection() -> None:
    body = '<a href="/caf\u00e9">x</a>'.encode("latin-1")
    assert links(body, encoding="latin-1") == ["https://example.com/caf\u00e9"]
    meta = b'<meta charset="windows-1252"><a href="/caf\xe9">x</a>'
    assert links(meta) == ["https://example.com/caf\u00e9"]
    # an unknown hint falls back to detection, and never raises
    assert links(meta, encoding="no-such-codec") == ["https://example.com/caf\u00e9"]
    assert links(b'<a href="/\xff\xfe">x</a>', encoding="utf-8") == [
        "https://example.com/\ufffd\ufffd"
    ]


HOSTILE: list[str | bytes] = [
    "<a href='/a'><a href='/b'><div><table><a href=/c",
    "<a href=" + "x" * 1_000_000 + ">",
    "<a href='/ok' rel='" + "nofollow " * 100_000 + "'>",
    "<a " + "x=1 " * 20_000 + "href=/many>",
    "<base href='http://[bad'><a href='/still'>",
    "<a href='http://%zz%00\x00/'><a href='http://exa\u0000mple.com/'>",
    "<a href='http://\ud800.com/'>",
    "<a href='http://xn--.com/'><a href='http://a..b/'><a href='http://-/'>",
    "<svg><a href='/in-svg'></a></svg><math><a href='/in-math'>",
    "<!--<a href='/commented'>--><script><a href='/in-script'></script>",
    "<" * 100_000,
    "<a>" * 50_000,
    bytes(range(256)) * 1000,
    b"\xff\xfe<\x00a\x00 \x00h\x00r\x00e\x00f\x00=\x00/\x00x\x00>\x00",
    b"\x00" * 10_000 + b"<a href=/after-nul>",
    "",
    b"",
]


@pytest.mark.parametrize("body", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_html_never_raises(body: str | bytes) -> None:
    result = links(body)
    assert all(url.startswith(("http://", "https://")) for url in result)
    page_title(body)


def test_random_junk_never_raises() -> None:
    rng = random.Random(7)
    pieces = ["<a href='", "'>", "<base href=", "http://", "//", "#", ":", "[", "%", "\x00"]
    for _ in range(300):
        body = "".join(rng.choice([*pieces, chr(rng.randrange(0x250))]) for _ in range(60))
        links(body)
        links(body.encode("utf-8", "surrogatepass"), encoding=rng.choice([None, "utf-16"]))


@settings(max_examples=200, deadline=None)
@given(href=st.text(max_size=40), base=st.text(max_size=20))
def test_any_href_and_base_never_raise(href: str, base: str) -> None:
    body = f"<base href='{base}'><a href='{href}'>x</a>"
    for url in links(body):
        assert url.startswith(("http://", "https://"))


def test_page_title() -> None:
    assert page_title("<title>  Hello \n  world </title>") == "Hello world"
    assert page_title(b"<head><title>A &amp; B</title></head><title>second</title>") == "A & B"
    assert page_title("<p>no title</p>") is None
    assert page_title("<svg><title>icon</title></svg><title>real</title>") == "real"
    assert page_title("<math><title>m</title></math>") is None
    assert page_title("<title>   </title>") is None
    assert (
        page_title("caf\u00e9".join(["<title>", "</title>"]).encode("latin-1"), encoding="latin-1")
        == "caf\u00e9"
    )


# --- content types -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("text/html", True),
        ("text/html; charset=utf-8", True),
        ("TEXT/HTML;charset=latin-1", True),
        (" application/xhtml+xml ", True),
        ("text/plain", False),
        ("application/pdf", False),
        ("text/htmlx", False),
        ("image/svg+xml", False),
        ("", False),
        (None, False),
    ],
)
def test_is_html(content_type: str | None, expected: bool) -> None:
    assert is_html(content_type) is expected


# --- scope -------------------------------------------------------------------------------


def test_scope_host_includes_port_not_default_port_or_scheme() -> None:
    scope = Scope(("http://127.0.0.1:8001/start",))
    assert scope.admits("http://127.0.0.1:8001/other", 1)
    assert not scope.admits("http://127.0.0.1:8002/other", 1)
    assert not scope.admits("http://localhost:8001/other", 1)
    web = Scope(("https://Example.com/",))
    assert web.admits("http://example.com/a", 1)  # default ports count as no port
    assert web.admits("https://EXAMPLE.COM:443/a", 1)
    assert not web.admits("https://example.com:8443/a", 1)
    assert not web.admits("https://www.example.com/a", 1)
    assert not web.admits("https://sub.example.com/a", 1)
    assert web.why_not("https://other.org/", 1) == "outside the host scope of the start URLs"


def test_scope_domain_subdomains_and_www() -> None:
    scope = Scope(("https://www.example.com:8443/x",), mode="domain")
    for url in (
        "https://example.com/",
        "http://www.example.com/",
        "https://a.b.example.com:9000/deep",
        "https://EXAMPLE.com/",
    ):
        assert scope.admits(url, 3), url
    for url in ("https://notexample.com/", "https://example.com.evil.org/", "https://com/"):
        assert not scope.admits(url, 3), url
    blog = Scope(("https://blog.example.com/",), mode="domain")
    assert blog.admits("https://x.blog.example.com/", 1)
    assert not blog.admits("https://example.com/", 1)
    # "www." is kept when removing it would leave one label
    assert not Scope(("http://www.com/",), mode="domain").admits("http://com/", 1)
    ip = Scope(("http://127.0.0.1:8001/",), mode="domain")
    assert ip.admits("http://127.0.0.1:9999/", 1)
    assert not ip.admits("http://x.127.0.0.1/", 1)


def test_scope_prefix() -> None:
    scope = Scope(("https://Example.com:443/docs/v2/index.html?x=/a/b",), mode="prefix")
    assert scope.admits("https://example.com/docs/v2/", 1)
    assert scope.admits("https://example.com/docs/v2/deep/page?q=1", 1)
    assert scope.admits("HTTPS://EXAMPLE.COM/docs/v2/other", 1)
    assert not scope.admits("https://example.com/docs/v1/", 1)
    assert not scope.admits("https://example.com/docs/v2", 1)
    assert not scope.admits("http://example.com/docs/v2/", 1)  # scheme is in the prefix
    assert not scope.admits("https://example.com:8443/docs/v2/", 1)
    root = Scope(("http://127.0.0.1:8001",), mode="prefix")
    assert root.admits("http://127.0.0.1:8001/anything", 1)
    assert not root.admits("http://127.0.0.1:8002/anything", 1)


def test_scope_any_and_several_starts() -> None:
    anything = Scope(("https://example.com/",), mode="any")
    assert anything.admits("http://far.away.org:81/x", 5)
    assert anything.why_not("mailto:a@b.c", 1) == "scheme 'mailto' is not http or https"
    two = Scope(("https://a.org/", "http://127.0.0.1:8001/"))
    assert two.admits("https://a.org/x", 1)
    assert two.admits("http://127.0.0.1:8001/x", 1)
    assert not two.admits("https://b.org/x", 1)


def test_scope_allow_and_deny() -> None:
    scope = Scope(
        ("https://example.com/",),
        allow=(r"/docs/", r"/blog/"),
        deny=(r"\.pdf$", r"/blog/private"),
    )
    assert scope.admits("https://example.com/docs/a", 1)
    assert scope.admits("https://example.com/blog/post", 1)
    assert scope.why_not("https://example.com/other", 1) == "matches no allow pattern"
    assert scope.why_not("https://example.com/docs/a.pdf", 1) == "denied by '\\\\.pdf$'"
    assert not scope.admits("https://example.com/blog/private/1", 1)  # deny wins over allow
    # patterns see the canonical form: host lowercased, query sorted
    sorted_query = Scope(("https://example.com/",), allow=(r"\?a=1&b=2$",))
    assert sorted_query.admits("https://EXAMPLE.com/x?b=2&a=1", 1)
    deny_only = Scope(("https://example.com/",), deny=("logout",))
    assert deny_only.admits("https://example.com/x", 1)
    assert not deny_only.admits("https://example.com/logout", 1)
    # the mode still applies with patterns
    assert not Scope(("https://example.com/",), allow=(".*",)).admits("https://o.org/", 1)


def test_scope_depth() -> None:
    scope = Scope(("https://example.com/",), max_depth=2)
    assert scope.admits("https://example.com/", 0)
    assert scope.admits("https://example.com/a", 2)
    assert scope.why_not("https://example.com/a", 3) == "depth 3 over max_depth 2"
    assert Scope(("https://example.com/",), max_depth=0).admits("https://example.com/", 0)
    assert Scope(("https://example.com/",)).admits("https://example.com/a", 10_000)


@pytest.mark.parametrize(
    "url", ["not a url", "http://", "http://example.com:bad/", "http://[::1/", "//example.com/"]
)
def test_scope_malformed_urls_are_refused(url: str) -> None:
    scope = Scope(("https://example.com/",), mode="any")
    reason = scope.why_not(url, 1)
    assert reason is not None
    assert not scope.admits(url, 1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"start_urls": ()},
        {"start_urls": "https://example.com/"},
        {"start_urls": ("ftp://example.com/",)},
        {"start_urls": ("example.com",)},
        {"start_urls": ("http://example.com:bad/",)},
        {"start_urls": ("https://example.com/",), "mode": "site"},
        {"start_urls": ("https://example.com/",), "allow": ("(",)},
        {"start_urls": ("https://example.com/",), "deny": ("[a-",)},
        {"start_urls": ("https://example.com/",), "deny": "x"},
        {"start_urls": ("https://example.com/",), "max_depth": -1},
        {"start_urls": ("https://example.com/",), "max_depth": True},
        {"start_urls": ("https://example.com/",), "max_depth": 1.5},
    ],
)
def test_scope_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        Scope(**kwargs)  # type: ignore[arg-type]


def test_scope_is_frozen_hashable_and_accepts_lists() -> None:
    scope = Scope(["https://example.com/"], allow=["/a"])  # type: ignore[arg-type]
    assert scope.start_urls == ("https://example.com/",)
    assert scope.allow == ("/a",)
    assert scope == Scope(("https://example.com/",), allow=("/a",))
    hash(scope)
    with pytest.raises(AttributeError):
        scope.mode = "any"  # type: ignore[misc]


# --- elements by tag name: what the CSS selectors pick -----------------------------------

FRAGMENTS = [
    "<a href='/a'>a</a>", "<A HREF='/upper'>", "<a>no href</a>", "<a href>empty</a>",
    "<a href='/nf' rel='NoFollow'>", "<area href='/area'>", "<map><area href='/m'></map>",
    "<base>", "<base href='/b/'>", "<base href='http://other.test/x/'>", "<title>t1</title>",
    "<title> </title>", "<svg><a href='/svg'>s</a><title>icon</title></svg>",
    "<math><a href='/math'></a><title>m</title></math>", "<template><a href='/tpl'></a>",
    "</template>", "<noscript><a href='/ns'></a></noscript>", "<table><a href='/tbl'>",
    "<!-- <a href='/comment'> -->", "<script><a href='/script'></script>", "<p>", "</a>",
    "<iframe srcdoc=\"<a href='/if'>\"></iframe>", "<a:b href='/ns-prefix'>",
    "<svg><base href='/sb/'></svg>",
]  # fmt: skip


def by_selectors(body: str) -> tuple[list[str], str | None]:
    """extract_links and page_title as they chose elements with the CSS engine."""
    tree = LexborHTMLParser(body)
    base = PAGE
    node = tree.css_first("base[href]")
    if node is not None:
        base = resolve_link(node.attributes.get("href") or "", PAGE) or PAGE
    found: list[str] = []
    keys: set[str] = set()
    for node in tree.css("a[href], area[href]"):
        if "nofollow" in (node.attributes.get("rel") or "").lower().split():
            continue
        url = resolve_link(node.attributes.get("href") or "", base)
        if url is not None and canonical_url(url) not in keys:
            keys.add(canonical_url(url))
            found.append(url)
    title = None
    for node in tree.css("title"):
        parent = node.parent
        while parent is not None and parent.tag not in ("svg", "math"):
            parent = parent.parent
        if parent is None:
            title = " ".join((node.text(deep=True) or "").split()) or None
            break
    return found, title


def test_elements_by_tag_name_are_the_ones_the_selectors_pick() -> None:
    rng = random.Random(11)
    for _ in range(3_000):
        body = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 8)))
        assert (links(body), page_title(body)) == by_selectors(body), body
