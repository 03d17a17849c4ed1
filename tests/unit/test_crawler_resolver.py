"""The plain-href shortcut of link extraction gives what the general rules give."""

from __future__ import annotations

import random

from crawlq.crawler.links import _REMOVE, _STRIP, _absolute, _Resolver

BASES = [
    "http://h/p/a.html?x=1", "http://h", "http://h/x/..", "http://h/x/.", "HTTP://H:80/p//q",
    "https://ex.com:8443/a/b/c", "http://127.0.0.1:35463/p/00001.html", "http://h/p/q#frag",
    "http://h:99999/x", "ftp://h/x", "http://h/%2e%2e/x", "http://[::1]:8080/a/",
    "http://h/a;b/c;d?q#f", "http://h/..", "http://u:p@h/x", "http://h?q", "http:/x", "//h/x",
    # plain bases (the directory is a slice of them), and near misses
    "http://h/", "http://h:080/a/b.html", "https://H.Example/P/q~!$&'()*+,=@%41.html",
    "http://a..b/x", "http://-h-/p/", "http://h:65536/x", "http://h:/x", "http://h/a//b/c",
    "http://h/a/./b", "http://h/a/b/..", "http://./x", "http://h/" + "a" * 8185 + "/b",
    "http://h/" + "a" * 8200, "http://1.2.3.4:8080/p/", "http://h/p/q.html/",
]  # fmt: skip
ALPHABET = "ab./-_~%:?#@!$&'()*+,;=\\ 19Z\u00e9"


def test_every_href_resolves_as_without_the_shortcut() -> None:
    rng = random.Random(7)
    for _ in range(30_000):
        base = rng.choice(BASES)
        href = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8)))
        if rng.random() < 0.3:
            href = "/" + href
        href = href.strip(_STRIP).translate(_REMOVE)
        assert _Resolver(base)(href) == _absolute(href, base), (base, href)


def test_plain_hrefs_take_the_base_directory_or_origin() -> None:
    resolve = _Resolver("http://Site.test:8080/a/b.html?q=1#f")
    assert resolve("c.html") == "http://Site.test:8080/a/c.html"
    assert resolve("/d/e.html") == "http://Site.test:8080/d/e.html"
    assert resolve("../x.html") == _absolute("../x.html", "http://Site.test:8080/a/b.html")
    assert _Resolver("mailto:me@site.test")("c.html") is None
