"""App.setup: set-ups run once per app, and again by name on an app imported afresh
(as a process runtime's child does)."""

from __future__ import annotations

from pathlib import Path

import pytest

import crawlq
from crawlq import App, JobContext

CALLS: list[App] = []


def register_echo(app: App) -> None:
    """A module-level set-up, as a child process can import it."""
    CALLS.append(app)

    @app.task(name="echo")
    def echo(ctx: JobContext) -> None: ...


def test_a_setup_runs_at_once_and_once_per_app(tmp_path: Path) -> None:
    CALLS.clear()
    app = App(f"sqlite:///{tmp_path / 'a.db'}")
    assert app.setup(register_echo) is register_echo
    app.setup(register_echo)
    assert CALLS == [app] and "echo" in app.tasks
    assert app.setups.references() == (f"{__name__}:register_echo",)


def test_an_app_imported_again_runs_the_setups_it_lacks(tmp_path: Path) -> None:
    CALLS.clear()
    parent = App(f"sqlite:///{tmp_path / 'a.db'}")
    parent.setup(register_echo)
    child = App(f"sqlite:///{tmp_path / 'a.db'}")
    child.setups.run_again(child, parent.setups.references())
    child.setups.run_again(child, parent.setups.references())
    assert CALLS == [parent, child] and "echo" in child.tasks


def test_a_setup_children_cannot_import_is_refused(tmp_path: Path) -> None:
    app = App(f"sqlite:///{tmp_path / 'a.db'}")

    def local(app: App) -> None: ...

    for fn in (local, lambda app: None):
        with pytest.raises(crawlq.ConfigurationError, match="module-level function"):
            app.setup(fn)
    with pytest.raises(crawlq.ConfigurationError, match="cannot be imported"):
        app.setups.run_again(app, ["no_such_module_here:fn"])


def test_the_crawler_registers_its_page_task_as_a_setup(tmp_path: Path) -> None:
    from crawlq.crawler.tasks import PAGE_TASK, install

    app = App(f"sqlite:///{tmp_path / 'a.db'}")
    assert install(app) is install(app) is app.tasks[PAGE_TASK]
    assert app.setups.references() == ("crawlq.crawler.tasks:register_page",)
