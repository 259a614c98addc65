"""KAI's PodGroup objects and the cluster's PriorityClasses, applied to observed pods.

A pod whose ``pod-group-name`` annotation names an existing PodGroup
(scheduling.run.ai/v2alpha2) belongs to that group and takes its spec: minMember,
queue, priorityClassName, preemptibility (KAI's scheduler reads the group, not the
pod: cache/cluster_info/cluster_info.go). Otherwise the grouping of owners.py holds.

Priority (cluster_info.go getPodGroupPriority / getDefaultPriority): the named
PriorityClass's value; a name the cluster lacks gets the globalDefault class's value,
else 50. KAI's chart installs train (50), build-preemptible (75), build (100) and
inference (125); the portal uses those values for those names when the cluster has no
such class, so a cluster without KAI behaves as one with KAI's chart.
Preemptibility (common/podgroup/preemptible.go): explicit value, else priority >= 100
is non-preemptible; the engine applies that rule from ``priority`` when unset here.

Age (the job order's creation time, framework/session_plugins.go JobOrderFn): KAI reads the
PodGroup's creationTimestamp. A pod of an existing PodGroup takes the earlier of the
PodGroup's and its top owner's (a PodGroup made for pods that already existed, by KAI's
podgrouper or the portal, must not make them younger); other pods their top owner's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from ..base import ObservedPod
from .objects import POD_GROUP_ANNOTATION, parse_time
from .owners import Grouping, Json, as_int

# On the PodGroups the portal writes (pod_groups.py), so it knows them again after a restart and
# never takes another writer's (KAI's podgrouper, a user) PodGroup for its own.
WRITTEN_BY_LABEL, WRITTEN_BY = "kai-portal/written-by", "pod-grouper"
BUILTIN_PRIORITIES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
DEFAULT_PRIORITY = 50  # KAI's DefaultPodGroupPriority when no PriorityClass is globalDefault


@dataclass(frozen=True)
class PodGroupSpec:
    """What the portal reads of a PodGroup's spec (None: not set)."""

    min_member: int | None = None
    queue: str | None = None
    priority_class: str | None = None
    preemptibility: str | None = None
    created_at: datetime | None = None
    # Written by the portal from the pods' own settings (pod_groups.py): never read back into them.
    portal: bool = False


def parse_pod_group(raw: Json) -> tuple[tuple[str, str], PodGroupSpec]:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    min_member = as_int(spec.get("minMember"))
    preemptibility = spec.get("preemptibility")
    return (meta.get("namespace", ""), meta.get("name", "")), PodGroupSpec(
        min_member=min_member if min_member is not None and min_member >= 0 else None,
        queue=spec.get("queue") or None,
        priority_class=spec.get("priorityClassName") or None,
        preemptibility=preemptibility if preemptibility in ("preemptible", "non-preemptible") else None,
        created_at=parse_time(meta.get("creationTimestamp")),
        portal=(meta.get("labels") or {}).get(WRITTEN_BY_LABEL) == WRITTEN_BY,
    )


@dataclass(frozen=True)
class PriorityClasses:
    """The cluster's PriorityClasses (name -> value) and its globalDefault class, if any."""

    values: Mapping[str, int] = field(default_factory=dict)
    global_default: str | None = None
    listed: bool = False  # False: not read (no right, or an error); pods' spec.priority stands in

    @classmethod
    def from_items(cls, items: Iterable[Json]) -> PriorityClasses:
        values: dict[str, int] = {}
        default = None
        for item in items:
            name = (item.get("metadata") or {}).get("name", "")
            value = as_int(item.get("value"))
            if name and value is not None:
                values[name] = value
                if item.get("globalDefault"):
                    default = name
        return cls(values, default, listed=True)

    def changed(self, event_type: str, raw: Json) -> PriorityClasses:
        others = [
            {"metadata": {"name": name}, "value": value, "globalDefault": name == self.global_default}
            for name, value in self.values.items()
            if name != (raw.get("metadata") or {}).get("name")
        ]
        return PriorityClasses.from_items(others if event_type == "DELETED" else [*others, raw])

    def exists(self, name: str) -> bool:
        return name in self.values or name in BUILTIN_PRIORITIES

    def value(self, name: str | None) -> int:
        """The class's value; a name the cluster lacks (or none) gets the default priority."""
        if name is not None and name in self.values:
            return self.values[name]
        if name is not None and name in BUILTIN_PRIORITIES:
            return BUILTIN_PRIORITIES[name]
        return self.values[self.global_default] if self.global_default else DEFAULT_PRIORITY


def finish_pod(
    pod: ObservedPod,
    grouping: Grouping,
    pod_groups: Mapping[tuple[str, str], PodGroupSpec],
    classes: PriorityClasses,
) -> ObservedPod:
    """The pod as the engine should see it: its group, queue, minimum, priority, preemptibility."""
    pod_group = pod.annotations.get(POD_GROUP_ANNOTATION)
    if grouping.pod_group is not None and pod_group == grouping.pod_group.name:
        # The podgrouper's own annotation (KAI's, or the portal's in its place): the pod is
        # grouped by its owners as before it was written, so its job stays the same.
        pod_group = None
    spec = pod_groups.get((pod.namespace, pod_group)) if pod_group else None
    if spec is not None and not spec.portal:
        return replace(
            pod,
            queue=spec.queue or grouping.queue,
            min_member=spec.min_member,
            priority_class=spec.priority_class,
            priority=classes.value(spec.priority_class),
            preemptibility=spec.preemptibility,
            job_created_at=_earliest(spec.created_at, grouping.created_at),
            pod_group_name=pod_group or "",
        )
    changes: dict[str, Any] = {}
    if not pod_group:  # an annotation naming a PodGroup not (yet) created still groups the pods
        changes["job"] = grouping.job
    name, priority = _priority(pod, grouping, classes)
    return replace(
        pod,
        queue=grouping.queue,
        min_member=grouping.min_member,
        priority_class=name,
        priority=priority,
        preemptibility=grouping.preemptibility,
        job_created_at=grouping.created_at,
        pod_group_name=pod_group or (grouping.pod_group.name if grouping.pod_group is not None else ""),
        **changes,
    )


def _earliest(*moments: datetime | None) -> datetime | None:
    known = [m for m in moments if m is not None]
    return min(known) if known else None


def _priority(pod: ObservedPod, grouping: Grouping, classes: PriorityClasses) -> tuple[str, int]:
    """KAI's podgrouper: the first candidate naming an existing class, else the kind's default."""
    for name in grouping.priority_candidates:
        if classes.exists(name):
            return name, classes.value(name)
        if not classes.listed and pod.priority is not None and name == pod.priority_class:
            return name, pod.priority  # classes unreadable: admission's spec.priority for this name
    default = grouping.default_priority_class
    return default, classes.value(default)
