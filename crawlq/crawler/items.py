"""The parse hook: ``--parse module:function``, a user function run on each page.

The function gets a ``Page`` (URL, status, headers, body, the parsed tree, the page's
links and ``--extract`` fields) for each page fetched with a 2xx status, as Scrapy's
``parse`` does, and returns its items:

* ``None`` (no item), a dict (one item), or an iterable of dicts (a generator too);
* or ``Parsed(items=[...], links=[...])`` to choose the links to follow as well:
  ``links`` (absolute, or relative to the page) replace the page's own links; the scope,
  ``--max-depth`` and the seen set still apply to them. ``links=None`` keeps the page's.

An ``async def`` function is awaited on the worker's event loop; a plain function runs in
a thread, so slow user code does not hold up the other fetches. Items must be JSON
objects (their values JSON: str, int, float, bool, None, lists, dicts); they are kept in
the page's record (``items``) in the store, so ``crawl-export`` returns them, and are
what ``crawlq crawl -o`` writes (``crawlq.crawler.exports``).

The function is named, not pickled: every worker of the crawl, on any machine, imports
``module`` itself (with its current directory on ``sys.path``, as ``--app`` is). An
exception in it, or a result that is not items, is the page's failure: retried with
backoff like a network error, and after the last attempt recorded with ``error`` and the
``traceback`` and sent to the dead-letter queue (``crawlq.crawler.pages``).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from selectolax.lexbor import LexborHTMLParser

from crawlq.crawler.extract import Document, Selector
from crawlq.crawler.links import resolve_link
from crawlq.exceptions import ConfigurationError

__all__ = ["Page", "Parsed", "load_hook", "run_hook"]


@dataclass(frozen=True)
class Parsed:
    """What a parse hook may return to choose the links to follow as well as its items
    (``links=None``: the page's own links)."""

    items: Sequence[Mapping[str, Any]] = ()
    links: Sequence[str] | None = None


@functools.lru_cache(maxsize=256)
def _selector(query: str) -> Selector:
    return Selector(query)


@dataclass
class Page:
    """One fetched page, as a parse hook sees it. ``headers`` have lower-case names;
    ``tree`` is selectolax's parsed document (``LexborHTMLParser``) of an HTML page, None
    for other content; ``links`` the page's http(s) links (absolute, each once, before
    the scope); ``fields`` its ``--extract`` fields."""

    url: str
    final_url: str
    status: int
    headers: dict[str, str]
    body: bytes
    content_type: str | None
    depth: int
    referrer: str | None
    encoding: str | None = None
    tree: LexborHTMLParser | None = None
    links: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def text(self) -> str:
        """The body decoded (the Content-Type's charset, else UTF-8; bad bytes replaced)."""
        try:
            return self.body.decode(self.encoding or "utf-8", errors="replace")
        except LookupError:
            return self.body.decode("utf-8", errors="replace")

    def select(self, query: str) -> list[Any]:
        """Every match of an ``--extract`` query (CSS with ``::text``/``::attr()``, or
        ``xpath:...``); [] on a page that is not HTML."""
        if self.tree is None:
            return []
        return _selector(query).values(Document(self.tree, self.body, self.encoding))

    def select_one(self, query: str) -> Any:
        """The first match of ``query``, or None."""
        found = self.select(query)
        return found[0] if found else None


# -- loading --------------------------------------------------------------------------

_HOOKS: dict[str, Callable[[Page], Any]] = {}
_LOCK = threading.Lock()


def load_hook(spec: str) -> Callable[[Page], Any]:
    """The function ``module:function`` names (imported once per process, with the
    current directory on ``sys.path``); ConfigurationError saying why it cannot be had."""
    with _LOCK:
        hook = _HOOKS.get(spec)
        if hook is None:
            hook = _HOOKS[spec] = _import(spec)
        return hook


def _import(spec: str) -> Callable[[Page], Any]:
    module_name, _, attr = spec.partition(":")
    module_name, attr = module_name.strip(), attr.strip()
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        name = exc.name if isinstance(exc, ModuleNotFoundError) else None
        if name is not None and module_name.split(".")[0] == name.split(".")[0]:
            raise ConfigurationError(
                f"--parse {spec}: no module named {module_name!r} in {cwd} or on sys.path; "
                "run crawlq (and every crawlq worker) from the directory that holds it"
            ) from None
        raise ConfigurationError(
            f"--parse {spec}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    hook: Any = module
    for part in attr.split("."):
        hook = getattr(hook, part, None)
        if hook is None:
            raise ConfigurationError(f"--parse {spec}: module {module_name!r} has no {attr!r}")
    if not callable(hook):
        raise ConfigurationError(f"--parse {spec}: {attr!r} is not a function")
    return hook  # type: ignore[no-any-return]


# -- running --------------------------------------------------------------------------


async def run_hook(spec: str, page: Page) -> Parsed:
    """Run the hook ``spec`` on ``page``: its items (JSON objects) and links. Raises what
    the hook raises, and TypeError/ValueError for a result that is not items."""
    hook = load_hook(spec)
    if inspect.iscoroutinefunction(hook):
        result = await hook(page)
        parsed = _items(result)
    else:
        parsed = await asyncio.to_thread(lambda: _items(hook(page)))  # generators run there
    links = parsed.links
    if links is not None:
        if isinstance(links, str) or not isinstance(links, Iterable):
            raise TypeError(f"Parsed.links must be a list of URLs, not {links!r:.80}")
        resolved = (resolve_link(str(link), page.final_url) for link in links)
        links = [link for link in resolved if link is not None]
    return Parsed(items=parsed.items, links=links)


def _items(result: Any) -> Parsed:
    links = None
    if isinstance(result, Parsed):
        links, result = result.links, result.items
    if result is None:
        found: list[Any] = []
    elif isinstance(result, Mapping):
        found = [result]
    elif isinstance(result, Iterable) and not isinstance(result, str | bytes):
        found = list(result)
    else:
        raise TypeError(
            f"the parse hook returned a {type(result).__name__}: return None, a dict, "
            "a list (or generator) of dicts, or Parsed(items=..., links=...)"
        )
    items = []
    for n, item in enumerate(found):
        if not isinstance(item, Mapping):
            raise TypeError(f"item {n} is a {type(item).__name__}, not a dict")
        # as JSON and back: what the store keeps is what the output gets (UTF-8: no
        # lone surrogate, which no store could keep)
        text = json.dumps(dict(item), ensure_ascii=False, allow_nan=False)
        text.encode()
        items.append(json.loads(text))
    return Parsed(items=items, links=links)
