"""The Kubernetes cluster backend, on the official `kubernetes` client.

Observation: the first observe() lists nodes and all pods (paged) and keeps
each list's resourceVersion; later calls open a short watch from that version
and apply the deltas to a cached state, so a cycle never re-lists a large
cluster. A 410 Gone (the version was compacted away) falls back to a fresh
list. Pods naming our scheduler are parsed in full; of every other pod only
its node and requests are kept while it is bound and not finished
(`ForeignPod`): KAI charges every pod on a node to it, whichever scheduler
placed it, and those pods are never bound, evicted or given events.

Writes, each caught on its own so one bad pod never stops the others:
- bind: POST pods/<pod>/binding. The chosen GPU devices travel as annotations
  on the Binding itself; the API server copies a Binding's annotations onto
  the pod in the same write, so devices and node can never disagree:
  `kai.scheduler/gpu-devices` ("0,3") and, for shared GPUs,
  `kai.scheduler/gpu-fraction` (the fraction granted per device).
- evict: POST pods/<pod>/eviction with a policy/v1 Eviction, so
  PodDisruptionBudgets are honoured.
- pod condition: a pending pod the cycle explains as Unschedulable gets
  `PodScheduled=False` (reason Unschedulable, the engine's message) through
  PATCH pods/<pod>/status, as kube-scheduler and KAI write it, so cluster
  autoscalers and `kubectl describe pod` see why it waits. Written when the
  message changes, not every cycle.
- pod groups (owners.py): a pod's job is the pod group KAI's pod-grouper would
  make, from its top owner (ownerReferences followed with GETs, each owner read
  once and cached by uid): queue label, gang minimum, priority class and
  preemptibility come from the owners. A pod naming a KAI `PodGroup`
  (scheduling.run.ai/v2alpha2, listed and watched when the CRD exists) takes that
  object's spec instead. Priorities are the values of the cluster's
  PriorityClasses (listed and watched), KAI's built-in classes (train 50,
  build-preemptible 75, build 100, inference 125) standing in for any the
  cluster lacks, as if KAI's chart had installed them.
- events: core/v1 Events (involvedObject, reason, message, type,
  source.component, first/lastTimestamp, count). That is what client-go's
  classic recorder writes and what `kubectl describe pod` and
  `kubectl get events` show on every Kubernetes version. Aggregated as
  client-go does: one Event object per object per distinct (type, reason,
  message), named from a hash of those and the object's uid, so a repeat (this
  process's or a restarted worker's: create answers 409) bumps `count` and
  `lastTimestamp` with a PATCH instead of creating a new object; repeats are
  rate-limited per object and reason as client-go's spam filter does (25, then
  one per 5 minutes: event_spam.py). PodGroup
  events are written only for pods grouped by a PodGroup (the
  `pod-group-name` annotation): a bare pod or a Job's pods have no PodGroup
  object, and their pods' own events already carry the reason.
- evicted pods: after the Eviction API accepts, the pod's `DisruptionTarget`
  condition is set as KAI's evictor writes it (reason PreemptionByScheduler,
  the eviction message); the API server's own (EvictionByEvictionAPI) only
  says that some eviction happened.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from .base import (
    ApplyReport,
    Bind,
    ClusterState,
    EventType,
    Evict,
    ForeignPod,
    NodeUsage,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
    TaskStatus,
)
from .event_spam import EventSpamFilter
from .gpu_sharing import (
    RESERVATION_APP,
    RESERVATION_APP_LABEL,
    RESERVED_BY_LABEL,
    GpuSharing,
    GpuSharingUnavailable,
)
from .kubernetes_objects import (
    BATCH_MIN_MEMBER_ANNOTATION,
    GPU_DEVICES_ANNOTATION,
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_NUM_DEVICES_ANNOTATION,
    GPU_RESOURCE,
    POD_GROUP_ANNOTATION,
    PORTAL_JOB_LABEL,
    PORTAL_JOB_UID_LABEL,
    PREEMPTIBILITY_LABEL,
    PRIORITY_CLASS_LABEL,
    parse_foreign_pod,
    parse_node,
    parse_pod,
)
from .owners import CUSTOM_OWNERS, MAX_OWNER_DEPTH, Grouping, Json, group_pod, owner_ref, readable
from .pod_groups import PodGroupSpec, PriorityClasses, finish_pod, parse_pod_group
from .responses import release

GPU_FRACTION_GRANTED_ANNOTATION = "kai.scheduler/gpu-fraction"
POD_GROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
POD_GROUP_API = ("scheduling.run.ai", "v2alpha2", "podgroups")
LIST_PAGE_SIZE = 500
# PodGroups and PriorityClasses change rarely: their watches end after this quiet time.
SETTINGS_WATCH_WINDOW = 0.25
OWNER_RETRY_SECONDS = 30
EVENT_CACHE_LIMIT = 10_000
# Binds in flight at once: enough to hide the API server's round trip, few enough that a large
# cycle does not flood it (kube-scheduler binds asynchronously in goroutines, unbounded).
BIND_CONCURRENCY = 16
UNSCHEDULABLE = "Unschedulable"
DISRUPTED_BY_SCHEDULER = "PreemptionByScheduler"  # KAI's evictor (v1.PodReasonPreemptionByScheduler)
# An Event name is a DNS subdomain: the object's name, ".", 16 hex digits of the hash.
EVENT_NAME_LIMIT = 253
EVENT_HASH_LENGTH = 16
# The writes of a scheduling cycle: only the leader makes them (submit and cancel are the users').
CYCLE_WRITES = frozenset({"bind", "evict", "event", "condition"})
# Errors that mean "this one call failed", as opposed to a bug in our code.
CALL_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


class KubernetesBackend:
    """A `ClusterBackend` over the Kubernetes API."""

    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        scheduler_name: str = "kai-scheduler",
        queue_label_keys: Sequence[str] = ("kai.scheduler/queue", "runai/queue"),
        pool_label: str = "kai.scheduler/node-pool",
        namespace: str = "default",
        watch_timeout_seconds: int = 1,
        gpu_sharing: GpuSharing | None = None,
        owner_read_threads: int = 8,
        bind_concurrency: int = BIND_CONCURRENCY,
    ) -> None:
        self.api_client = api_client or _load_api_client()
        # Binds in flight at once (apply): at most the client's connection pool, which holds
        # cpu_count * 5 connections unless the configuration says otherwise.
        pool_size = getattr(self.api_client.configuration, "connection_pool_maxsize", None) or 1
        self.bind_concurrency = max(1, min(bind_concurrency, pool_size))
        self.core = client.CoreV1Api(self.api_client)
        self.batch = client.BatchV1Api(self.api_client)
        self.apps = client.AppsV1Api(self.api_client)
        self.scheduling = client.SchedulingV1Api(self.api_client)
        self.custom = client.CustomObjectsApi(self.api_client)
        self.scheduler_name = scheduler_name
        self.queue_label_keys = tuple(queue_label_keys)
        self.pool_label = pool_label
        self.namespace = namespace
        self.watch_timeout_seconds = watch_timeout_seconds
        # Owner GETs of a full list run this many at a time (benchmarks/owner-reads.md).
        self.owner_read_threads = owner_read_threads
        # Shared GPUs: reservation pods and the pods' ConfigMaps (gpu_sharing.py).
        self.gpu_sharing = gpu_sharing or GpuSharing(self.core, scheduler_name=scheduler_name)
        self._nodes: dict[str, ObservedNode] = {}
        self._pods: dict[tuple[str, str], ObservedPod] = {}
        # Bound, unfinished pods of other schedulers: what they hold on their nodes.
        self._foreign: dict[tuple[str, str], ForeignPod] = {}
        # Our own reservation pods (gpu_sharing.py) are no foreign load: the engine models their room.
        self._own_reservations = {RESERVATION_APP_LABEL: RESERVATION_APP, RESERVED_BY_LABEL: scheduler_name}
        self._node_rv: str | None = None
        self._pod_rv: str | None = None
        # (namespace, event name) -> the count last written; the name encodes the rest (_event_name)
        self._recent_events: dict[tuple[str, str], int] = {}
        # Repeats about one object are rate-limited as client-go's recorder does (event_spam.py).
        self.event_filter = EventSpamFilter()
        # Pods this process bound (key -> uid, node, devices) that the watch has not yet shown
        # bound: see _with_own_binds.
        self._bound_here: dict[tuple[str, str], tuple[str, str, tuple[int, ...]]] = {}
        # Owner uid -> the owner object as read (apiVersion, kind, metadata, spec, status)
        self._owners: dict[str, Json] = {}
        self._owners_lock = threading.Lock()
        # Owner uid -> when a read of it failed; not asked again for OWNER_RETRY_SECONDS.
        self._unreadable: dict[str, float] = {}
        # Each pod as parsed with the pod group its owners give it; _pods is the finished view.
        self._grouped: dict[tuple[str, str], tuple[ObservedPod, Grouping]] = {}
        self._pod_groups: dict[tuple[str, str], PodGroupSpec] = {}
        self._pod_group_rv: str | None = None
        self._priority_classes = PriorityClasses()
        self._priority_class_rv: str | None = None
        # (namespace, PodGroup name) named by our pods' pod-group-name, as of _pod_group_members_rv:
        # only those get PodGroup events (a bare pod's group is no object).
        self._pod_group_members: set[tuple[str, str]] = set()
        self._pod_group_members_rv: str | None = None
        # (namespace, pod, uid) -> the Unschedulable message last written to its PodScheduled condition
        self._unschedulable: dict[tuple[str, str, str], str] = {}
        # Leader election (cluster/leader_election.py): None while this replica may write the
        # scheduling decisions, else why not; checked before each write a cycle makes.
        self.write_guard: Callable[[], str | None] | None = None

    # ----- observe -------------------------------------------------------

    def observe(self) -> ClusterState:
        """Return nodes, our pods and what other pods hold; lists once, then follows watches.

        The node watch and the PodGroup / PriorityClass watches run beside the pod watch (each
        waits out its window, so in series a cycle waited for the sum): they write separate
        state, and pods parsed while the settings changed are finished again below."""
        with ThreadPoolExecutor(max_workers=2) as side:
            nodes = side.submit(
                lambda: self._sync(self._node_rv, self._list_nodes, self.core.list_node, self._apply_node)
            )
            settings = side.submit(self._follow_settings)
            pod_rv = self._sync(
                self._pod_rv, self._list_pods, self.core.list_pod_for_all_namespaces, self._apply_pod
            )
            self._node_rv, settings_changed = nodes.result(), settings.result()
        self._pod_rv = pod_rv
        if settings_changed:
            self._pods = {key: self._finish(*grouped) for key, grouped in self._grouped.items()}
        self._with_own_binds()
        external: dict[str, NodeUsage] = {}
        for pod in self._foreign.values():
            if pod.node in self._nodes:  # a deleted node's pods go with it
                external[pod.node] = external.get(pod.node, NodeUsage()).plus(pod)
        return ClusterState(
            nodes=dict(self._nodes),
            pods={key: pod for key, pod in self._pods.items() if not self._orphaned(pod)},
            node_resource_version=self._node_rv,
            pod_resource_version=self._pod_rv,
            external=external,
        )

    def _with_own_binds(self) -> None:
        """Show the pods this process bound as bound until the watch does.

        A watch read for one short window can lag the last cycle's binds (the API server under a
        burst of thousands); the pods would look pending and be bound again, each refused with 409
        "already assigned". A pod's node never changes once set, so an event without one for the
        same pod (uid) is older than our bind; the mark goes when the watch shows the node, or the
        pod (that uid) is gone."""
        for key, (uid, node, devices) in list(self._bound_here.items()):
            pod = self._pods.get(key)
            if pod is None or pod.uid != uid or pod.node:
                del self._bound_here[key]
            else:
                self._pods[key] = replace(pod, node=node, status=TaskStatus.BOUND, gpu_devices=devices)

    def _orphaned(self, pod: ObservedPod) -> bool:
        """A live pod bound to a node that no longer exists.

        KAI drops such pods with their node: they hold nothing and must never be
        bound again (the binding would be refused, every cycle). The pod garbage
        collector deletes them from the cluster shortly after.
        """
        finished = pod.status in (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
        return bool(pod.node) and pod.node not in self._nodes and not finished

    def _sync(
        self,
        resource_version: str | None,
        relist: Callable[[], str | None],
        list_call: Callable[..., Any],
        apply_event: Callable[[str, dict[str, Any]], None],
        window: float | None = None,
        **selectors: str,
    ) -> str | None:
        if resource_version is None:
            return relist()
        try:
            return self._watch(resource_version, list_call, apply_event, window, **selectors)
        except ApiException as error:
            if error.status == 410:  # compacted: our version is too old to resume from
                return relist()
            raise

    def _watch(
        self,
        resource_version: str,
        list_call: Callable[..., Any],
        apply_event: Callable[[str, dict[str, Any]], None],
        window: float | None = None,
        **selectors: str,
    ) -> str:
        """Apply the events since ``resource_version``; return the last version seen.

        ``window`` (seconds) ends the watch once the server has been quiet that long
        instead of after the server's own timeout: the events since our version come at
        once, so rarely changing objects cost a cycle a fraction of a second, not one.
        """
        # return_type "object" keeps events as plain dicts while the client still
        # tracks resource versions and turns ERROR events into ApiException.
        watcher = watch.Watch(return_type="object")
        stream = watcher.stream(
            list_call,
            resource_version=resource_version,
            timeout_seconds=self.watch_timeout_seconds,
            allow_watch_bookmarks=True,
            # A hung connection must not hang the cycle; the server closes first normally.
            _request_timeout=(5, window if window is not None else self.watch_timeout_seconds + 5),
            **selectors,
        )
        try:
            for event in stream:
                raw = event["raw_object"]
                resource_version = raw.get("metadata", {}).get("resourceVersion") or resource_version
                if event["type"] != "BOOKMARK":
                    apply_event(event["type"], raw)
        except (urllib3.exceptions.ReadTimeoutError, urllib3.exceptions.ProtocolError):
            # The window ended without a clean close; everything applied so far is
            # valid and the next cycle resumes from the last version we saw.
            pass
        return resource_version

    def _list_nodes(self) -> str | None:
        items, resource_version = self._list_all(self.core.list_node)
        self._nodes = {node.name: node for node in (parse_node(i, self.pool_label) for i in items)}
        return resource_version

    def _list_pods(self) -> str | None:
        # Every pod, not only ours (no field selector): other schedulers' pods hold room too.
        items, resource_version = self._list_all(self.core.list_pod_for_all_namespaces)
        foreign = (self._parse_foreign(item) for item in items if not self._is_ours(item))
        self._foreign = {(f.namespace, f.name): f for f in foreign if f is not None}
        items = [item for item in items if self._is_ours(item)]
        self._prefetch_owners(items)
        self._grouped = {}
        for item in items:
            pod, grouping = self._parse_pod(item)
            self._grouped[pod.key] = (pod, grouping)
        self._pods = {key: self._finish(*grouped) for key, grouped in self._grouped.items()}
        return resource_version

    def _list_all(self, list_call: Callable[..., Any], **selectors: str) -> tuple[list[Any], str | None]:
        """Page through a list; the first page's resourceVersion is the snapshot's."""
        items: list[Any] = []
        token: str | None = None
        resource_version: str | None = None
        while True:
            response = list_call(limit=LIST_PAGE_SIZE, _continue=token, _preload_content=False, **selectors)
            page = json.loads(response.data)
            items.extend(page.get("items") or [])
            metadata = page.get("metadata") or {}
            resource_version = resource_version or metadata.get("resourceVersion")
            token = metadata.get("continue")
            if not token:
                return items, resource_version

    def _apply_node(self, event_type: str, raw: dict[str, Any]) -> None:
        node = parse_node(raw, self.pool_label)
        if event_type == "DELETED":
            self._nodes.pop(node.name, None)
        else:
            self._nodes[node.name] = node

    def _apply_pod(self, event_type: str, raw: dict[str, Any]) -> None:
        if not self._is_ours(raw):
            meta = raw.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            foreign = self._parse_foreign(raw) if event_type != "DELETED" else None
            if foreign is None:
                self._foreign.pop(key, None)  # gone, finished or not bound: holds nothing
            else:
                self._foreign[key] = foreign
            return
        if event_type == "DELETED":
            meta = raw.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            self._grouped.pop(key, None)
            self._pods.pop(key, None)
            return
        pod, grouping = self._parse_pod(raw)
        self._grouped[pod.key] = (pod, grouping)
        self._pods[pod.key] = self._finish(pod, grouping)

    def _parse_foreign(self, raw: dict[str, Any]) -> ForeignPod | None:
        return parse_foreign_pod(raw, ignore=self._own_reservations)

    def _parse_pod(self, raw: dict[str, Any]) -> tuple[ObservedPod, Grouping]:
        """The pod, its spec.priority (set by admission from its class), and its pod group."""
        pod = parse_pod(raw, self.queue_label_keys, self.pool_label)
        priority = (raw.get("spec") or {}).get("priority")
        if isinstance(priority, int) and not isinstance(priority, bool):
            pod = replace(pod, priority=priority)
        return pod, group_pod(raw, self.queue_label_keys, self._read_owner)

    def _finish(self, pod: ObservedPod, grouping: Grouping) -> ObservedPod:
        return finish_pod(pod, grouping, self._pod_groups, self._priority_classes)

    def _prefetch_owners(self, items: list[dict[str, Any]]) -> None:
        """Read the owners of many pods at once, level by level up their chains.

        One GET per distinct owner is unavoidable on a first list (KAI's pod-grouper
        reads them too); running them side by side keeps a large cluster's first
        cycle short. The walk in owners.group_pod then finds them all cached.
        """
        level = [
            ((i.get("metadata") or {}).get("namespace", ""), owner_ref(i.get("metadata") or {}))
            for i in items
        ]
        for _ in range(MAX_OWNER_DEPTH):
            todo = {
                str(ref.get("uid")): (namespace, ref)
                for namespace, ref in level
                if ref is not None
                and ref.get("uid")
                and str(ref.get("uid")) not in self._owners
                and readable(str(ref.get("apiVersion", "")), str(ref["kind"]))
            }
            if not todo:
                return
            with ThreadPoolExecutor(max_workers=max(1, self.owner_read_threads)) as pool:
                found = list(pool.map(lambda args: self._read_owner(*args), todo.values()))
            level = [
                (namespace, owner_ref(owner.get("metadata") or {}))
                for (namespace, _), owner in zip(todo.values(), found, strict=True)
                if owner is not None
            ]

    def _read_owner(self, namespace: str, ref: Json) -> Json | None:
        """An owner object, read once per uid; None when it cannot be read (retried next time).

        Core, apps and batch kinds go through their typed clients; the CRD kinds KAI groups
        (owners.CUSTOM_OWNERS) through CustomObjectsApi on the reference's group/version.
        """
        uid = str(ref.get("uid") or "")
        if uid and uid in self._owners:
            return self._owners[uid]
        failed_at = self._unreadable.get(uid)
        if failed_at is not None and time.monotonic() - failed_at < OWNER_RETRY_SECONDS:
            return None
        api_version, kind, name = str(ref.get("apiVersion", "")), str(ref["kind"]), str(ref["name"])
        group, _, version = api_version.rpartition("/")
        typed: dict[tuple[str, str], Callable[..., Any]] = {
            ("", "Pod"): self.core.read_namespaced_pod,
            ("apps", "ReplicaSet"): self.apps.read_namespaced_replica_set,
            ("apps", "Deployment"): self.apps.read_namespaced_deployment,
            ("apps", "StatefulSet"): self.apps.read_namespaced_stateful_set,
            ("batch", "Job"): self.batch.read_namespaced_job,
            ("batch", "CronJob"): self.batch.read_namespaced_cron_job,
        }
        try:
            # Raw JSON (a urllib3 response) like the lists: cheaper than the client's models.
            if (group, kind) in typed:
                response: Any = typed[group, kind](name, namespace, _preload_content=False)
            elif (group, kind) in CUSTOM_OWNERS:
                plural = CUSTOM_OWNERS[group, kind]
                response = self.custom.get_namespaced_custom_object(
                    group, version, namespace, plural, name, _preload_content=False
                )
            else:
                return None
            raw = json.loads(response.data)
        except CALL_ERRORS:
            # Refused, gone or unreachable: grouping stops at the last owner read. Pods of
            # one owner must not each ask again, but a passing fault is retried soon.
            with self._owners_lock:
                if len(self._unreadable) >= EVENT_CACHE_LIMIT:
                    self._unreadable.clear()
                self._unreadable[uid] = time.monotonic()
            return None
        meta = raw.get("metadata") or {}
        owner: Json = {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {k: meta.get(k) for k in ("name", "uid", "labels", "annotations", "ownerReferences")},
            # Only the kinds whose grouping reads their spec keep it (a pod template is large).
            "spec": raw.get("spec") if (group, kind) in CUSTOM_OWNERS else {},
            "status": {},
        }
        # Cached under the object's own uid: a new object of the old name is not the old owner.
        if meta.get("uid"):
            with self._owners_lock:  # prefetch threads write here side by side
                if len(self._owners) >= EVENT_CACHE_LIMIT:
                    self._owners.pop(next(iter(self._owners)))
                self._owners[str(meta["uid"])] = owner
        return owner

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
            self._pod_group_rv = self._sync(
                self._pod_group_rv,
                self._list_pod_groups,
                list_pod_groups,
                self._apply_pod_group,
                window=SETTINGS_WATCH_WINDOW,
            )
        except CALL_ERRORS:
            self._pod_groups, self._pod_group_rv = {}, None
        try:
            self._priority_class_rv = self._sync(
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
        items, resource_version = self._list_all(
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
        items, resource_version = self._list_all(self.scheduling.list_priority_class)
        self._priority_classes = PriorityClasses.from_items(items)
        return resource_version

    def _apply_priority_class(self, event_type: str, raw: dict[str, Any]) -> None:
        self._priority_classes = self._priority_classes.changed(event_type, raw)

    def _is_ours(self, raw: dict[str, Any]) -> bool:
        # Only these pods are ever bound, evicted or given events (binding another
        # scheduler's pod is harmful); every other pod is a ForeignPod.
        return bool((raw.get("spec") or {}).get("schedulerName") == self.scheduler_name)

    # ----- apply ---------------------------------------------------------

    def apply(self, binds: list[Bind], evictions: list[Evict], events: list[PodEvent]) -> ApplyReport:
        """Bind, evict and record events; every failure is reported, none raised.

        Binds go first, all of them, so a pod is bound without waiting for any event; then the
        evictions (each with its Evict event); then the binds' Scheduled / FailedBinding events, the
        cycle's own events and the pending pods' PodScheduled conditions, side by side on the same
        bounded pool (kube-scheduler's events are asynchronous too: they never hold a bind up)."""
        report = ApplyReport()
        for result in self.gpu_sharing.start_cycle(self._pods.values()):
            report.add(result)
        bound = self._bind_all(binds)
        for result in bound:
            report.add(result)
        for eviction in evictions:
            report.add(self._evict(eviction))
            if report.results[-1].ok:
                evicted = _evict_event(eviction)
                report.add(self._post_event(evicted, annotations=_evictor_annotations(eviction)))
        notes = [self._bind_event(b, r) for b, r in zip(binds, bound, strict=True)]
        for result in self._note_all(notes + self._events_to_post(events)):
            report.add(result)
        return report

    def _bind_all(self, binds: list[Bind]) -> list[OperationResult]:
        """Each bind's result, in the binds' order.

        Binds go out concurrently on a bounded pool (no per-pod round trip in series); each stays
        its own caught call with its own result, so a refused bind is reported alone. A bind to a
        shared GPU reserves its device group first (``gpu_sharing``, which keeps per-cycle state):
        those stay in series on this thread."""

        def shared(bind: Bind) -> bool:
            cached = self._pods.get((bind.namespace, bind.pod))
            return cached is not None and cached.gpu.shared

        out: list[OperationResult | None] = [None] * len(binds)
        parallel = [i for i, b in enumerate(binds) if not shared(b)]
        done = self._concurrently(self._bind, [binds[i] for i in parallel])
        for i, result in zip(parallel, done, strict=True):
            out[i] = result
        for i, bind in enumerate(binds):
            if out[i] is None:
                out[i] = self._bind(bind)
        return [o for o in out if o is not None]

    def _note_all(self, events: list[PodEvent]) -> list[OperationResult]:
        """Post the events, and PodScheduled=False for each pending pod explained as Unschedulable.

        Concurrent across objects; the events about one object stay in series in their order, so
        two writes of the same aggregated Event never race (its count would lose a bump)."""
        about: dict[tuple[str, str, str], list[PodEvent]] = {}
        for event in events:
            about.setdefault((event.kind, event.namespace, event.name), []).append(event)

        def one_object(of_object: list[PodEvent]) -> list[OperationResult]:
            results: list[OperationResult] = []
            for event in of_object:
                if self._event_allowed(event):
                    results.append(self._post_event(event))
                if event.kind == "Pod" and event.reason == UNSCHEDULABLE:
                    marked = self._mark_unschedulable(event)
                    if marked is not None:
                        results.append(marked)
            return results

        return [r for results in self._concurrently(one_object, list(about.values())) for r in results]

    def _event_allowed(self, event: PodEvent) -> bool:
        """Whether the spam filter lets this event about its object through (keyed by the object's
        kind, namespace, name and uid, so a re-created pod starts with a full bucket, and by reason)."""
        uid = event.uid
        if uid is None and event.kind == "Pod":
            cached = self._pods.get((event.namespace, event.name))
            uid = cached.uid if cached is not None else None
        return self.event_filter.allow((event.kind, event.namespace, event.name, uid, event.reason))

    def _concurrently(self, call: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        """``call`` over ``items``, at most ``bind_concurrency`` at once; results in the items' order."""
        if self.bind_concurrency <= 1 or len(items) <= 1:
            return [call(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.bind_concurrency, len(items))) as pool:
            return list(pool.map(call, items))

    def _mark_unschedulable(self, event: PodEvent) -> OperationResult | None:
        """PodScheduled=False on a pending pod, unless it already says this."""
        cached = self._pods.get((event.namespace, event.name))
        if cached is None or cached.node:
            return None
        key = (event.namespace, event.name, cached.uid)  # a re-created pod starts clean
        if self._unschedulable.get(key) == event.message:
            return None
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": UNSCHEDULABLE,
            "message": event.message,
            "lastProbeTime": None,
            "lastTransitionTime": _rfc3339(datetime.now(UTC).replace(microsecond=0)),
        }
        # A strategic merge patch: conditions merge by type, the pod's others stay.
        body = {"status": {"conditions": [condition]}}
        result = self._call(
            "condition",
            event.namespace,
            event.name,
            lambda: self.core.patch_namespaced_pod_status(
                event.name, event.namespace, body, _preload_content=False
            ),
        )
        if result.ok:
            if len(self._unschedulable) >= EVENT_CACHE_LIMIT:
                self._unschedulable.clear()
            self._unschedulable[key] = event.message
        return result

    def _bind(self, bind: Bind) -> OperationResult:
        annotations: dict[str, str] = {}
        if bind.gpu_devices:
            annotations[GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in bind.gpu_devices)
        if bind.gpu_fraction is not None:
            annotations[GPU_FRACTION_GRANTED_ANNOTATION] = f"{bind.gpu_fraction:g}"
        cached = self._pods.get((bind.namespace, bind.pod))
        if cached is None and bind.gpu_fraction is not None:
            # A pod created since this cycle's observation (a portal submission): its shared GPU
            # can only be reserved once its annotations are seen; the next cycle binds it.
            error = "the pod was created after this cycle observed the cluster; it is bound next cycle"
            return OperationResult("bind", bind.namespace, bind.pod, ok=False, error=error)
        if cached is not None and cached.gpu.shared:
            # A shared GPU is reserved and made visible before the pod is bound, never after.
            try:
                annotations.update(self.gpu_sharing.prepare(bind, cached, self._nodes.get(bind.node)))
            except GpuSharingUnavailable as error:
                return OperationResult("bind", bind.namespace, bind.pod, ok=False, error=str(error))
            except CALL_ERRORS as error:
                return _failure("bind", bind.namespace, bind.pod, error)
        body = client.V1Binding(
            api_version="v1",
            kind="Binding",
            # The uid makes the server refuse to bind a re-created pod of the same name.
            metadata=client.V1ObjectMeta(
                name=bind.pod,
                namespace=bind.namespace,
                uid=cached.uid if cached and cached.uid else None,
                annotations=annotations or None,
            ),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=bind.node),
        )
        # _preload_content=False: the server answers with a Status, which the
        # client would fail to deserialize as a V1Binding (a known client quirk).
        result = self._call(
            "bind",
            bind.namespace,
            bind.pod,
            lambda: self.core.create_namespaced_pod_binding(
                bind.pod, bind.namespace, body, _preload_content=False
            ),
        )
        if result.ok and cached is not None and cached.uid:
            self._bound_here[cached.key] = (cached.uid, bind.node, tuple(bind.gpu_devices or ()))
        return result

    def _bind_event(self, bind: Bind, result: OperationResult) -> PodEvent:
        """KAI's Scheduled / FailedBinding pod event for a bind outcome (§8)."""
        if result.ok:
            node = self._nodes.get(bind.node)
            pool = bind.pool or (node.pool if node else None) or "default"
            pod = f"{bind.namespace}/{bind.pod}"
            message = f"Successfully assigned pod {pod} to node {bind.node} at node-pool {pool}"
            return PodEvent(bind.namespace, bind.pod, EventType.NORMAL, "Scheduled", message)
        message = f"Failed to bind pod {bind.namespace}/{bind.pod} to node {bind.node}. {result.error}"
        return PodEvent(bind.namespace, bind.pod, EventType.WARNING, "FailedBinding", message)

    def _evict(self, eviction: Evict) -> OperationResult:
        cached = self._pods.get((eviction.namespace, eviction.pod))
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=eviction.pod, namespace=eviction.namespace),
            delete_options=client.V1DeleteOptions(
                grace_period_seconds=eviction.grace_period_seconds,
                preconditions=client.V1Preconditions(uid=cached.uid) if cached and cached.uid else None,
            ),
        )
        result = self._call(
            "evict",
            eviction.namespace,
            eviction.pod,
            lambda: self.core.create_namespaced_pod_eviction(
                eviction.pod, eviction.namespace, body, _preload_content=False
            ),
        )
        if result.ok:
            self._mark_disrupted(eviction)
        return result

    def _mark_disrupted(self, eviction: Evict) -> None:
        """KAI's DisruptionTarget condition on an evicted pod: reason PreemptionByScheduler, its message.

        Written after the eviction because the Eviction API sets its own (EvictionByEvictionAPI) and
        would replace one written before. Best effort: the pod may already be gone (a kubelet that
        stops it at once), and the eviction itself happened either way.
        """
        condition = {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": DISRUPTED_BY_SCHEDULER,
            "message": eviction.message,
            "lastTransitionTime": _rfc3339(datetime.now(UTC).replace(microsecond=0)),
        }
        self._call(
            "condition",
            eviction.namespace,
            eviction.pod,
            lambda: self.core.patch_namespaced_pod_status(
                eviction.pod,
                eviction.namespace,
                {"status": {"conditions": [condition]}},
                _preload_content=False,
            ),
        )

    def _events_to_post(self, events: list[PodEvent]) -> list[PodEvent]:
        """The events that have an object to be about: every pod event, and PodGroup events of
        groups that exist as PodGroups (KAI's podgrouper makes one for every workload; without
        it a bare pod or a Job's pods have none, and an Event about no object only fills etcd)."""
        if self._pod_group_members_rv != self._pod_rv or not self._pod_group_members_rv:
            self._pod_group_members = {
                (pod.job.namespace, pod.job.name) for pod in self._pods.values() if pod.job.kind == "PodGroup"
            }
            self._pod_group_members_rv = self._pod_rv
        return [e for e in events if e.kind != "PodGroup" or (e.namespace, e.name) in self._pod_group_members]

    def _post_event(self, event: PodEvent, annotations: dict[str, str] | None = None) -> OperationResult:
        """Create the event, or bump the count of the one already written for the same object and words.

        The name is a hash of (object uid, type, reason, message), so the same event maps to the same
        object in every process: a restarted worker's create answers 409 and it bumps the count too.
        """
        if event.kind == "Pod" and event.uid is None:
            cached = self._pods.get((event.namespace, event.name))
            if cached is not None and cached.uid:
                event = replace(event, uid=cached.uid)  # a re-created pod of the same name starts afresh
        name = _event_name(event)
        now = datetime.now(UTC).replace(microsecond=0)
        count = self._recent_events.get((event.namespace, name))
        if count is not None:
            result = self._bump_event(event.namespace, name, count, now)
            if result.ok or result.status_code != 404:
                return result
            # The old event expired (events live about an hour): write it again.
        body = _event_body(event, name, now, self.scheduler_name, annotations)
        result = self._call(
            "event",
            event.namespace,
            name,
            lambda: self.core.create_namespaced_event(
                event.namespace, _event_model(body), _preload_content=False
            ),
        )
        if result.ok:
            self._remember_event(event.namespace, name, 1)
        elif result.status_code == 409:  # written before, by us before a restart or by another worker
            result = self._bump_existing_event(event.namespace, name, now)
        return result

    def _bump_existing_event(self, namespace: str, name: str, now: datetime) -> OperationResult:
        try:
            response: Any = self.core.read_namespaced_event(name, namespace, _preload_content=False)
            count = int(json.loads(response.data).get("count") or 1)
        except CALL_ERRORS as error:
            return _failure("event", namespace, name, error)
        return self._bump_event(namespace, name, count, now)

    def _bump_event(self, namespace: str, name: str, count: int, now: datetime) -> OperationResult:
        result = self._call(
            "event",
            namespace,
            name,
            lambda: self.core.patch_namespaced_event(
                name, namespace, {"count": count + 1, "lastTimestamp": _rfc3339(now)}, _preload_content=False
            ),
        )
        if result.ok:
            self._remember_event(namespace, name, count + 1)
        return result

    def _remember_event(self, namespace: str, name: str, count: int) -> None:
        if len(self._recent_events) >= EVENT_CACHE_LIMIT and (namespace, name) not in self._recent_events:
            self._recent_events.clear()  # forgetting costs one 409 and a GET per event, nothing more
        self._recent_events[namespace, name] = count

    # ----- submit / cancel -------------------------------------------------

    def submit(self, request: PodSpecRequest) -> ApplyReport:
        """Create the job's pods, one per task, named <job>-<index>; stops at the first refusal
        (the caller deletes what was created: a job is in the cluster whole or not at all)."""
        report = ApplyReport()
        for index in range(request.num_tasks):
            body = self._pod_body(request, f"{request.job_name}-{index}")
            name = body["metadata"]["name"]
            report.add(
                self._call(
                    "submit",
                    request.namespace,
                    name,
                    partial(
                        self.core.create_namespaced_pod,
                        request.namespace,
                        _pod_model(body),
                        _preload_content=False,
                    ),
                )
            )
            if not report.results[-1].ok:
                break
        return report

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> OperationResult:
        """Create a namespace for portal jobs (only where the portal is allowed to) with ``labels``
        (its Pod Security labels); one that already exists is fine."""
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels or None))
        result = self._call(
            "namespace", "", name, lambda: self.core.create_namespace(body, _preload_content=False)
        )
        if result.status_code == 409:
            return OperationResult("namespace", "", name, ok=True)
        return result

    def label_namespace(self, name: str, labels: dict[str, str]) -> OperationResult:
        """Set ``labels`` on a namespace the portal made (a team's pod security level changed);
        a namespace not there yet (404) gets them when it is created."""
        body = {"metadata": {"labels": labels}}
        return self._call(
            "namespace", "", name, lambda: self.core.patch_namespace(name, body, _preload_content=False)
        )

    def cancel(self, namespace: str, job: str, uid: str = "") -> ApplyReport:
        """Delete every pod the portal created for the job (by its uid label when given, else its
        name label). A pod already gone counts as deleted."""
        report = ApplyReport()
        selector = f"{PORTAL_JOB_UID_LABEL}={uid}" if uid else f"{PORTAL_JOB_LABEL}={job}"
        try:
            items, _ = self._list_all(
                lambda **kw: self.core.list_namespaced_pod(namespace, **kw),
                label_selector=selector,
            )
        except CALL_ERRORS as error:
            report.add(_failure("cancel", namespace, job, error))
            return report
        for item in items:
            name = item["metadata"]["name"]
            result = self._call(
                "cancel",
                namespace,
                name,
                partial(self.core.delete_namespaced_pod, name, namespace, _preload_content=False),
            )
            report.add(
                OperationResult("cancel", namespace, name, ok=True) if result.status_code == 404 else result
            )
        return report

    def _pod_body(self, request: PodSpecRequest, name: str) -> dict[str, Any]:
        template = request.pod_template
        labels = {
            **(template.labels if template else {}),
            **request.labels,
            self.queue_label_keys[0]: request.queue,
            PORTAL_JOB_LABEL: request.job_name,
        }
        if request.job_uid:
            labels[PORTAL_JOB_UID_LABEL] = request.job_uid
        # priorityClassName as a label (§1.7): a spec.priorityClassName naming a
        # class the cluster lacks would make admission reject the pod.
        if request.priority_class:
            labels[PRIORITY_CLASS_LABEL] = request.priority_class
        if request.preemptibility:
            labels[PREEMPTIBILITY_LABEL] = request.preemptibility
        annotations = {
            **(template.annotations if template else {}),
            **request.annotations,
            POD_GROUP_ANNOTATION: request.job_name,
        }
        if request.min_member is not None:
            annotations[BATCH_MIN_MEMBER_ANNOTATION] = str(request.min_member)
        # A manifest may carry the GPU-sharing annotations on a Job rather than its pod template:
        # the pod needs them (KAI and the webhook read the pod's).
        if request.gpu_fraction is not None:
            annotations.setdefault(GPU_FRACTION_ANNOTATION, f"{request.gpu_fraction:g}")
        if request.gpu_memory_mib is not None:
            annotations.setdefault(GPU_MEMORY_ANNOTATION, str(request.gpu_memory_mib))
        if request.gpu_devices_per_pod > 1 and (request.gpu_fraction or request.gpu_memory_mib):
            annotations.setdefault(GPU_NUM_DEVICES_ANNOTATION, str(request.gpu_devices_per_pod))
        if template is not None:
            # The user's own pod spec, deep-copied (the request stays untouched), scheduled by us.
            spec: dict[str, Any] = {
                **json.loads(json.dumps(template.spec)),
                "schedulerName": self.scheduler_name,
            }
        else:
            spec = {"schedulerName": self.scheduler_name, "restartPolicy": "Never",
                    "containers": [_container(request)]}  # fmt: skip
            if request.pod_security == "restricted":
                # The portal builds this pod, so it meets the team's restricted standard itself
                # (the namespace's PodSecurity admission would refuse it otherwise).
                spec["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
                spec["containers"][0]["securityContext"] = {
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"]},
                }
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": request.namespace,
                "labels": labels,
                "annotations": annotations,
            },
            "spec": spec,
        }

    # ----- plumbing --------------------------------------------------------

    def _call(self, operation: str, namespace: str, name: str, call: Callable[[], Any]) -> OperationResult:
        refusal = self.write_guard() if self.write_guard and operation in CYCLE_WRITES else None
        if refusal:  # fail closed: a replica that lost the lease writes nothing more
            return OperationResult(operation, namespace, name, ok=False, error=refusal)
        try:
            release(call())  # read the answer, or its connection is not reused (responses.py)
        except CALL_ERRORS as error:
            return _failure(operation, namespace, name, error)
        return OperationResult(operation, namespace, name, ok=True)


def _load_api_client() -> client.ApiClient:
    """In-cluster config when running in a pod, else the kubeconfig."""
    try:
        config.load_incluster_config()
    except config.ConfigException:
        config.load_kube_config()
    return client.ApiClient()


def _container(request: PodSpecRequest) -> dict[str, Any]:
    requests: dict[str, str] = {}
    if request.cpu_millis:
        requests["cpu"] = f"{request.cpu_millis}m"
    if request.memory_mib:
        requests["memory"] = f"{request.memory_mib}Mi"
    resources: dict[str, Any] = {"requests": requests} if requests else {}
    if request.gpus and request.gpu_fraction is None and request.gpu_memory_mib is None:
        resources["limits"] = {GPU_RESOURCE: str(request.gpus)}
    container: dict[str, Any] = {"name": "main", "image": request.image, "resources": resources}
    if request.command:
        container["command"] = list(request.command)
    return container


def _event_name(event: PodEvent) -> str:
    """``<object>.<16 hex>``: one name per (object uid, kind, type, reason, message), as stable as those."""
    identity = "\x00".join((event.kind, event.uid or "", str(event.type), event.reason, event.message))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:EVENT_HASH_LENGTH]
    head = event.name[: EVENT_NAME_LIMIT - EVENT_HASH_LENGTH - 1].rstrip("-.")  # a label ends alphanumeric
    return f"{head}.{digest}"


def _event_body(
    event: PodEvent, name: str, now: datetime, component: str, annotations: dict[str, str] | None
) -> dict[str, Any]:
    api_version = POD_GROUP_API_VERSION if event.kind == "PodGroup" else "v1"
    involved: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": event.kind,
        "name": event.name,
        "namespace": event.namespace,
    }
    if event.uid:
        involved["uid"] = event.uid
    metadata: dict[str, Any] = {"name": name, "namespace": event.namespace}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message,
        "type": str(event.type),
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": _rfc3339(now),
        "lastTimestamp": _rfc3339(now),
        "count": 1,
    }


def _event_model(body: dict[str, Any]) -> client.CoreV1Event:
    model = client.CoreV1Event.from_dict(body)
    if model is None:  # from_dict returns None only for a None body
        raise ValueError("empty event body")
    return model


def _pod_model(body: dict[str, Any]) -> client.V1Pod:
    model = client.V1Pod.from_dict(body)
    if model is None:
        raise ValueError("empty pod body")
    return model


def _evict_event(eviction: Evict) -> PodEvent:
    return PodEvent(eviction.namespace, eviction.pod, EventType.NORMAL, "Evict", eviction.message)


def _evictor_annotations(eviction: Evict) -> dict[str, str]:
    # The annotations KAI puts on its Evict events (§8).
    annotations = {"num-evicted-pods": "1", "evictor-action-type": eviction.action}
    if eviction.evictor_job:
        annotations["evictor-pod-group-name"] = eviction.evictor_job
    if eviction.evictor_namespace:
        annotations["evictor-pod-group-namespace"] = eviction.evictor_namespace
    return annotations


def _rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _failure(operation: str, namespace: str, name: str, error: Exception) -> OperationResult:
    status = error.status if isinstance(error, ApiException) else None
    return OperationResult(operation, namespace, name, ok=False, error=_error_text(error), status_code=status)


def _error_text(error: Exception) -> str:
    """The API's own message when there is one (a Status body), else the exception."""
    if isinstance(error, ApiException):
        try:
            message = json.loads(error.body or "").get("message")
        except (ValueError, AttributeError):
            message = None
        return f"{error.status} {error.reason}: {message}" if message else f"{error.status} {error.reason}"
    return f"{type(error).__name__}: {error}"
