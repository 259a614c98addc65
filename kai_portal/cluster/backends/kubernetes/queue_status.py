"""``Queue.status`` as KAI's queue controller writes it (pkg/queuecontroller).

KAI's controller keeps, on each Queue object's status subresource: ``childQueues`` (the names of
the queues whose ``spec.parentQueue`` is this one), and ``allocated``, ``allocatedNonPreemptible``
and ``requested``: the sums of its PodGroups' ``resourcesStatus`` plus its children's own sums.
It writes no ``conditions`` (the API declares Orphan and OverQuota, nothing sets them). Here the
sums come from the pod groups of the cycle (``pod_groups.group_usage``, the same numbers the
portal writes on its PodGroups), summed up the tree at once; a queue's status is written (a JSON
merge patch on ``queues/<name>/status``, naming each value to drop) only when it differs from the
object's, so an idle cluster costs no writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes import client

from ..base import OperationResult
from .client import FIELD_MANAGER, Caller, concurrently
from .pod_groups import DEFAULT_QUEUE, PodGroupPlan
from .resource_sums import Resources, add, quantities

GROUP, VERSION, PLURAL = "scheduling.run.ai", "v2", "queues"
MERGE_PATCH = "application/merge-patch+json"
RESOURCE_FIELDS = ("allocated", "allocatedNonPreemptible", "requested")
STATUS_FIELDS = ("childQueues", *RESOURCE_FIELDS)


def queue_usage(groups: Iterable[PodGroupPlan]) -> dict[str, tuple[Resources, Resources, Resources]]:
    """Each queue's own (allocated, allocated non-preemptible, requested), from its pod groups."""
    out: dict[str, tuple[Resources, Resources, Resources]] = {}
    # In KAI's listing order (by namespace and name): a sum keeps the memory unit summed first.
    for group in sorted(groups, key=lambda g: (g.namespace, g.name)):
        pods = group.pods
        if not pods:
            continue
        requested, allocated, non_preemptible = group.usage
        queue = pods[0].queue or DEFAULT_QUEUE
        total = out.setdefault(queue, ({}, {}, {}))
        add(total[0], allocated)
        add(total[1], non_preemptible)
        add(total[2], requested)
    return out


def desired_statuses(
    queues: Mapping[str, Mapping[str, Any]], usage: Mapping[str, tuple[Resources, Resources, Resources]]
) -> dict[str, dict[str, Any]]:
    """Each Queue object's status fields as KAI's controller leaves them once settled."""
    children: dict[str, list[str]] = {name: [] for name in queues}
    for name, obj in queues.items():
        parent = ((obj.get("spec") or {}).get("parentQueue")) or ""
        if parent in children:
            children[parent].append(name)
    totals: dict[str, tuple[Resources, Resources, Resources]] = {}

    def total(name: str, path: frozenset[str]) -> tuple[Resources, Resources, Resources]:
        if name in totals:
            return totals[name]
        own = usage.get(name, ({}, {}, {}))
        sums: tuple[Resources, Resources, Resources] = (dict(own[0]), dict(own[1]), dict(own[2]))
        for child in children[name]:
            if child not in path:  # a parent loop in the objects must not recurse forever
                below = total(child, path | {child})
                for i in range(3):
                    add(sums[i], below[i])
        totals[name] = sums
        return sums

    out: dict[str, dict[str, Any]] = {}
    for name in queues:
        allocated, non_preemptible, requested = total(name, frozenset({name}))
        status: dict[str, Any] = {}
        if children[name]:
            status["childQueues"] = sorted(children[name])
        for key, value in zip(RESOURCE_FIELDS, (allocated, non_preemptible, requested), strict=True):
            if quantities(value):
                status[key] = quantities(value)
        out[name] = status
    return out


def status_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that turns the object's status fields into ``desired``; None when equal.

    Only the controller's fields are touched; a value the object has that ``desired`` lacks is
    named with null, as a merge patch removes it."""
    now = {key: current.get(key) for key in STATUS_FIELDS if current.get(key)}
    if now == dict(desired):
        return None
    patch: dict[str, Any] = {}
    for key in STATUS_FIELDS:
        want, have = desired.get(key), now.get(key)
        if want == have:
            continue
        if key in RESOURCE_FIELDS and want and isinstance(have, Mapping):
            patch[key] = {**{name: None for name in have if name not in want}, **want}
        else:
            patch[key] = want  # None removes it
    return {"status": patch}


class QueueStatusWriter:
    """Writes the Queue objects' status from the cycle's pod groups, only where it changed."""

    def __init__(self, custom: client.CustomObjectsApi, caller: Caller, concurrency: int) -> None:
        self.custom = custom
        self.caller = caller
        self.concurrency = concurrency
        self._written: dict[str, dict[str, Any]] = {}  # what was last written, until the watch shows it

    def write(
        self, queues: Mapping[str, Mapping[str, Any]], groups: Iterable[PodGroupPlan]
    ) -> list[OperationResult]:
        desired = desired_statuses(queues, queue_usage(groups))
        todo = []
        for name, status in desired.items():
            if self._written.get(name) == status:
                continue  # written already; the Queue watch has not shown it yet
            patch = status_patch((queues[name].get("status") or {}), status)
            if patch is None:
                self._written.pop(name, None)  # the object says it: a later change elsewhere is mended
            else:
                todo.append((name, status, patch))
        self._written = {k: v for k, v in self._written.items() if k in desired}

        def one(item: tuple[str, dict[str, Any], dict[str, Any]]) -> OperationResult:
            name, status, patch = item
            result = self.caller.call(
                "queue-status",
                "",
                name,
                lambda: self.custom.patch_cluster_custom_object_status(
                    GROUP,
                    VERSION,
                    PLURAL,
                    name,
                    patch,
                    field_manager=FIELD_MANAGER,
                    _preload_content=False,
                    _content_type=MERGE_PATCH,
                ),
            )
            if result.ok:
                self._written[name] = status
            return result

        return concurrently(self.concurrency, one, todo)
