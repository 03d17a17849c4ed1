"""The request options of ``crawlq crawl``: headers, cookies, the credential, contact.

``@fetch_options`` adds them to a command and hands the command one ``request`` argument:
the ``CrawlConfig`` fields they set (see ``crawlq.crawler.credentials`` for the secret).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import click

from crawlq.crawler.config import CrawlConfig
from crawlq.crawler.credentials import AUTH_TYPES
from crawlq.crawler.proxies import environment_proxies
from crawlq.exceptions import ConfigurationError

__all__ = ["check_request_options", "fetch_options"]

_OPTIONS = (
    click.option(
        "--contact",
        metavar="URL|EMAIL",
        help="Where site owners can reach you: added to the User-Agent as '(+URL)'.",
    ),
    click.option(
        "--header",
        "headers",
        multiple=True,
        metavar="'NAME: VALUE'",
        help="Send this header with every request; repeatable. Kept in the crawl's settings "
        "(shown by crawl-status): not for secrets, see --auth.",
    ),
    click.option(
        "--cookie",
        "cookies",
        multiple=True,
        metavar="NAME=VALUE",
        help="Send this cookie to the hosts of the start URLs; repeatable. Kept in the crawl's "
        "settings: a secret session cookie goes in --auth cookie.",
    ),
    click.option(
        "--auth",
        type=click.Choice(AUTH_TYPES),
        help="Send a credential to the hosts of the start URLs: basic (the secret is "
        "user:password), bearer (a token) or cookie (a Cookie value, 'sid=...'). Each worker "
        "reads the secret from --auth-env or --auth-file; the store keeps only where it is.",
    ),
    click.option(
        "--auth-env",
        metavar="NAME",
        help="The environment variable that holds the --auth secret, on every machine that runs "
        "the crawl's pages.",
    ),
    click.option(
        "--auth-file",
        metavar="PATH",
        type=click.Path(dir_okay=False),
        help="The file whose first line is the --auth secret (kept as an absolute path: the "
        "same path on every machine).",
    ),
    click.option(
        "--proxy",
        metavar="URL",
        help="Fetch through this proxy: http://, https://, socks5:// (socks needs "
        "crawlq[socks]). No credentials here: see --proxy-env.",
    ),
    click.option(
        "--proxy-env",
        metavar="NAME",
        help="The environment variable holding the proxy URL, credentials allowed "
        "(http://user:pass@host:3128); each worker reads its own.",
    ),
    click.option(
        "--proxy-from-env",
        is_flag=True,
        help="Use each worker's HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY.",
    ),
)
_NAMES = (
    "contact",
    "headers",
    "cookies",
    "auth",
    "auth_env",
    "auth_file",
    "proxy",
    "proxy_env",
    "proxy_from_env",
)


def fetch_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the request options to a click command; it gets them as ``request``."""

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _NAMES}
        return command(request=request_fields(**values), **kwargs)

    for option in reversed(_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def request_fields(
    contact: str | None,
    headers: tuple[str, ...],
    cookies: tuple[str, ...],
    auth: str | None,
    auth_env: str | None,
    auth_file: str | None,
    proxy: str | None,
    proxy_env: str | None,
    proxy_from_env: bool,
) -> dict[str, Any]:
    """The CrawlConfig fields of --contact, --header, --cookie, --auth* and --proxy*."""
    pairs = []
    for text in headers:
        name, colon, value = text.partition(":")
        if not colon or not name.strip():
            raise click.BadParameter(f"{text!r} is not 'NAME: VALUE'", param_hint="--header")
        pairs.append((name.strip(), value.strip()))
    jar = []
    for text in cookies:
        name, equals, value = text.partition("=")
        if not equals or not name.strip():
            raise click.BadParameter(f"{text!r} is not NAME=VALUE", param_hint="--cookie")
        jar.append((name.strip(), value.strip()))
    return {
        "contact": contact,
        "headers": tuple(pairs),
        "cookies": tuple(jar),
        "auth": auth,
        "auth_env": auth_env,
        "auth_file": None if auth_file is None else os.path.abspath(auth_file),
        "proxy": proxy,
        "proxy_env": proxy_env,
        "proxy_from_env": proxy_from_env,
    }


def check_request_options(config: CrawlConfig, detach: bool) -> None:
    """Read the crawl's credential, --proxy-env and (with --proxy-from-env) this
    machine's proxy variables once here, so a missing or bad one stops the command before
    anything is created; with --detach (the workers read their own) only warn."""
    try:
        config.fetch_settings  # noqa: B018 (reads the credential and the proxy of --proxy-env)
        if config.proxy_from_env:
            environment_proxies()
    except ConfigurationError as exc:
        if not detach:
            raise
        click.secho(f"warning: {exc} (the workers read it themselves)", fg="yellow", err=True)
