"""The cluster as the scheduler last saw it: nodes, our pods, what other pods hold (KAI's cache).

The first refresh lists nodes and all pods (paged) and keeps each list's resourceVersion; later
refreshes open a short watch from that version and apply the deltas, so a cycle never re-lists a
large cluster. A 410 Gone (the version was compacted away) falls back to a fresh list
(``client.Lister``). Pods naming our scheduler are parsed in full and grouped into pod groups as
KAI's pod-grouper would (owners.py, pod_grouping.py); of every other pod only its node and requests are kept
while it is bound and not finished (``ForeignPod``): KAI charges every pod on a node to it,
whichever scheduler placed it, and those pods are never bound, evicted or given events.

KAI's ``PodGroup`` objects (scheduling.run.ai/v2alpha2, listed and watched when the CRD exists)
and the cluster's PriorityClasses (listed and watched) are followed beside the pods: a change to
either finishes every pod again.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

from kubernetes import client

from ..base import ClusterState, ForeignPod, NodeUsage, ObservedNode, ObservedPod, TaskStatus
from .client import CALL_ERRORS, Lister
from .gpu_sharing import RESERVATION_APP, RESERVATION_APP_LABEL, RESERVED_BY_LABEL
from .objects import parse_foreign_pod, parse_node, parse_pod
from .owners import Grouping, OwnerCache, group_pod
from .pod_grouping import PodGroupSpec, PriorityClasses, finish_pod, parse_pod_group

POD_GROUP_API = ("scheduling.run.ai", "v2alpha2", "podgroups")
# PodGroups and PriorityClasses change rarely: their watches end after this quiet time.
SETTINGS_WATCH_WINDOW = 0.25


class ClusterCache:
    """Nodes, our pods and foreign pods, kept current by list + watch."""

    def __init__(
        self,
        core: client.CoreV1Api,
        lister: Lister,
        owners: OwnerCache,
        scheduler_name: str,
        queue_label_keys: Sequence[str],
        pool_label: str,
    ) -> None:
        self.core = core  # the backend's own (tests watch its calls)
        self.scheduling = client.SchedulingV1Api(core.api_client)
        self.custom = client.CustomObjectsApi(core.api_client)
        self.lister = lister
        self.owners = owners
        self.scheduler_name = scheduler_name
        self.queue_label_keys = tuple(queue_label_keys)
        self.pool_label = pool_label
        self.nodes: dict[str, ObservedNode] = {}
        self.pods: dict[tuple[str, str], ObservedPod] = {}
        # Bound, unfinished pods of other schedulers: what they hold on their nodes.
        self.foreign: dict[tuple[str, str], ForeignPod] = {}
        # Our own reservation pods (gpu_sharing.py) are no foreign load: the engine models their room.
        self._own_reservations = {RESERVATION_APP_LABEL: RESERVATION_APP, RESERVED_BY_LABEL: scheduler_name}
        self.node_rv: str | None = None
        self.pod_rv: str | None = None
        # Each pod as parsed with the pod group its owners give it; pods is the finished view.
        self._grouped: dict[tuple[str, str], tuple[ObservedPod, Grouping]] = {}
        self._pod_groups: dict[tuple[str, str], PodGroupSpec] = {}
        self._pod_group_rv: str | None = None
        self._priority_classes = PriorityClasses()
        self._priority_class_rv: str | None = None

    def refresh(self) -> None:
        """List once, then follow the watches.

        The node watch and the PodGroup / PriorityClass watches run beside the pod watch (each
        waits out its window, so in series a cycle waited for the sum): they write separate
        state, and pods parsed while the settings changed are finished again below."""
        with ThreadPoolExecutor(max_workers=2) as side:
            nodes = side.submit(
                lambda: self.lister.sync(
                    self.node_rv, self._list_nodes, self.core.list_node, self._apply_node
                )
            )
            settings = side.submit(self._follow_settings)
            pod_rv = self.lister.sync(
                self.pod_rv, self._list_pods, self.core.list_pod_for_all_namespaces, self._apply_pod
            )
            self.node_rv, settings_changed = nodes.result(), settings.result()
        self.pod_rv = pod_rv
        if settings_changed:
            self.pods = {key: self._finish(*grouped) for key, grouped in self._grouped.items()}

    def state(self) -> ClusterState:
        """What the cache holds now, as copies the caller may keep."""
        external: dict[str, NodeUsage] = {}
        for pod in self.foreign.values():
            if pod.node in self.nodes:  # a deleted node's pods go with it
                external[pod.node] = external.get(pod.node, NodeUsage()).plus(pod)
        return ClusterState(
            nodes=dict(self.nodes),
            pods={key: pod for key, pod in self.pods.items() if not self._orphaned(pod)},
            node_resource_version=self.node_rv,
            pod_resource_version=self.pod_rv,
            external=external,
        )

    def grouping_of(self, key: tuple[str, str]) -> Grouping | None:
        """One of our pods' grouping by owners, with the PodGroup KAI's podgrouper would write."""
        grouped = self._grouped.get(key)
        return grouped[1] if grouped is not None else None

    @property
    def pod_groups_listed(self) -> bool:
        """Whether PodGroups could be listed (no CRD, a cluster without KAI's, or no right: False)."""
        return self._pod_group_rv is not None

    def pod_group_specs(self) -> dict[tuple[str, str], PodGroupSpec]:
        """The PodGroups in the cluster, by (namespace, name), as last listed or watched."""
        return dict(self._pod_groups)

    def _orphaned(self, pod: ObservedPod) -> bool:
        """A live pod bound to a node that no longer exists.

        KAI drops such pods with their node: they hold nothing and must never be
        bound again (the binding would be refused, every cycle). The pod garbage
        collector deletes them from the cluster shortly after.
        """
        finished = pod.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        return bool(pod.node) and pod.node not in self.nodes and not finished

    def _list_nodes(self) -> str | None:
        items, resource_version = self.lister.list_all(self.core.list_node)
        self.nodes = {node.name: node for node in (parse_node(i, self.pool_label) for i in items)}
        return resource_version

    def _list_pods(self) -> str | None:
        # Every pod, not only ours (no field selector): other schedulers' pods hold room too.
        items, resource_version = self.lister.list_all(self.core.list_pod_for_all_namespaces)
        foreign = (self._parse_foreign(item) for item in items if not self._is_ours(item))
        self.foreign = {(f.namespace, f.name): f for f in foreign if f is not None}
        items = [item for item in items if self._is_ours(item)]
        self.owners.prefetch(items)
        self._grouped = {}
        for item in items:
            pod, grouping = self._parse_pod(item)
            self._grouped[pod.key] = (pod, grouping)
        self.pods = {key: self._finish(*grouped) for key, grouped in self._grouped.items()}
        return resource_version

    def _apply_node(self, event_type: str, raw: dict[str, Any]) -> None:
        node = parse_node(raw, self.pool_label)
        if event_type == "DELETED":
            self.nodes.pop(node.name, None)
        else:
            self.nodes[node.name] = node

    def _apply_pod(self, event_type: str, raw: dict[str, Any]) -> None:
        if not self._is_ours(raw):
            meta = raw.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            foreign = self._parse_foreign(raw) if event_type != "DELETED" else None
            if foreign is None:
                self.foreign.pop(key, None)  # gone, finished or not bound: holds nothing
            else:
                self.foreign[key] = foreign
            return
        if event_type == "DELETED":
            meta = raw.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            self._grouped.pop(key, None)
            self.pods.pop(key, None)
            return
        pod, grouping = self._parse_pod(raw)
        self._grouped[pod.key] = (pod, grouping)
        self.pods[pod.key] = self._finish(pod, grouping)

    def _parse_foreign(self, raw: dict[str, Any]) -> ForeignPod | None:
        return parse_foreign_pod(raw, ignore=self._own_reservations)

    def _parse_pod(self, raw: dict[str, Any]) -> tuple[ObservedPod, Grouping]:
        """The pod, its spec.priority (set by admission from its class), and its pod group."""
        pod = parse_pod(raw, self.queue_label_keys, self.pool_label)
        priority = (raw.get("spec") or {}).get("priority")
        if isinstance(priority, int) and not isinstance(priority, bool):
            pod = replace(pod, priority=priority)
        return pod, group_pod(raw, self.queue_label_keys, self.owners.read)

    def _finish(self, pod: ObservedPod, grouping: Grouping) -> ObservedPod:
        return finish_pod(pod, grouping, self._pod_groups, self._priority_classes)

    def _follow_settings(self) -> bool:
        """List, then watch, PodGroups and PriorityClasses; True when either changed.

        Neither may fail a cycle: without the PodGroup CRD (a cluster without KAI) or
        without the right to read them, pods keep the settings their owners give them,
        and the next cycle lists again.
        """
        # Compared by content: a bookmark moves the versions without changing anything.
        before = (dict(self._pod_groups), self._priority_classes)
        group, version, plural = POD_GROUP_API
        list_pod_groups = partial(self.custom.list_cluster_custom_object, group, version, plural)
        try:
            self._pod_group_rv = self.lister.sync(
                self._pod_group_rv,
                self._list_pod_groups,
                list_pod_groups,
                self._apply_pod_group,
                window=SETTINGS_WATCH_WINDOW,
            )
        except CALL_ERRORS:
            self._pod_groups, self._pod_group_rv = {}, None
        try:
            self._priority_class_rv = self.lister.sync(
                self._priority_class_rv,
                self._list_priority_classes,
                self.scheduling.list_priority_class,
                self._apply_priority_class,
                window=SETTINGS_WATCH_WINDOW,
            )
        except CALL_ERRORS:
            self._priority_classes, self._priority_class_rv = PriorityClasses(), None
        return before != (self._pod_groups, self._priority_classes)

    def _list_pod_groups(self) -> str | None:
        group, version, plural = POD_GROUP_API
        items, resource_version = self.lister.list_all(
            partial(self.custom.list_cluster_custom_object, group, version, plural)
        )
        self._pod_groups = dict(parse_pod_group(item) for item in items)
        return resource_version

    def _apply_pod_group(self, event_type: str, raw: dict[str, Any]) -> None:
        key, spec = parse_pod_group(raw)
        if event_type == "DELETED":
            self._pod_groups.pop(key, None)
        else:
            self._pod_groups[key] = spec

    def _list_priority_classes(self) -> str | None:
        items, resource_version = self.lister.list_all(self.scheduling.list_priority_class)
        self._priority_classes = PriorityClasses.from_items(items)
        return resource_version

    def _apply_priority_class(self, event_type: str, raw: dict[str, Any]) -> None:
        self._priority_classes = self._priority_classes.changed(event_type, raw)

    def _is_ours(self, raw: dict[str, Any]) -> bool:
        # Only these pods are ever bound, evicted or given events (binding another
        # scheduler's pod is harmful); every other pod is a ForeignPod.
        return bool((raw.get("spec") or {}).get("schedulerName") == self.scheduler_name)
