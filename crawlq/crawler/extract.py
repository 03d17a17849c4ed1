"""Extraction: the fields ``--extract NAME=QUERY`` adds to each page's record.

A field is ``NAME=QUERY`` (the first match, or null) or ``NAME[]=QUERY`` (every match, a
list). ``QUERY`` is CSS, or XPath after ``xpath:``, read as Scrapy's selectors read them:

* CSS (selectolax's lexbor engine, on the tree the crawler parses for links anyway, so a
  CSS field costs a query, not a parse) with an optional pseudo-element at the end:
  ``SEL::text`` the text nodes directly inside each element ``SEL`` matches,
  ``SEL ::text`` (a space, or ``SEL *::text``) every text node inside it, ``::text``
  every text node of the page, ``SEL::attr(NAME)`` the attribute of each element that
  has it; without one, each element's outer HTML. Text is kept as is (not stripped), as
  Scrapy does. A group (``h1::text, h2::text``) gives its matches in page order when all
  its parts end alike, else part after part;
* XPath 1.0 (lxml, ``pip install 'crawlq[extract]'``; the page is parsed a second time,
  by libxml2, only when the crawl has an XPath field): strings (``text()``, ``@href``,
  ``string(...)``) as they are, elements as their outer HTML, numbers and booleans as
  JSON numbers and booleans.

Queries are checked when the crawl is configured (``ConfigurationError`` saying which
field and why); extraction itself never raises on what a page contains.
"""

from __future__ import annotations

import codecs
import importlib.util
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from selectolax.lexbor import LexborHTMLParser, LexborNode, SelectolaxError

from crawlq.crawler.records import RECORD_FIELDS, RESERVED_FIELDS
from crawlq.exceptions import ConfigurationError

__all__ = ["Document", "Extractor", "FieldSpec", "Selector", "parse_field"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
_PSEUDO = re.compile(r"::(text|attr\(\s*([^)\s]+)\s*\))\s*$")
_XPATH_PREFIX = "xpath:"
_EXTRA = "pip install 'crawlq[extract]'"

Pseudo = Literal["html", "text", "deep-text", "attr"]


def _split_group(css: str) -> list[str]:
    """``a, b`` -> ``["a", "b"]``: the commas outside brackets, parentheses and quotes."""
    parts: list[str] = []
    depth = 0
    quote = ""
    start = 0
    for i, char in enumerate(css):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(css[start:i])
            start = i + 1
    parts.append(css[start:])
    return [part.strip() for part in parts]


@dataclass(frozen=True)
class _CssPart:
    """One part of a CSS group: the selector (empty: the whole page) and what it gives."""

    css: str
    pseudo: Pseudo
    attr: str = ""


def _css_part(text: str) -> _CssPart:
    match = _PSEUDO.search(text)
    if match is None:
        return _CssPart(text, "html")
    css = text[: match.start()]
    if match.group(2) is not None:
        return _CssPart(css.strip(), "attr", match.group(2).strip("\"'").lower())
    stripped = css.rstrip()
    if stripped.endswith("*") and not stripped.endswith(("|*", "\\*")):
        stripped = stripped[:-1].rstrip()  # ``SEL *::text`` reads as ``SEL ::text``
        deep = True
    else:
        deep = stripped != css or not stripped
    return _CssPart(stripped, "deep-text" if deep else "text")


def _node_values(node: LexborNode, part: _CssPart) -> Iterator[str]:
    if part.pseudo == "html":
        yield node.html or ""
    elif part.pseudo == "attr":
        attributes = node.attributes
        if part.attr in attributes:
            yield attributes[part.attr] or ""
    else:
        nodes = (
            node.traverse(include_text=True)
            if part.pseudo == "deep-text"
            else node.iter(include_text=True)
        )
        for child in nodes:
            if child.tag == "-text":
                yield child.text_content or ""


class Selector:
    """One query (CSS with an optional pseudo-element, or ``xpath:`` XPath), checked."""

    def __init__(self, query: str) -> None:
        if not isinstance(query, str) or not query.strip():
            raise ValueError("the query is empty")
        self.query = query
        self.xpath: str | None = None
        self._groups: list[tuple[str, list[_CssPart]]] = []
        if query.startswith(_XPATH_PREFIX):
            self.xpath = query[len(_XPATH_PREFIX) :].strip()
            _check_xpath(self.xpath)
            return
        parts = [_css_part(text) for text in _split_group(query)]
        if any(not part.css and part.pseudo not in ("deep-text", "text") for part in parts):
            raise ValueError("a part of the group is empty")
        kinds = {(part.pseudo, part.attr) for part in parts}
        if len(kinds) == 1 and all(part.css for part in parts):  # one query, page order
            self._groups = [(", ".join(part.css for part in parts), parts[:1])]
        else:
            self._groups = [(part.css, [part]) for part in parts]
        probe = LexborHTMLParser("<p></p>")
        for css, _ in self._groups:
            if css:
                try:
                    probe.css(css)
                except SelectolaxError:
                    raise ValueError(f"invalid CSS selector {css!r}") from None

    def values(self, page: Document) -> list[Any]:
        """Every match on ``page``, in order."""
        if self.xpath is not None:
            return _xpath_values(page.lxml_tree(), self.xpath)
        tree = page.tree
        found: list[Any] = []
        for css, (part, *_) in self._groups:
            if css:
                nodes = tree.css(css)
            else:  # ``::text``: the whole page
                nodes = [] if tree.root is None else [tree.root]
            for node in nodes:
                found.extend(_node_values(node, part))
        return found


def _check_xpath(expression: str) -> None:
    etree = _lxml_etree(expression)
    try:
        etree.XPath(expression)
    except etree.XPathSyntaxError as exc:
        raise ValueError(f"invalid XPath {expression!r}: {exc}") from None


def _lxml_etree(expression: str) -> Any:
    if importlib.util.find_spec("lxml") is None:
        raise ConfigurationError(
            f"XPath extraction (xpath:{expression}) needs lxml: {_EXTRA}, or use a CSS query"
        )
    from lxml import etree

    return etree


def _xpath_values(tree: Any, expression: str) -> list[Any]:
    if tree is None:
        return []
    try:
        result = tree.xpath(expression)
    except Exception:  # an evaluation error on a page's content: no value
        return []
    if not isinstance(result, list):
        result = [result]
    from lxml import etree

    values: list[Any] = []
    for item in result:
        if isinstance(item, bool | int | float):
            values.append(item)
        elif isinstance(item, str):
            values.append(str(item))
        elif isinstance(item, etree._Element):
            values.append(etree.tostring(item, encoding="unicode", method="html", with_tail=False))
    return values


class Document:
    """One HTML page as the extractors see it: its selectolax tree (parsed once, shared
    with link extraction) and, on demand, an lxml tree for XPath."""

    def __init__(self, tree: LexborHTMLParser, body: bytes, encoding: str | None) -> None:
        self.tree = tree
        self._body = body
        self._encoding = encoding
        self._lxml: Any = False

    def lxml_tree(self) -> Any:
        """The page parsed by lxml (None when it holds no document)."""
        if self._lxml is False:
            self._lxml = _lxml_parse(self._body, self._encoding)
        return self._lxml


def _lxml_parse(body: bytes, encoding: str | None) -> Any:
    import lxml.html
    from lxml import etree

    codec = None
    if encoding:
        try:
            codec = codecs.lookup(encoding.strip()).name
        except (LookupError, ValueError):
            codec = None
    try:
        if codec is not None:
            return lxml.html.document_fromstring(body.decode(codec, errors="replace"))
        return lxml.html.document_fromstring(body)
    except (etree.ParserError, ValueError):
        return None


@dataclass(frozen=True)
class FieldSpec:
    """``NAME=QUERY`` (first match) or ``NAME[]=QUERY`` (all matches)."""

    name: str
    selector: Selector
    many: bool


def parse_field(text: str) -> FieldSpec:
    """One ``--extract`` value; ConfigurationError saying what is wrong and how to fix it."""
    if not isinstance(text, str) or "=" not in text:
        raise ConfigurationError(
            f"--extract {text!r}: give NAME=QUERY, e.g. price=.price::text or "
            "links[]=xpath://a/@href"
        )
    name, _, query = text.partition("=")
    name = name.strip()
    many = name.endswith("[]")
    if many:
        name = name[:-2].strip()
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"--extract {text!r}: the name {name!r} must be a letter or _ followed by at most "
            "63 letters, digits, _, . or -"
        )
    if name in RECORD_FIELDS or name in RESERVED_FIELDS:
        raise ConfigurationError(
            f"--extract {text!r}: {name!r} is a field every record has; choose another name"
        )
    try:
        selector = Selector(query.strip())
    except ValueError as exc:
        raise ConfigurationError(f"--extract {text!r}: {exc}") from None
    return FieldSpec(name, selector, many)


class Extractor:
    """The fields of a crawl, in the order given; names are unique."""

    def __init__(self, specs: Sequence[str]) -> None:
        self.fields = [parse_field(spec) for spec in specs]
        names = [f.name for f in self.fields]
        for name in names:
            if names.count(name) > 1:
                raise ConfigurationError(f"--extract: the field {name!r} is given twice")

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def empty(self) -> dict[str, Any]:
        """The fields of a page that was not parsed: null."""
        return dict.fromkeys(self.names)

    def extract(self, page: Document) -> dict[str, Any]:
        """Each field's value on ``page``: the first match or null, or every match."""
        out: dict[str, Any] = {}
        for f in self.fields:
            values = f.selector.values(page)
            out[f.name] = values if f.many else (values[0] if values else None)
        return out
