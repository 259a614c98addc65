"""YAML from users, loaded with bounds: no alias bombs, no nesting deep enough to crash.

``yaml.safe_load`` builds what an alias points to once, but everything that walks the
result (validation, error messages, JSON encoding) sees it expanded: a 515-byte
"billion laughs" document became a 184 MB error response. PyYAML's composer and
constructor are also recursive, so a document nested a few thousand levels deep
raises ``RecursionError`` (a 500).

``load_all`` first walks the parser's event stream, which is flat (no recursion), and
refuses a document whose nesting is deeper than ``MAX_DEPTH`` or whose size with every
alias expanded is over ``MAX_NODES``; only then does it build the objects.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 64
MAX_NODES = 100_000  # scalars and collections, aliases expanded


class UnsafeYamlError(ValueError):
    """The document is well-formed but too deep or too large once aliases are expanded."""


def check_bounds(text: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Raise ``UnsafeYamlError`` (or ``yaml.YAMLError`` for bad syntax) before anything is built."""
    depth = 0
    expanded = 0  # nodes so far with aliases expanded
    sizes: dict[str, int] = {}  # anchor -> expanded size of its node
    open_anchors: list[tuple[str | None, int]] = []  # per open collection: (anchor, expanded at start)
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            expanded += sizes.get(event.anchor or "", 1)
        elif isinstance(event, yaml.ScalarEvent):
            expanded += 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > max_depth:
                raise UnsafeYamlError(f"is nested more than {max_depth} levels deep")
            open_anchors.append((event.anchor, expanded))
            expanded += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = open_anchors.pop()
            if anchor:
                sizes[anchor] = expanded - start
        if expanded > max_nodes:
            raise UnsafeYamlError(
                f"has more than {max_nodes} values once its aliases (*name) are expanded; "
                "write the values out or send a smaller document"
            )


def load_all(text: str) -> list[Any]:
    """Every document in ``text``, after ``check_bounds``."""
    check_bounds(text)
    return list(yaml.safe_load_all(text))


def shorten(text: str, limit: int = 300) -> str:
    """Error text that may quote user input, cut to ``limit`` characters."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters in all)"
