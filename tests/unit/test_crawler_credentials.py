"""Headers, cookies, the credential and the contact of a crawl: what is sent, to whom,
and that the secret stays out of the crawl's settings, reprs and error messages."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.credentials import Credential
from crawlq.crawler.fetch import DEFAULT_USER_AGENT, FetchSettings
from crawlq.exceptions import ConfigurationError
from tests.unit.test_crawler_fetch import OPEN, Server, fetch, run, server

__all__ = ["server"]  # the fixture, shared with test_crawler_fetch

SECRET = "s3cr3t-T0KEN-9f8e"


def config(**kwargs: object) -> CrawlConfig:
    return CrawlConfig(start_urls=("http://127.0.0.1/",), allow_private=True, **kwargs)  # type: ignore[arg-type]


def test_a_credential_is_read_from_the_environment_or_a_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SITE_TOKEN", SECRET)
    assert Credential("bearer", env="SITE_TOKEN").header() == ("Authorization", f"Bearer {SECRET}")
    path = tmp_path / "basic.txt"
    path.write_text("ann:pa ss:word\nignored\n")
    name, value = Credential("basic", file=str(path)).header()
    assert name == "Authorization"
    assert base64.b64decode(value.removeprefix("Basic ")) == b"ann:pa ss:word"
    monkeypatch.setenv("SITE_COOKIE", "sid=abc")
    assert Credential("cookie", env="SITE_COOKIE").header() == ("Cookie", "sid=abc")


@pytest.mark.parametrize(
    ("credential", "env", "message"),
    [
        (Credential("bearer", env="NOT_SET_HERE"), None, r"NOT_SET_HERE \(--auth-env\) is not set"),
        (Credential("bearer", env="EMPTY_ONE"), "", r"EMPTY_ONE \(--auth-env\) is empty"),
        (Credential("basic", env="TOKEN_ONLY"), SECRET, "must hold user:password"),
        (Credential("bearer", env="TWO_LINES"), f"{SECRET}\nX-Evil: 1", "control character"),
        (Credential("bearer", file="/nonexistent/token"), None, "No such file"),
    ],
)
def test_a_missing_or_bad_credential_names_where_it_is_never_the_value(
    monkeypatch: pytest.MonkeyPatch, credential: Credential, env: str | None, message: str
) -> None:
    if env is not None and credential.env is not None:
        monkeypatch.setenv(credential.env, env)
    with pytest.raises(ConfigurationError, match=message) as info:
        credential.header()
    assert SECRET not in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"auth": "digest", "auth_env": "X"}, "auth must be one of basic, bearer, cookie"),
        ({"auth": "bearer"}, "exactly one of --auth-env NAME or --auth-file PATH"),
        ({"auth": "bearer", "auth_env": "X", "auth_file": "/f"}, "exactly one"),
        ({"auth": "bearer", "auth_env": "$TOKEN"}, "the NAME of an environment variable"),
        ({"auth_env": "X"}, "need --auth basic, bearer or cookie"),
        ({"headers": [("Authorization", "Bearer x")]}, "never kept in a crawl's settings"),
        ({"headers": [("cookie", "a=b")]}, "never kept in a crawl's settings"),
        ({"headers": [("X-A", "1\r\nX-Evil: 1")]}, "control character"),
        ({"headers": [("Bad Name", "1")]}, "not a valid token"),
        ({"headers": "X-A: 1"}, "pairs"),
        ({"cookies": [("a b", "1")]}, "not a valid token"),
        ({"cookies": [("a", "1; b=2")]}, "one cookie per option"),
        ({"contact": "me (at) example.org"}, "without spaces or parentheses"),
        ({"contact": ""}, "URL or an e-mail address"),
    ],
)
def test_request_options_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        config(**kwargs)


def test_the_settings_hold_where_the_secret_is_not_the_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SITE_TOKEN", SECRET)
    cfg = config(auth="bearer", auth_env="SITE_TOKEN", cookies=[("lang", "fr")])
    meta = json.dumps(cfg.to_meta())
    assert SECRET not in meta and "SITE_TOKEN" in meta
    again = CrawlConfig.from_meta(json.loads(meta))
    assert again == cfg and again.fingerprint() == cfg.fingerprint()
    assert again.to_meta() == json.loads(meta)  # resuming compares them
    settings = cfg.fetch_settings
    assert ("Authorization", f"Bearer {SECRET}") in settings.credentials
    assert ("Cookie", "lang=fr") in settings.credentials
    assert settings.credential_hosts == {"127.0.0.1"}
    assert SECRET not in repr(settings) and SECRET not in repr(cfg)


def test_a_secret_cookie_joins_the_plain_cookies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SITE_COOKIE", "sid=abc")
    cfg = config(auth="cookie", auth_env="SITE_COOKIE", cookies=[("lang", "fr")])
    assert cfg.fetch_settings.credentials == (("Cookie", "lang=fr; sid=abc"),)


def test_contact_joins_the_user_agent() -> None:
    assert config().full_user_agent == DEFAULT_USER_AGENT
    url = config(contact="https://example.org/bot").fetch_settings.user_agent
    assert url == f"{DEFAULT_USER_AGENT} (+https://example.org/bot)"
    mail = config(user_agent="mybot/1", contact="ops@example.org").fetch_settings.user_agent
    assert mail == "mybot/1 (+mailto:ops@example.org)"


def test_credentials_go_to_the_start_hosts_only_and_are_dropped_on_a_redirect_away(
    server: Server,
) -> None:
    settings = FetchSettings(
        policy=OPEN,
        extra_headers=(("Accept-Language", "fr"),),
        credentials=(("Authorization", f"Bearer {SECRET}"), ("Cookie", "sid=1")),
        credential_hosts=frozenset({"127.0.0.1"}),
    )
    same = run(fetch(server.url("/echo"), settings))
    sent = {k.lower(): v for k, v in json.loads(same.body).items()}
    assert sent["authorization"] == f"Bearer {SECRET}"
    assert sent["cookie"] == "sid=1"
    assert sent["accept-language"] == "fr"
    away = server.url("/echo", host="localhost")
    result = run(fetch(server.url(f"/redirect?to={away}"), settings))
    assert result.final_url == away
    sent = {k.lower(): v for k, v in json.loads(result.body).items()}
    assert "authorization" not in sent and "cookie" not in sent
    assert sent["accept-language"] == "fr"  # plain headers go everywhere


@pytest.mark.parametrize("name", ["Authorization", "cookie", "Proxy-Authorization"])
def test_fetch_settings_keep_credentials_out_of_extra_headers(name: str) -> None:
    with pytest.raises(ConfigurationError, match="set by the fetcher"):
        FetchSettings(extra_headers=((name, "x"),))


def test_a_bad_credential_pair_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigurationError) as info:
        FetchSettings(credentials=((SECRET,),))  # type: ignore[arg-type]
    assert SECRET not in str(info.value)
