"""Set-up functions: what an app does to itself again in each process that imports it.

The process runtime's children import the app by reference (``module:attr``), so they
get the app as its module builds it. What was done to the app after that, in the worker
(the crawler's ``install``, which ``crawlq worker`` calls to register ``crawlq.page``),
would be missing there. ``App.setup(fn)`` runs ``fn(app)`` and remembers it by
``module:name``; each child runs again the set-ups its own import of the app did not,
in the order the worker ran them. So the runtime needs to know nothing of what they do.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any

from crawlq.exceptions import ConfigurationError

SetupFn = Callable[[Any], object]
"""``fn(app)``: a module-level function, imported again by name in child processes."""


def reference(fn: SetupFn) -> str:
    """``module:qualname`` under which ``fn`` can be imported again."""
    module = getattr(fn, "__module__", None)
    if module == "__mp_main__":  # a script, as a spawned child names it
        module = "__main__"
    qualname = getattr(fn, "__qualname__", "")
    if not module or "<" in qualname or resolve(f"{module}:{qualname}", strict=False) is not fn:
        raise ConfigurationError(
            f"app.setup({fn!r:.60}): a set-up runs again in each child process of the "
            "process runtime, imported by name, so it must be a module-level function"
        )
    return f"{module}:{qualname}"


def resolve(ref: str, *, strict: bool = True) -> SetupFn | None:
    """The function ``reference`` named (None if gone and not ``strict``)."""
    module_name, _, qualname = ref.partition(":")
    try:
        module = sys.modules.get(module_name) or importlib.import_module(module_name)
        obj: Any = module
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        if not strict:
            return None
        raise ConfigurationError(f"the set-up function {ref} cannot be imported") from None
    fn: SetupFn = obj
    return fn


class Setups:
    """The set-up functions an app ran, in order, each once."""

    def __init__(self) -> None:
        self._done: dict[str, SetupFn] = {}

    def run(self, app: object, fn: SetupFn) -> None:
        """Run ``fn(app)`` unless it ran on this app already."""
        ref = reference(fn)
        if ref in self._done:
            return
        self._done[ref] = fn
        fn(app)

    def references(self) -> tuple[str, ...]:
        """What a child process is given (``run_again``)."""
        return tuple(self._done)

    def run_again(self, app: object, refs: Iterable[str]) -> None:
        """Run on ``app`` (imported again) each set-up of ``refs`` it has not run."""
        for ref in refs:
            if ref not in self._done:
                fn = resolve(ref)
                assert fn is not None
                self.run(app, fn)
