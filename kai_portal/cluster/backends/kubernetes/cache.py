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

Two ways to follow the watches. Without ``start_watches`` (a Celery worker's cycle, the tests of
the components) each ``refresh`` opens short watch windows from the last versions, as above. After
``start_watches`` (the scheduler process, ``manage.py run_scheduler``; issue 29) informers
(informer.py) keep one watch per resource open in background threads and apply every event to a
second, live ``ClusterCache`` under its lock as it arrives; ``refresh`` then only copies the live
state (after the first lists), so a cycle reads a fixed copy and waits on no watch. Each event says
whether a cycle should follow it soon (``on_change``): a pod of ours that is new and not bound, a
pod that finished or went (ours, or another scheduler's that held room), a node added, removed or
changed in what the scheduler reads, a PodGroup or PriorityClass changed. A bind landing, a pod
starting, a node's heartbeat do not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from typing import Any

from kubernetes import client

from ..base import ClusterState, ForeignPod, NodeUsage, ObservedNode, ObservedPod, TaskStatus
from .client import CALL_ERRORS, Lister
from .gpu_sharing import RESERVATION_APP, RESERVATION_APP_LABEL, RESERVED_BY_LABEL
from .informer import Informer
from .objects import parse_foreign_pod, parse_node, parse_pod
from .owners import Grouping, OwnerCache, group_pod
from .pod_grouping import PodGroupSpec, PriorityClasses, finish_pod, parse_pod_group

POD_GROUP_API = ("scheduling.run.ai", "v2alpha2", "podgroups")
# PodGroups and PriorityClasses change rarely: their watches end after this quiet time.
SETTINGS_WATCH_WINDOW = 0.25
# How long a cycle waits for the nodes' and pods' first lists after the watches start (the first
# cycle of a scheduler process); past it the cycle fails saying which list is missing, and why.
FIRST_LIST_SECONDS = 120.0
FINISHED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)


class NotListedYet(RuntimeError):
    """A cycle may not run on a cache whose nodes or pods have not been listed."""


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
        # Background watches (start_watches): the live cache they write, under its lock.
        self.lock = threading.Lock()
        self._live: ClusterCache | None = None
        self._informers: dict[str, Informer] = {}
        self._settings_changed = False  # the live cache's pods need finishing again

    # ----- background watches (issue 29) -------------------------------------------------------

    def start_watches(
        self, on_change: Callable[[str], None], api_client: client.ApiClient
    ) -> dict[str, Informer]:
        """Follow nodes, pods, PodGroups and PriorityClasses in background threads from now on.

        ``api_client`` is the watches' own: each open watch holds a pooled connection for minutes,
        and on the cycle's client they would leave the binds too few (each bind past the pool's
        size then opens, and drops, a connection of its own)."""
        if self._live is not None:
            return self._informers
        live = ClusterCache(client.CoreV1Api(api_client), self.lister, self.owners, self.scheduler_name,
                            self.queue_label_keys, self.pool_label)  # fmt: skip
        group, version, plural = POD_GROUP_API
        sources: dict[str, tuple[Callable[..., Any], Callable[[], str | None], Any]] = {
            "nodes": (live.core.list_node, live._list_nodes, live._apply_node),
            "pods": (live.core.list_pod_for_all_namespaces, live._list_pods, live._apply_pod),
            "podgroups": (partial(live.custom.list_cluster_custom_object, group, version, plural),
                          live._list_pod_groups_live, live._apply_pod_group_live),
            "priorityclasses": (live.scheduling.list_priority_class, live._list_priority_classes_live,
                                live._apply_priority_class_live),
        }  # fmt: skip
        self._live = live
        self._informers = {
            name: Informer(name, list_call, relist, apply, live.lock, on_change)
            for name, (list_call, relist, apply) in sources.items()
        }
        for informer in self._informers.values():
            informer.start()
        return self._informers

    def stop_watches(self) -> list[Informer]:
        """Stop the informers (their threads end after the current event); returns them."""
        for informer in self._informers.values():
            informer.stop()
        return list(self._informers.values())

    @property
    def watching(self) -> bool:
        return self._live is not None

    def _copy_live(self, live: ClusterCache) -> None:
        """The live cache's state as this cycle's fixed copy (after the nodes' and pods' first lists).

        PodGroups and PriorityClasses are optional (no CRD, no right to read them): pods keep the
        settings their owners give them until those lists succeed, as with the watch windows."""
        for name in ("nodes", "pods"):
            informer = self._informers[name]
            if not informer.synced.wait(FIRST_LIST_SECONDS):
                why = informer.problem or "no answer"
                raise NotListedYet(
                    f"The {name} of the cluster have not been listed yet ({why}); the cycle does not "
                    "schedule on a partial view. The watch keeps retrying."
                )
        with live.lock:
            if live._settings_changed:
                live.pods = {key: live._finish(*grouped) for key, grouped in live._grouped.items()}
                live._settings_changed = False
            self.nodes, self.pods, self.foreign = dict(live.nodes), dict(live.pods), dict(live.foreign)
            self.node_rv = self._informers["nodes"].resource_version
            self.pod_rv = self._informers["pods"].resource_version
            # What the PodGroup writer reads (grouping_of, pod_group_specs, pod_groups_listed).
            self._grouped, self._pod_groups = dict(live._grouped), dict(live._pod_groups)
            pod_groups = self._informers["podgroups"]
            self._pod_group_rv = pod_groups.resource_version if pod_groups.synced.is_set() else None

    # ----- one refresh per cycle ---------------------------------------------------------------

    def refresh(self) -> None:
        """Copy the live state when the watches run in the background; else list once, then follow
        the watches in windows.

        The node watch and the PodGroup / PriorityClass watches run beside the pod watch (each
        waits out its window, so in series a cycle waited for the sum): they write separate
        state, and pods parsed while the settings changed are finished again below."""
        if self._live is not None:
            self._copy_live(self._live)
            return
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

    def pod_group_name_of(self, key: tuple[str, str]) -> str | None:
        """The PodGroup KAI's podgrouper would name for one of our pods (its ``pod-group-name``
        annotation); None where PodGroups are not written (no CRD, no right) or the owners are
        not known yet."""
        grouping = self.grouping_of(key)
        if not self.pod_groups_listed or grouping is None or grouping.pod_group is None:
            return None
        return grouping.pod_group.name

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

    def _apply_node(self, event_type: str, raw: dict[str, Any]) -> bool:
        """Apply one node event; True when the node came, went or changed in what a cycle reads
        (not a heartbeat, which moves only its resourceVersion)."""
        node = parse_node(raw, self.pool_label)
        if event_type == "DELETED":
            return self.nodes.pop(node.name, None) is not None
        before = self.nodes.get(node.name)
        self.nodes[node.name] = node
        return before is None or _read_part(before) != _read_part(node)

    def _apply_pod(self, event_type: str, raw: dict[str, Any]) -> bool:
        """Apply one pod event; True when a cycle has something new to do: a pod of ours that is
        new and not bound, or room freed (a pod finished or gone, ours or another scheduler's)."""
        meta = raw.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if not self._is_ours(raw):
            foreign = self._parse_foreign(raw) if event_type != "DELETED" else None
            if foreign is None:  # gone, finished or not bound: holds nothing
                return self.foreign.pop(key, None) is not None
            self.foreign[key] = foreign
            return False
        before = self.pods.get(key)
        if event_type == "DELETED":
            self._grouped.pop(key, None)
            self.pods.pop(key, None)
            return before is not None
        pod, grouping = self._parse_pod(raw)
        self._grouped[pod.key] = (pod, grouping)
        self.pods[pod.key] = self._finish(pod, grouping)
        if before is None or before.uid != pod.uid:
            return not pod.node  # a pod bound elsewhere (a restart's list, say) asks nothing
        return pod.status in FINISHED and before.status not in FINISHED

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

    def _apply_pod_group(self, event_type: str, raw: dict[str, Any]) -> bool:
        key, spec = parse_pod_group(raw)
        before = self._pod_groups.get(key)
        if event_type == "DELETED":
            self._pod_groups.pop(key, None)
        else:
            self._pod_groups[key] = spec
        return before != self._pod_groups.get(key)

    # The live cache's settings: a change finishes every pod again at the next copy (_copy_live).

    def _list_pod_groups_live(self) -> str | None:
        self._settings_changed = True
        return self._list_pod_groups()

    def _apply_pod_group_live(self, event_type: str, raw: dict[str, Any]) -> bool:
        changed = self._apply_pod_group(event_type, raw)
        self._settings_changed = self._settings_changed or changed
        return changed

    def _list_priority_classes_live(self) -> str | None:
        self._settings_changed = True
        return self._list_priority_classes()

    def _apply_priority_class_live(self, event_type: str, raw: dict[str, Any]) -> bool:
        changed = self._apply_priority_class(event_type, raw)
        self._settings_changed = self._settings_changed or changed
        return changed

    def _list_priority_classes(self) -> str | None:
        items, resource_version = self.lister.list_all(self.scheduling.list_priority_class)
        self._priority_classes = PriorityClasses.from_items(items)
        return resource_version

    def _apply_priority_class(self, event_type: str, raw: dict[str, Any]) -> bool:
        before = self._priority_classes
        self._priority_classes = self._priority_classes.changed(event_type, raw)
        return before != self._priority_classes

    def _is_ours(self, raw: dict[str, Any]) -> bool:
        # Only these pods are ever bound, evicted or given events (binding another
        # scheduler's pod is harmful); every other pod is a ForeignPod.
        return bool((raw.get("spec") or {}).get("schedulerName") == self.scheduler_name)


def _read_part(node: ObservedNode) -> ObservedNode:
    """The node without its resourceVersion, which every heartbeat moves."""
    return replace(node, resource_version=None)
