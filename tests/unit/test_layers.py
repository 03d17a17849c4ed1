"""Every import in crawlq points down the layers: a module imports only from its own
layer or the ones below it (TYPE_CHECKING and function-level imports count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import crawlq

PACKAGE = Path(crawlq.__file__).parent

LAYERS: list[set[str]] = [
    {"types", "version"},
    {"exceptions"},
    {"payload", "jobs"},
    {"config", "fingerprint", "limits", "retry", "hooks", "setups"},
    {"crawls", "periodic"},
    {"stores"},
    {"specs", "results"},
    {"tasks"},
    {"schedules"},
    {"app"},
    {"context"},
    {"worker"},
    {"crawler"},
    {"scrapy", "scrapyd", "web"},
    {"cli"},
    {"__init__", "__main__"},
]
"""Each part of the package (a module or sub-package of ``crawlq``), lowest first."""

LAYER = {part: n for n, parts in enumerate(LAYERS) for part in parts}

KNOWN_UPWARD = {
    ("exceptions.py", "payload"): "Retry and Snooze check their delay by payload's rule, "
    "imported inside the function",
    ("exceptions.py", "jobs"): "JobFailed, JobCancelled and WaitTimeout carry the finished "
    "Job (a type-checking import only)",
    ("schedules.py", "app"): "app.schedules works for the App that owns it (a "
    "type-checking import only)",
    ("web/api.py", "cli"): "the web API gives jobs, crawls and workers as the CLI's --json",
}
"""Imports that still point up or sideways, each with why; none may be added."""


def part_of(module: str) -> str:
    """``crawlq.stores.redis.store`` -> ``stores``; the package itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The crawlq modules ``path`` imports, wherever the import statement is."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
    return {m for m in found if m == "crawlq" or m.startswith("crawlq.")}


def arrows() -> set[tuple[str, str, str]]:
    """(importing file, its part, the part it imports) for every import across parts."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        src = part_of(module_name(path)) if path != PACKAGE / "__init__.py" else "__init__"
        if path.name == "__main__.py" and path.parent == PACKAGE:
            src = "__main__"
        for target in imports(path):
            dst = part_of(target)
            if dst != src:
                found.add((str(path.relative_to(PACKAGE)), src, dst))
    return found


def test_every_part_has_a_layer() -> None:
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()}
    parts = {p for p in parts if not p.startswith(".") and p not in {"py", "__pycache__"}}
    parts.discard("py.typed")
    assert parts - {"py"} <= set(LAYER), sorted(parts - set(LAYER))


def test_every_import_points_down() -> None:
    upward = sorted(
        f"{file} ({src}) imports crawlq.{dst}"
        for file, src, dst in arrows()
        if LAYER[dst] >= LAYER[src] and (file, dst) not in KNOWN_UPWARD
    )
    assert upward == []


def test_the_worker_and_the_stores_know_nothing_above_them() -> None:
    above = {"crawler", "cli", "web", "scrapy", "scrapyd"}
    wrong = {(f, dst) for f, src, dst in arrows() if src in {"worker", "stores"} and dst in above}
    assert wrong == set()


def test_the_walk_sees_imports_of_every_kind() -> None:
    """The checks above can fail: a TYPE_CHECKING or function-level import is found."""
    assert ("worker/worker.py", "worker", "app") in arrows()  # under TYPE_CHECKING
    assert ("crawler/runner.py", "crawler", "worker") in arrows()
    assert ("exceptions.py", "exceptions", "payload") in arrows()  # inside a function
