"""A crawl's credential: where each worker reads it, and the header it becomes.

A secret is never part of a crawl's settings. The settings (kept in the store, shown by
``crawlq crawl-status``) name only *where* it is: an environment variable
(``--auth-env NAME``) or a file (``--auth-file PATH``). Every process that fetches a page
of the crawl, on any machine, reads it there itself, when it first fetches a page of
the crawl; so a fleet of workers needs the variable set (or the file present) on each
machine, and the store, the records and the logs never hold the value. Errors name the
variable or the file, never the value.

Types (``--auth``):

* ``basic``: the secret is ``user:password``; sent as ``Authorization: Basic ...``;
* ``bearer``: the secret is a token; sent as ``Authorization: Bearer TOKEN``;
* ``cookie``: the secret is a ``Cookie`` header value (``session=abc; theme=dark``),
  joined with the crawl's ``--cookie`` pairs.

A file holds the secret on its first line (a trailing newline is ignored); a variable
holds it whole. Either must be non-empty.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from typing import Literal, get_args

from crawlq.crawler.addresses import check_header_value
from crawlq.exceptions import ConfigurationError

__all__ = [
    "AUTH_TYPES",
    "AuthType",
    "Credential",
    "check_env_name",
    "cookie_header",
    "read_env",
]

AuthType = Literal["basic", "bearer", "cookie"]
AUTH_TYPES: tuple[str, ...] = get_args(AuthType)

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COOKIE_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_MAX_SECRET = 64 * 1024


_FIX = "set it on every machine that runs this crawl's pages"


def check_env_name(name: object, option: str) -> None:
    """Refuse a value of ``option`` that is not an environment variable's name."""
    if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
        raise ConfigurationError(
            f"{option} takes the NAME of an environment variable (letters, digits, _), "
            f"not {name!r}; the variable holds the secret"
        )


def env_where(name: str, option: str) -> str:
    return f"the environment variable {name} ({option})"


def read_env(name: str, option: str) -> str:
    """The value of the environment variable ``name`` (given with ``option``), read now;
    ConfigurationError naming it (never a value) when it is unset or empty."""
    value = os.environ.get(name, "").strip()
    if not value:
        state = "is not set" if name not in os.environ else "is empty"
        raise ConfigurationError(f"{env_where(name, option)} {state}: {_FIX}")
    return value


@dataclass(frozen=True)
class Credential:
    """One credential of a crawl: its ``type`` and where it is (``env`` or ``file``)."""

    type: AuthType
    env: str | None = None
    file: str | None = None

    def __post_init__(self) -> None:
        if self.type not in AUTH_TYPES:
            raise ConfigurationError(
                f"auth must be one of {', '.join(AUTH_TYPES)}, not {self.type!r}"
            )
        if (self.env is None) == (self.file is None):
            raise ConfigurationError(
                "an auth type needs exactly one of --auth-env NAME or --auth-file PATH"
            )
        if self.env is not None:
            check_env_name(self.env, "--auth-env")
        if self.file is not None and (not isinstance(self.file, str) or not self.file):
            raise ConfigurationError(f"--auth-file takes a file name, not {self.file!r}")

    @property
    def where(self) -> str:
        """``the environment variable NAME`` or ``the file PATH``."""
        if self.env is not None:
            return env_where(self.env, "--auth-env")
        return f"the file {self.file} (--auth-file)"

    def read(self) -> str:
        """The secret, read now; ConfigurationError naming where it is missing."""
        if self.env is not None:
            return read_env(self.env, "--auth-env")
        assert self.file is not None
        try:
            with open(self.file, encoding="utf-8") as stream:
                text = stream.read(_MAX_SECRET + 1)
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "unreadable"
            raise ConfigurationError(f"cannot read {self.where}: {reason}; {_FIX}") from None
        if len(text) > _MAX_SECRET:
            raise ConfigurationError(f"{self.where} is over 64 KiB: it holds one secret")
        value = text.splitlines()[0].strip() if text.strip() else ""
        if not value:
            raise ConfigurationError(f"{self.where} is empty: {_FIX}")
        return value

    def header(self) -> tuple[str, str]:
        """The (name, value) header of the secret read now; the value is never in an
        error message."""
        secret = self.read()
        if any(ord(c) < 32 or c == "\x7f" for c in secret):
            raise ConfigurationError(f"{self.where} holds a control character (CR, LF, ...)")
        if self.type == "basic":
            if ":" not in secret:
                raise ConfigurationError(f"{self.where} must hold user:password for --auth basic")
            token = base64.b64encode(secret.encode("utf-8")).decode("ascii")
            return "Authorization", f"Basic {token}"
        if self.type == "bearer":
            return "Authorization", f"Bearer {secret}"
        return "Cookie", secret


def cookie_header(cookies: tuple[tuple[str, str], ...], extra: str | None = None) -> str | None:
    """The ``Cookie`` header value of ``name=value`` pairs (and a secret's value), or
    None when there is none; ConfigurationError for a bad name or value."""
    parts: list[str] = []
    for name, value in cookies:
        if not _COOKIE_NAME.fullmatch(name):
            raise ConfigurationError(
                f"cookie name {name!r} is not a valid token (--cookie NAME=VALUE)"
            )
        if any(c in value for c in ';,"\\') or any(ord(c) < 33 or c == "\x7f" for c in value):
            raise ConfigurationError(
                f"cookie {name!r}: the value holds a space, ';', ',', '\"', '\\' or a control "
                "character (--cookie NAME=VALUE, one cookie per option)"
            )
        parts.append(f"{name}={value}")
    if extra:
        parts.append(extra)
    if not parts:
        return None
    text = "; ".join(parts)
    check_header_value("Cookie", text)
    return text
