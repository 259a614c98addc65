"""Import and export KAI ``Queue`` documents (``apiVersion: scheduling.run.ai/v2``).

Units: GPU quota/limit in devices (2 decimals), CPU in millicores, memory in
**whole MB (10^6 bytes) in the YAML** and MiB in the portal. Memory is
converted at this boundary: MB to MiB with 3 decimals on import (exact enough
that every whole MB value comes back unchanged), MiB to the nearest MB on
export.

The node pool is the label ``kai.scheduler/node-pool`` (KAI's scheduling shard); without it a
queue is in its parent's pool, and a top-level queue in the default pool. Export writes the
label on every queue outside the default pool.

Missing keys take KAI's raw CRD values, so an imported queue behaves as it
did in the cluster: priority 100, quota 0, **limit 0** and **over-quota weight
0** (kai-semantics §1.1). Export always writes every key, and writes
durations in compact Go form (``90m`` becomes ``1h30m``).

Import is one transaction: every document is checked, written, and then
validated against the whole tree (so a file may lower a parent's quota and
its children's together); the first error aborts it and nothing is saved.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from kai_portal.core import safe_yaml
from kai_portal.core.units import RESOURCES, UNLIMITED, mb_to_mib, mib_to_mb
from kai_portal.nodes.models import DEFAULT_POOL_NAME, NodePool
from kai_portal.queues import tree_rules
from kai_portal.queues.durations import format_go_duration, parse_go_duration
from kai_portal.queues.models import Queue

API_VERSION = "scheduling.run.ai/v2"
KIND = "Queue"
_YAML_WEIGHT = "overQuotaWeight"
NODE_POOL_LABEL = "kai.scheduler/node-pool"

FIELD_KEYS = {
    "name": "metadata.name",
    "display_name": "spec.displayName",
    "parent": "spec.parentQueue",
    "node_pool": f"metadata.labels.{NODE_POOL_LABEL}",
    "priority": "spec.priority",
    "preempt_min_runtime": "spec.preemptMinRuntime",
    "reclaim_min_runtime": "spec.reclaimMinRuntime",
    **{
        f"{r}_{kind}": f"spec.resources.{r}.{key}"
        for r in RESOURCES
        for kind, key in (("quota", "quota"), ("limit", "limit"), ("over_quota_weight", _YAML_WEIGHT))
    },
}


class QueueYamlError(Exception):
    """A document that cannot be imported: which one (its position in the file, from 1), the line
    of the file (from 1) where the key or the syntax error is, which key, what is wrong."""

    def __init__(
        self, index: int, key: str, message: str, queue: str | None = None, line: int | None = None
    ) -> None:
        # Key, message and name may quote the user's input: never echo it back unbounded.
        key, message = safe_yaml.shorten(key, 200), safe_yaml.shorten(message)
        queue = safe_yaml.shorten(queue, 200) if queue is not None else None
        self.index, self.key, self.message, self.queue, self.line = index, key, message, queue, line
        super().__init__(self._text())

    def _text(self) -> str:
        where = f"document {self.index}" + (f" (queue '{self.queue}')" if self.queue else "")
        if self.line is not None:
            where += f", line {self.line}"
        return f"{where}, {self.key}: {self.message}"

    def at_line(self, lines: dict[str, int]) -> QueueYamlError:
        """Set ``line`` from a document's key → line map: the key's line, else its nearest parent's."""
        key = self.key
        while self.line is None and key:
            self.line = lines.get(key)
            key = key.rpartition(".")[0]
        self.line = self.line or lines.get("")
        self.args = (self._text(),)
        return self


class QueueYamlTooLarge(QueueYamlError):
    """A file over ``QUEUE_YAML_MAX_BYTES`` (the API answers 413)."""


@dataclass
class QueueDocument:
    index: int
    name: str
    parent: str | None
    values: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    pool: str | None = None
    lines: dict[str, int] = field(default_factory=dict)  # dotted key → line in the file (from 1)


@dataclass
class ImportResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


# --- parsing -------------------------------------------------------------------
# A key glued to a flow collection without a space ("memory:{quota: 1}"): YAML reads
# "memory:{quota" as one plain word and reports the error where the mapping breaks, often a line later.
_METADATA_NAME = re.compile(r"^metadata:\s*(?:\{\s*name:\s*([\w.\-]+)|\n\s+name:\s*([\w.\-]+))", re.M)
_GLUED_FLOW = re.compile(r"^\s*(?:-\s+)?[\w.\-/]+:[{\[]")


def parse_documents(text: str) -> list[QueueDocument]:
    try:
        # Parsed once by libyaml and counted as it is read (core/safe_yaml.py): bytes, nesting and
        # values (aliases expanded) are bounded before anything is built, so the key-line walk
        # below never sees an alias bomb.
        nodes = safe_yaml.compose_all(text, safe_yaml.queue_yaml_bounds())
    except safe_yaml.YamlSyntaxError as exc:
        raise _syntax_error(text, exc.document, exc, exc.after_line) from None
    except safe_yaml.TooLargeYamlError as exc:
        raise QueueYamlTooLarge(0, "(yaml)", f"the file {exc} (QUEUE_YAML_MAX_BYTES)") from None
    except safe_yaml.UnsafeYamlError as exc:
        raise QueueYamlError(0, "(yaml)", f"the document {exc}") from None
    docs: list[QueueDocument] = []
    seen: dict[str, int] = {}
    for index, node in enumerate(nodes, start=1):
        if node is None or (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"):
            continue
        lines = _key_lines(node)
        try:
            raw = safe_yaml.construct(node)
        except yaml.YAMLError as exc:  # e.g. an unhashable key, found while constructing
            raise _syntax_error(text, index, exc, node.start_mark.line) from None
        glued = next((k for k in lines if re.search(r":[{\[]", k.rpartition(".")[2])), None)
        if glued is not None:
            word = glued.rpartition(".")[2]
            key = word.split(":", 1)[0]
            metadata = raw.get("metadata") if isinstance(raw, dict) else None
            name = metadata.get("name") if isinstance(metadata, dict) else None
            raise QueueYamlError(
                index, glued.rpartition(".")[0] or "(document)",
                f"'{word}' is read as one key: put a space after '{key}:' "
                "(without it YAML reads the whole text as a key, and its values are lost)",
                name if isinstance(name, str) else None, line=lines[glued],
            )  # fmt: skip
        try:
            doc = _parse_document(index, raw)
        except QueueYamlError as exc:
            raise exc.at_line(lines) from None
        doc.lines = lines
        if doc.name in seen:
            raise QueueYamlError(
                index, "metadata.name", f"queue '{doc.name}' appears twice (also document {seen[doc.name]})",
                doc.name,
            ).at_line(lines)  # fmt: skip
        seen[doc.name] = index
        docs.append(doc)
    return docs


def _key_lines(node: yaml.Node, prefix: str = "") -> dict[str, int]:
    """Dotted key → line (from 1) of every mapping key in a composed document."""
    lines = {prefix: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = f"{prefix}.{key_node.value}" if prefix else str(key_node.value)
            lines.update(_key_lines(value_node, key))
            lines[key] = key_node.start_mark.line + 1
    return lines


def _syntax_error(text: str, index: int, exc: yaml.YAMLError, first: int) -> QueueYamlError:
    """The error of document ``index``, which starts after line ``first`` (from 0)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    line = mark.line + 1 if mark is not None else None
    # The queue's name, when the broken document's text before the error names it.
    before = "\n".join(text.splitlines()[first : line or None])
    named = _METADATA_NAME.search(before.rpartition("\n---")[2])
    queue = (named.group(1) or named.group(2)) if named else None
    # A glued "key:{" between the document's start and the reported line is the real mistake.
    if line is not None:
        for number, content in enumerate(text.splitlines()[first:line], start=first + 1):
            if _GLUED_FLOW.match(content):
                key = content.split(":", 1)[0].strip().lstrip("- ")
                return QueueYamlError(
                    index, "(yaml)",
                    f"'{content.strip()}': put a space after '{key}:' (YAML reads '{key}:{{' as one word)",
                    queue, line=number,
                )  # fmt: skip
    column = f", column {mark.column + 1}" if mark is not None else ""
    context = getattr(exc, "context_mark", None)
    if context is not None and mark is not None and context.line != mark.line:
        what = getattr(exc, "context", None) or "in the construct"
        column += f" ({what} that starts on line {context.line + 1})"
    return QueueYamlError(index, "(yaml)", f"not valid YAML: {problem}{column}", queue, line=line)


def _mapping(index: int, key: str, value: Any, name: str | None = None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise QueueYamlError(index, key, f"must be a mapping (got {type(value).__name__})", name)
    return value


def _parse_document(index: int, raw: Any) -> QueueDocument:
    doc = _mapping(index, "(document)", raw)
    if doc.get("apiVersion") != API_VERSION:
        raise QueueYamlError(index, "apiVersion", f"must be {API_VERSION} (got {doc.get('apiVersion')!r})")
    if doc.get("kind") != KIND:
        raise QueueYamlError(index, "kind", f"must be {KIND} (got {doc.get('kind')!r})")
    metadata = _mapping(index, "metadata", doc.get("metadata"))
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise QueueYamlError(index, "metadata.name", "is required and must be a string")
    labels = _mapping(index, "metadata.labels", metadata.get("labels"), name)
    pool = labels.get(NODE_POOL_LABEL)
    if pool is not None and not isinstance(pool, str):
        raise QueueYamlError(index, FIELD_KEYS["node_pool"], "must be a node pool name", name)
    spec = _mapping(index, "spec", doc.get("spec"), name)
    parent = spec.get("parentQueue")
    if parent is not None and not isinstance(parent, str):
        raise QueueYamlError(index, "spec.parentQueue", "must be a queue name", name)
    result = QueueDocument(index=index, name=name, parent=parent or None, values={}, pool=pool or None)
    values = result.values
    values["display_name"] = _string(index, "spec.displayName", spec.get("displayName", ""), name)
    priority = spec.get("priority", 100)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise QueueYamlError(index, "spec.priority", f"must be an integer (got {priority!r})", name)
    values["priority"] = priority
    resources = _mapping(index, "spec.resources", spec.get("resources"), name)
    for r in RESOURCES:
        section = _mapping(index, f"spec.resources.{r}", resources.get(r), name)
        for kind, key in (("quota", "quota"), ("limit", "limit"), ("over_quota_weight", _YAML_WEIGHT)):
            path = f"spec.resources.{r}.{key}"
            number = _number(index, path, section.get(key, 0), name)
            if kind != "over_quota_weight" and r != "gpu":
                if number != number.to_integral_value():
                    raise QueueYamlError(index, path, f"must be a whole number (got {number})", name)
                if r == "memory":
                    values[f"{r}_{kind}"] = mb_to_mib(number)
                    continue
                values[f"{r}_{kind}"] = int(number)
                continue
            values[f"{r}_{kind}"] = number
    for attr, key in (
        ("preempt_min_runtime", "preemptMinRuntime"),
        ("reclaim_min_runtime", "reclaimMinRuntime"),
    ):
        values[attr] = _duration(index, f"spec.{key}", spec.get(key), name)
    return result


def _string(index: int, key: str, value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise QueueYamlError(index, key, f"must be a string (got {value!r})", name)
    return value


def _number(index: int, key: str, value: Any, name: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise QueueYamlError(index, key, f"must be a number (got {value!r})", name)
    try:
        return Decimal(str(value))
    except InvalidOperation:
        raise QueueYamlError(index, key, f"must be a number (got {value!r})", name) from None


def _duration(index: int, key: str, value: Any, name: str) -> timedelta | None:
    if value is None:
        return None
    try:
        return parse_go_duration(str(value))
    except ValueError as exc:
        raise QueueYamlError(index, key, str(exc), name) from None


# --- import --------------------------------------------------------------------
def import_queues(text: str) -> ImportResult:
    """Create or update the queues described in ``text``; all or nothing."""
    docs = parse_documents(text)
    result = ImportResult(warnings=[w for d in docs for w in d.warnings])
    with transaction.atomic():
        existing = {q.name: q for q in Queue.objects.filter(name__in=[d.name for d in docs])}
        queues: dict[str, Queue] = {}
        for doc in docs:
            queue = existing.get(doc.name) or Queue(name=doc.name)
            for attr, value in doc.values.items():
                setattr(queue, attr, value)
            _check_alone(doc, queue)
            queues[doc.name] = queue
        pools = {p.name: p for p in NodePool.objects.all()}
        for doc in _parents_first(docs):
            queue = queues[doc.name]
            queue.parent = _resolve_parent(doc, queues)
            queue.node_pool = _resolve_pool(doc, queue, pools)
            (result.updated if queue.pk else result.created).append(doc.name)
            queue.save(validate=False)
        # Children first, so an over-subscribed split is reported on the child that does not fit.
        for doc in reversed(_parents_first(docs)):
            stored = Queue.objects.select_related("parent").get(pk=queues[doc.name].pk)
            try:
                stored.full_clean()
            except ValidationError as exc:
                raise _as_yaml_error(doc, exc) from None
    return result


def _check_alone(doc: QueueDocument, queue: Queue) -> None:
    """Field and limit rules of one document, before anything is written."""
    # update_error_dict() stores ValidationError items; limit_errors() gives strings.
    errors: dict[str, list[Any]] = {}
    try:
        queue.clean_fields(exclude=["parent", "team"])
    except ValidationError as exc:
        errors = exc.update_error_dict(errors)
    if not errors:
        errors = tree_rules.limit_errors(queue)
    if errors:
        raise _as_yaml_error(doc, ValidationError(errors))


def _as_yaml_error(doc: QueueDocument, exc: ValidationError) -> QueueYamlError:
    field_name, messages = next(iter(exc.message_dict.items()))
    key = FIELD_KEYS.get(field_name, "spec")
    return QueueYamlError(doc.index, key, " ".join(messages), doc.name).at_line(doc.lines)


def _resolve_parent(doc: QueueDocument, queues: dict[str, Queue]) -> Queue | None:
    if doc.parent is None:
        return None
    if doc.parent in queues:
        return queues[doc.parent]
    parent = Queue.objects.filter(name=doc.parent).first()
    if parent is None:
        raise QueueYamlError(
            doc.index,
            "spec.parentQueue",
            f"parent queue '{doc.parent}' is neither in the file nor in the portal",
            doc.name,
        ).at_line(doc.lines)
    return parent


def _resolve_pool(doc: QueueDocument, queue: Queue, pools: dict[str, NodePool]) -> NodePool:
    """The labelled pool; unlabelled: the parent's, else the default pool."""
    if doc.pool is None:
        if queue.parent is not None:
            return queue.parent.node_pool
        return pools.get(DEFAULT_POOL_NAME) or NodePool.default_pool()
    if doc.pool not in pools:
        known = ", ".join(sorted(pools)) or "none yet"
        message = f"node pool '{doc.pool}' does not exist (pools: {known})"
        raise QueueYamlError(doc.index, FIELD_KEYS["node_pool"], message, doc.name).at_line(doc.lines)
    return pools[doc.pool]


def _parents_first(docs: list[QueueDocument]) -> list[QueueDocument]:
    by_name = {d.name: d for d in docs}
    ordered: list[QueueDocument] = []
    state: dict[str, str] = {}

    def visit(doc: QueueDocument) -> None:
        if state.get(doc.name) == "done":
            return
        if state.get(doc.name) == "visiting":
            raise QueueYamlError(
                doc.index, "spec.parentQueue", "the parent queues in this file form a cycle", doc.name
            ).at_line(doc.lines)
        state[doc.name] = "visiting"
        if doc.parent in by_name:
            visit(by_name[doc.parent])
        state[doc.name] = "done"
        ordered.append(doc)

    for doc in docs:
        visit(doc)
    return ordered


# --- export --------------------------------------------------------------------
def export_queues(queues: Iterable[Queue] | None = None) -> str:
    """Every queue (or the given ones) as multi-document YAML, parents before children."""
    selected = list(queues if queues is not None else Queue.objects.select_related("parent", "node_pool"))
    return yaml.safe_dump_all((queue_document(q) for q in tree_order(selected)), sort_keys=False)


def tree_order(queues: list[Queue]) -> list[Queue]:
    """Depth-first by name, each parent before its children."""
    names = {q.pk for q in queues}
    children: dict[int | None, list[Queue]] = {}
    for q in queues:
        key = q.parent_id if q.parent_id in names else None
        children.setdefault(key, []).append(q)
    ordered: list[Queue] = []

    def walk(parent_id: int | None) -> None:
        for q in sorted(children.get(parent_id, []), key=lambda q: q.name):
            ordered.append(q)
            walk(q.pk)

    walk(None)
    return ordered


def queue_document(queue: Queue) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if queue.display_name:
        spec["displayName"] = queue.display_name
    if queue.parent is not None:
        spec["parentQueue"] = queue.parent.name
    spec["priority"] = queue.priority
    spec["resources"] = {
        r: {
            "quota": _export_amount(r, getattr(queue, f"{r}_quota")),
            "limit": _export_amount(r, getattr(queue, f"{r}_limit")),
            _YAML_WEIGHT: _plain_number(getattr(queue, f"{r}_over_quota_weight")),
        }
        for r in RESOURCES
    }
    if queue.preempt_min_runtime is not None:
        spec["preemptMinRuntime"] = format_go_duration(queue.preempt_min_runtime)
    if queue.reclaim_min_runtime is not None:
        spec["reclaimMinRuntime"] = format_go_duration(queue.reclaim_min_runtime)
    metadata: dict[str, Any] = {"name": queue.name}
    if queue.node_pool.name != DEFAULT_POOL_NAME:
        metadata["labels"] = {NODE_POOL_LABEL: queue.node_pool.name}
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _export_amount(resource: str, value: Decimal | int) -> int | float:
    if resource == "memory" and value != UNLIMITED:
        return mib_to_mb(value)
    return _plain_number(value)


def _plain_number(value: Decimal | int) -> int | float:
    number = Decimal(value)
    return int(number) if number == number.to_integral_value() else float(number)
