"""What every command shares: the ``--app``/``--store`` target, loading the app, errors.

``--app`` and ``--store`` are accepted on the ``crawlq`` group and on each command; a
value given to the command wins over one given to the group, which wins over the
``CRAWLQ_APP``/``CRAWLQ_STORE`` environment variables (read here, and nowhere else).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from crawlq.app import App
from crawlq.config import DEFAULT_STORE_URL
from crawlq.exceptions import CrawlqError

ENV_APP = "CRAWLQ_APP"
ENV_STORE = "CRAWLQ_STORE"

F = TypeVar("F", bound=Callable[..., Any])

APP_HELP = (
    "The App to use, as module:attribute (e.g. myjobs:app; a bare module means "
    "module:app), imported with the current directory on sys.path."
)
STORE_HELP = (
    f"Store URL, e.g. sqlite:///jobs.db. Default: the app's own store, else {DEFAULT_STORE_URL}."
)


@dataclass
class Target:
    """Which app and store a command works on, as gathered from options and env."""

    app_ref: str | None = None
    store_url: str | None = None


def _remember(field: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is not None:  # an empty --store is refused when the store opens
            setattr(ctx.ensure_object(Target), field, value)

    return callback


_TARGETS = (  # (option, metavar, env variable, Target field, help)
    ("--store", "URL", ENV_STORE, "store_url", STORE_HELP),
    ("--app", "MODULE:ATTR", ENV_APP, "app_ref", APP_HELP),
)


def group_target_options(f: F) -> F:
    """``--app`` and ``--store`` on the ``crawlq`` group, with their env variables."""
    for option, metavar, env, field, text in _TARGETS:
        f = click.option(
            option,
            metavar=metavar,
            envvar=env,
            show_envvar=True,
            expose_value=False,
            callback=_remember(field),
            help=text,
        )(f)
    return f


def target_options(f: F) -> F:
    """``--app`` and ``--store`` on one command; they override the group's values (the
    env variables are read once, by the group)."""
    for option, metavar, env, field, text in _TARGETS:
        f = click.option(
            option,
            metavar=metavar,
            expose_value=False,
            callback=_remember(field),
            help=f"{text} Same as crawlq {option}. [env var: {env}]",
        )(f)
    return f


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON instead of a table (for scripts)."
)


# -- loading the app -----------------------------------------------------------------


def _split_ref(ref: str) -> tuple[str, str]:
    module, sep, attr = ref.partition(":")
    module = module.strip()
    attr = attr.strip() if sep else "app"
    if not module or not attr:
        raise click.UsageError(f"--app {ref!r} is not module:attribute, e.g. myjobs:app")
    return module, attr


def _import(module: str, ref: str) -> Any:
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module == exc.name or module.startswith(exc.name + ".")):
            raise click.UsageError(
                f"--app {ref}: no module named {module!r} in {cwd} or on sys.path; run crawlq "
                "from the directory that holds it, or give its full dotted name"
            ) from None
        raise click.ClickException(
            f"--app {ref}: importing {module!r} failed: {exc}"
            f' (run python -c "import {module}" to see the traceback)'
        ) from exc
    except Exception as exc:
        raise click.ClickException(
            f"--app {ref}: importing {module!r} failed: {type(exc).__name__}: {exc}"
            f' (run python -c "import {module}" to see the traceback)'
        ) from exc


def load_app(ref: str) -> App:
    """Import ``module:attr`` (a dotted attribute path is allowed) and check it is an App."""
    module_name, attr = _split_ref(ref)
    obj: Any = _import(module_name, ref)
    module = obj
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            apps = sorted(n for n, v in vars(module).items() if isinstance(v, App))
            hint = f"; Apps in it: {', '.join(apps)}" if apps else "; it defines no crawlq.App"
            raise click.UsageError(
                f"--app {ref}: module {module_name!r} has no attribute {attr!r}{hint}"
            ) from None
    if not isinstance(obj, App):
        raise click.UsageError(
            f"--app {ref}: {attr!r} is a {type(obj).__module__}.{type(obj).__qualname__}, "
            "not a crawlq.App"
        )
    return obj


def _build_app(target: Target) -> App:
    store_url = target.store_url
    if target.app_ref is None:
        return App(DEFAULT_STORE_URL if store_url is None else store_url)
    app = load_app(target.app_ref)
    if store_url is not None:
        app.use_store(store_url)
    return app


def current_target() -> Target:
    """The target of the running command."""
    return click.get_current_context().ensure_object(Target)


def app_reference() -> str | None:
    """``module:attribute`` of the running command's --app, or None without one."""
    ref = current_target().app_ref
    if ref is None:
        return None
    module, attr = _split_ref(ref)
    return f"{module}:{attr}"


@contextmanager
def open_app(*, create: bool = False) -> Iterator[App]:
    """The app the options name (or a bare App on the store), closed afterwards.

    By default the store must exist, and is opened at once: for commands that look at or
    act on what it holds (``stats``, ``jobs``, ``cancel``...), which must not leave a new
    SQLite file behind. Commands that add work (``crawl``, ``schedule``, ``worker``,
    ``limit set``) pass ``create=True``: the store is made when missing, on first use.
    """
    app = _build_app(current_target())
    try:
        if not create:
            app.open(create=False)
        yield app
    finally:
        app.close()


# -- errors --------------------------------------------------------------------------


class CrawlqGroup(click.Group):
    """A group that turns every ``CrawlqError`` into a one-line message and exit code 1,
    and imports each of its commands from ``commands_from`` (name: ``module:attribute``)
    only when it is asked for."""

    def __init__(
        self, *args: Any, commands_from: Mapping[str, str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._commands_from = dict(commands_from or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self._commands_from, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self._commands_from:
            module, _, attribute = self._commands_from[cmd_name].partition(":")
            command = getattr(importlib.import_module(module), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CrawlqError as exc:
            message = " ".join(str(exc).split()) or type(exc).__name__
            raise click.ClickException(message) from exc
