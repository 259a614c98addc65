"""YAML from users, loaded with bounds: no alias bombs, no nesting deep enough to crash,
no document bigger than what it stands for needs.

``yaml.safe_load`` builds what an alias points to once, but everything that walks the
result (validation, error messages, JSON encoding) sees it expanded: a 515-byte
"billion laughs" document became a 184 MB error response. PyYAML's composer and
constructor are also recursive, so a document nested a few thousand levels deep
raises ``RecursionError`` (a 500). And pure-Python parsing is slow: a 198 KB manifest
of 99,000 scalars took 4 s of a web worker, so three at once held every worker.

So a document is parsed once, by libyaml (``yaml.CParser``), into its flat event
stream, which is counted as it is read: past ``Bounds.max_depth`` levels or
``Bounds.max_nodes`` values (aliases expanded) the parse stops there, before anything
is built. Only a document within the bounds is composed and constructed, from the
events already read. A document over ``Bounds.max_bytes`` is refused before parsing.
The bounds for a job manifest and for Queue YAML come from settings
(``manifest_bounds``, ``queue_yaml_bounds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from django.conf import settings
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

MAX_DEPTH = 64
MAX_NODES = 100_000  # scalars and collections, aliases expanded, when no other bound is given


@dataclass(frozen=True)
class Bounds:
    """How large a document may be: bytes (UTF-8), values with aliases expanded, nesting."""

    max_bytes: int | None = None
    max_nodes: int = MAX_NODES
    max_depth: int = MAX_DEPTH


def manifest_bounds() -> Bounds:
    """A Pod or Job manifest: ``MANIFEST_MAX_BYTES`` and ``MANIFEST_MAX_NODES``."""
    return Bounds(settings.MANIFEST_MAX_BYTES, settings.MANIFEST_MAX_NODES)


def queue_yaml_bounds() -> Bounds:
    """A Queue YAML import (many queues in one file): ``QUEUE_YAML_MAX_BYTES``, ``QUEUE_YAML_MAX_NODES``."""
    return Bounds(settings.QUEUE_YAML_MAX_BYTES, settings.QUEUE_YAML_MAX_NODES)


class UnsafeYamlError(ValueError):
    """The document is well-formed so far but too deep or has too many values.

    ``events_read`` is how far the parse got before it stopped."""

    def __init__(self, message: str, events_read: int = 0) -> None:
        super().__init__(message)
        self.events_read = events_read


class TooLargeYamlError(UnsafeYamlError):
    """The document has more bytes than its bound (an HTTP answer for it is a 413)."""


class YamlSyntaxError(yaml.YAMLError):
    """Bad YAML: ``error`` is PyYAML's own (with its marks), ``document`` the 1-based document
    it is in and ``after_line`` the line (from 0) where the document before it ended."""

    def __init__(self, error: yaml.YAMLError, document: int, after_line: int) -> None:
        super().__init__(str(error))
        self.error, self.document, self.after_line = error, document, after_line
        self.problem_mark = getattr(error, "problem_mark", None)
        self.context_mark = getattr(error, "context_mark", None)
        self.problem = getattr(error, "problem", None)
        self.context = getattr(error, "context", None)


def _too_many(max_nodes: int, events: int) -> UnsafeYamlError:
    return UnsafeYamlError(
        f"has more than {max_nodes} values (aliases *name counted expanded), more than a job manifest "
        "or a queue list needs; write the values out or send a smaller document",
        events,
    )


@dataclass
class _Scan:
    events: list[yaml.Event]
    documents: int = 0  # complete documents so far
    after_line: int = 0  # line (from 0) where the last complete document ended


def _scan(text: str, bounds: Bounds, loader: type[Any], scan: _Scan) -> None:
    """Read the event stream into ``scan``, counting; raises as soon as a bound is passed
    (``scan`` then holds what was read up to there)."""
    depth = 0
    expanded = 0  # nodes so far with aliases expanded
    sizes: dict[str, int] = {}  # anchor -> expanded size of its node
    open_anchors: list[tuple[str | None, int]] = []  # per open collection: (anchor, expanded at start)
    last_end = 0
    for event in yaml.parse(text, Loader=loader):
        scan.events.append(event)
        if isinstance(event, yaml.AliasEvent):
            expanded += sizes.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            expanded += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > bounds.max_depth:
                raise UnsafeYamlError(f"is nested more than {bounds.max_depth} levels deep", len(scan.events))
            open_anchors.append((event.anchor, expanded))
            expanded += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = open_anchors.pop()
            if anchor:
                sizes[anchor] = expanded - start
        elif isinstance(event, yaml.DocumentEndEvent):
            scan.documents += 1
            scan.after_line = last_end
        if expanded > bounds.max_nodes:
            raise _too_many(bounds.max_nodes, len(scan.events))
        if event.end_mark is not None:
            last_end = event.end_mark.line


def scan_events(text: str, bounds: Bounds) -> list[yaml.Event]:
    """Every event of ``text`` (libyaml), after the bounds; ``YamlSyntaxError`` for bad YAML."""
    if bounds.max_bytes is not None:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > bounds.max_bytes:
            raise TooLargeYamlError(
                f"is {size} bytes, over the limit of {bounds.max_bytes} bytes; send a smaller document"
            )
    scan = _Scan([])
    try:
        _scan(text, bounds, yaml.CSafeLoader, scan)
    except yaml.YAMLError as error:
        # libyaml stopped at the mistake, within the bounds. PyYAML's parser words it better
        # (it quotes the line); it stops at the same place, and the same bounds hold in case
        # it would read further.
        worded = _Scan([])
        try:
            _scan(text, bounds, yaml.SafeLoader, worded)
        except yaml.YAMLError as better:
            raise YamlSyntaxError(better, worded.documents + 1, worded.after_line) from None
        raise YamlSyntaxError(error, scan.documents + 1, scan.after_line) from None
    return scan.events


class _EventLoader(Composer, SafeConstructor, Resolver):
    """PyYAML's composer and safe constructor, reading events already parsed (and counted)."""

    def __init__(self, events: list[yaml.Event]) -> None:
        self._events = events
        self._next = 0
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)

    def check_event(self, *choices: type[yaml.Event]) -> bool:
        if self._next >= len(self._events):
            return False
        return not choices or isinstance(self._events[self._next], choices)

    def peek_event(self) -> yaml.Event | None:
        return self._events[self._next] if self._next < len(self._events) else None

    def get_event(self) -> yaml.Event:
        event = self._events[self._next]
        self._next += 1
        return event


def compose_all(text: str, bounds: Bounds | None = None) -> list[yaml.Node | None]:
    """Every document's node tree (marks included), parsed once and within ``bounds``."""
    events = scan_events(text, bounds or Bounds())
    loader = _EventLoader(events)
    nodes: list[yaml.Node | None] = []
    last_end = 0
    try:
        while loader.check_node():
            node = loader.get_node()
            nodes.append(node)
            last_end = node.end_mark.line if node is not None else last_end
    except yaml.YAMLError as error:  # an alias to an anchor not (yet) defined
        raise YamlSyntaxError(error, len(nodes) + 1, last_end) from None
    return nodes


def construct(node: yaml.Node | None) -> Any:
    """The Python value of one composed document (safe types only)."""
    return None if node is None else _EventLoader([]).construct_document(node)


def load_all(text: str, bounds: Bounds | None = None) -> list[Any]:
    """Every document in ``text``, parsed once and within ``bounds``."""
    return [construct(node) for node in compose_all(text, bounds)]


def shorten(text: str, limit: int = 300) -> str:
    """Error text that may quote user input, cut to ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters in all)"


# PyYAML's problems, said in a user's words (a substring of its problem -> what to do).
_PLAIN_PROBLEMS = (
    (
        "mapping values are not allowed",
        "a ':' where no key can start: put the key on its own line, or quote a value that contains ': '",
    ),
    ("found character '\\t'", "a tab: YAML indents with spaces only"),
    ("but found '<block mapping start>'", "a key indented differently from the keys beside it"),
    (
        "but found '?'",
        "a line that is neither a list item nor a key of the mapping it is in: check its "
        "indentation and its '- '",
    ),
    ("expected ',' or ']'", "a list in [ ] that is not closed"),
    ("expected ',' or '}'", "a mapping in { } that is not closed"),
    ("found unexpected end of stream", "a quoted text that is not closed"),
    ("found undefined alias", "an alias (*name) to no anchor (&name)"),
    ("could not find expected ':'", "a key without its ':'"),
    ("found duplicate anchor", "the same anchor (&name) twice"),
)


def describe(error: yaml.YAMLError) -> str:
    """A syntax error in words, with where it is: ``line 3, column 5: a tab: YAML indents with
    spaces only``. PyYAML's own text (its "while scanning" and marks) means little to a user."""
    problem = str(getattr(error, "problem", None) or "")
    words = next((plain for key, plain in _PLAIN_PROBLEMS if key in problem), None)
    if words is None:
        words = problem or "the text cannot be read as YAML"
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = getattr(error, "context_mark", None)
    if context is not None and mark is not None and context.line != mark.line:
        words += f" (in what starts on line {context.line + 1})"
    return where + words
