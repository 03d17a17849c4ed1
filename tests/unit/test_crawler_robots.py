"""robots.txt rules: several user agents, wildcards, crawl-delay, unavailable files."""

from __future__ import annotations

import pytest

from crawlq.crawler.robots import MAX_ROBOTS_BYTES, Robots, robots_url

SITE = "https://example.com"
UA = "crawlq/0.1"

ROBOTS = """
# comment
User-agent: *
Disallow: /private/
Disallow: /tmp
Crawl-delay: 1

User-agent: crawlq
Disallow: /admin
Allow: /admin/public
Disallow: /*.pdf$
Disallow: /search*q=
Crawl-delay: 2.5

User-agent: BadBot
User-agent: worsebot
Disallow: /

User-agent: nice-bot
Allow: /
"""


@pytest.fixture
def robots() -> Robots:
    return Robots.parse(ROBOTS, SITE + "/some/page")


def allowed(robots: Robots, path: str, user_agent: str = UA) -> bool:
    return robots.allowed(SITE + path, user_agent)


def test_url_and_status(robots: Robots) -> None:
    assert robots.url == "https://example.com/robots.txt"
    assert robots.status is None
    assert not robots.temporary
    assert not robots.allows_everything


def test_most_specific_group_wins_over_star(robots: Robots) -> None:
    # crawlq's group replaces the * group entirely
    assert allowed(robots, "/private/x")
    assert allowed(robots, "/tmp")
    assert not allowed(robots, "/admin")
    assert not allowed(robots, "/admin/secret")
    assert allowed(robots, "/admin/public/page")  # longest match wins
    # other agents get the * group
    assert not allowed(robots, "/private/x", "SomeOtherBot/1.0")
    assert not allowed(robots, "/tmpfile", "SomeOtherBot/1.0")
    assert allowed(robots, "/admin", "SomeOtherBot/1.0")


def test_user_agent_matching_case_and_product_token(robots: Robots) -> None:
    for agent in ("crawlq", "CrawlQ", "crawlq/0.1", UA):
        assert not allowed(robots, "/admin", agent), agent
    for agent in ("badbot", "BadBot/2.0", "worsebot"):
        assert not allowed(robots, "/", agent), agent
        assert not allowed(robots, "/anything", agent), agent
    assert allowed(robots, "/private/x", "nice-bot")


def test_wildcards(robots: Robots) -> None:
    assert not allowed(robots, "/doc.pdf")
    assert not allowed(robots, "/a/b/doc.pdf")
    assert allowed(robots, "/doc.pdf?download=1")  # $ anchors the end
    assert allowed(robots, "/doc.pdfx")
    assert not allowed(robots, "/search?q=x")
    assert not allowed(robots, "/search/all?lang=en&q=x")
    assert allowed(robots, "/search?lang=en")


def test_allow_wins_a_tie() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /page\nAllow: /page\n", SITE)
    assert rules.allowed(SITE + "/page", UA)


def test_robots_txt_itself_is_always_allowed() -> None:
    rules = Robots.parse("User-agent: *\nDisallow: /\n", SITE)
    assert not rules.allowed(SITE + "/", UA)
    assert rules.allowed(SITE + "/robots.txt", UA)
    assert Robots.unavailable(503).allowed(SITE + "/robots.txt", UA)


def test_crawl_delay(robots: Robots) -> None:
    assert robots.crawl_delay(UA) == 2.5
    assert robots.crawl_delay("SomeOtherBot") == 1.0
    assert robots.crawl_delay("badbot") is None
    for value in ("-1", "nan", "inf", "soon", ""):
        rules = Robots.parse(f"User-agent: *\nCrawl-delay: {value}\n", SITE)
        assert rules.crawl_delay(UA) is None, value


def test_empty_and_junk_files_allow_everything() -> None:
    for text in ("", "\n\n", "garbage\x00\xff{}", "Disallow: /\n", "User-agent:\n" * 1000):
        rules = Robots.parse(text, SITE)
        assert rules.allowed(SITE + "/x", UA), repr(text)
        assert rules.crawl_delay(UA) is None


def test_only_the_first_500_kib_count() -> None:
    filler = "# " + "x" * 100 + "\n"
    head = "User-agent: *\nDisallow: /early\n"
    text = head + filler * (MAX_ROBOTS_BYTES // len(filler) + 10) + "Disallow: /late\n"
    rules = Robots.parse(text, SITE)
    assert not rules.allowed(SITE + "/early", UA)
    assert rules.allowed(SITE + "/late", UA)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 451, 499, 301, 308])
def test_unavailable_4xx_allows_everything(status: int) -> None:
    rules = Robots.unavailable(status, SITE + "/x")
    assert rules.allowed(SITE + "/anything", UA)
    assert rules.allows_everything
    assert not rules.temporary
    assert rules.crawl_delay(UA) is None
    assert rules.status == status
    assert rules.url == "https://example.com/robots.txt"


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599, None])
def test_unavailable_5xx_429_and_network_errors_disallow_for_now(status: int | None) -> None:
    rules = Robots.unavailable(status)
    assert not rules.allowed(SITE + "/", UA)
    assert not rules.allowed(SITE + "/anything", UA)
    assert rules.temporary
    assert not rules.allows_everything
    assert rules.url is None


@pytest.mark.parametrize("status", [100, 200, 204, 299, 600, -1])
def test_unavailable_refuses_success_statuses(status: int) -> None:
    with pytest.raises(ValueError):
        Robots.unavailable(status)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com/a/b?c#d", "https://example.com/robots.txt"),
        ("HTTP://User:Pw@EXAMPLE.com:80/", "http://example.com/robots.txt"),
        ("https://example.com:443", "https://example.com/robots.txt"),
        ("https://example.com:8443/x", "https://example.com:8443/robots.txt"),
        ("http://127.0.0.1:8001/x", "http://127.0.0.1:8001/robots.txt"),
        ("http://[::1]:8080/x", "http://[::1]:8080/robots.txt"),
        ("http://[::1]/x", "http://[::1]/robots.txt"),
    ],
)
def test_robots_url(url: str, expected: str) -> None:
    assert robots_url(url) == expected


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "example.com/x", "http:///x", "http://example.com:bad/"]
)
def test_robots_url_refuses(url: str) -> None:
    with pytest.raises(ValueError):
        robots_url(url)


def test_hostile_urls_do_not_raise(robots: Robots) -> None:
    for url in ("http://[::1", "", "/relative", "https://example.com/\x00\ud800"):
        assert isinstance(robots.allowed(url, UA), bool)
