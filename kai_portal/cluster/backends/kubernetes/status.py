"""What the backend tells the cluster about pods: their PodScheduled condition and Events.

KAI's status updater (pkg/scheduler/cache/status_updater) writes a pending pod's
``PodScheduled=False`` condition (reason Unschedulable, the engine's message) and the cycle's
events. Here:

- a pod that waits only for its queue's quota or limit (the engine's ``OverLimit`` or
  ``NonPreemptibleOverQuota``) gets that code as the condition's reason instead of
  ``Unschedulable``: cluster-autoscaler and Karpenter add nodes only for ``PodScheduled=False``
  with reason ``Unschedulable``, and a node added for a quota-blocked pod stays idle (KAI's
  queue-admission-gating design gates such pods for the same reason; we keep them ungated).

- pod condition: through PATCH pods/<pod>/status, as kube-scheduler and KAI write it, so cluster
  autoscalers and ``kubectl describe pod`` see why it waits. Written when the message changes, not
  every cycle. A bound pod gets KAI's binder's ``PodBound`` condition the same way, beside its
  ``Bound`` event (``mark_bound``).
- events: core/v1 Events (involvedObject, reason, message, type, source.component,
  first/lastTimestamp, count). That is what client-go's classic recorder writes and what
  ``kubectl describe pod`` and ``kubectl get events`` show on every Kubernetes version. Aggregated as
  client-go does: one Event object per object per distinct (type, reason, message), named from a
  hash of those and the object's uid, so a repeat (this process's or a restarted worker's: create
  answers 409) bumps ``count`` and ``lastTimestamp`` with a PATCH instead of creating a new object.
  PodGroup events are written only for pods grouped by a PodGroup (the ``pod-group-name``
  annotation): a bare pod or a Job's pods have no PodGroup object, and their pods' own events
  already carry the reason.

client-go's event spam filter (``EventSpamFilter``): aggregation keeps etcd small, but a pod pending
for an hour would still cost a PATCH every cycle: 2,000 pending pods and a 5 s cycle are 400 writes
a second to the API server, forever. client-go's ``EventCorrelator`` (which KAI's and
kube-scheduler's recorders use) also rate-limits per object: a token bucket of 25 events, refilled
at one per five minutes, keyed by the source and the involved object. An event over the limit is
dropped, not queued, as there. One difference: our key adds the event's reason, so a pod pending
for hours (its Unschedulable bucket empty) still gets its Scheduled event when bound.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from ..base import OperationResult, PodEvent
from .cache import ClusterCache
from .client import CALL_ERRORS, Caller, HotWrites, concurrently, failure, rfc3339

BURST = 25  # client-go: defaultSpamBurst
REFILL_SECONDS = 300.0  # client-go: defaultSpamQPS = 1/300
KEYS_LIMIT = 10_000  # forgetting an object only gives it a fresh bucket
POD_GROUP_API_VERSION = "scheduling.run.ai/v2alpha2"
EVENT_CACHE_LIMIT = 10_000
UNSCHEDULABLE = "Unschedulable"
# Events KAI's binder posts (its recorder's component), not the scheduler: Bound, after a bind.
BINDER_COMPONENT = "binder"
BOUND = "Bound"
BINDER_REASONS = frozenset({BOUND})
POD_BOUND = "PodBound"  # KAI's binder's pod condition type
# An Event name is a DNS subdomain: the object's name, ".", 16 hex digits of the hash.
EVENT_NAME_LIMIT = 253
EVENT_HASH_LENGTH = 16


class EventSpamFilter:
    """Per-object token buckets: ``allow(key)`` spends a token, or says the event is dropped."""

    def __init__(
        self,
        burst: int = BURST,
        refill_seconds: float = REFILL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.clock = clock
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, when counted)
        self._lock = threading.Lock()  # events about different objects are posted from a pool

    def allow(self, key: Hashable) -> bool:
        now = self.clock()
        with self._lock:
            tokens, then = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) / self.refill_seconds)
            allowed = tokens >= 1.0 - 1e-9  # partial refills add up with rounding errors
            if allowed:
                tokens = max(0.0, tokens - 1.0)
            if len(self._buckets) >= KEYS_LIMIT and key not in self._buckets:
                self._buckets.clear()
            self._buckets[key] = (tokens, now)
            return allowed


class StatusUpdater:
    """Writes pods' PodScheduled conditions and the Events of a cycle (KAI's status updater)."""

    def __init__(
        self,
        core: client.CoreV1Api,
        caller: Caller,
        cache: ClusterCache,
        component: str,
        concurrency: int,
        writes: HotWrites | None = None,
    ) -> None:
        self.core = core
        self.writes = writes or HotWrites(core.api_client)  # events and conditions (client.HotWrites)
        self.caller = caller
        self.cache = cache
        self.component = component  # source.component of every Event: the scheduler's name
        self.concurrency = concurrency
        # (namespace, event name) -> the count last written; the name encodes the rest (event_name)
        self._recent_events: dict[tuple[str, str], int] = {}
        # Repeats about one object are rate-limited as client-go's recorder does.
        self.event_filter = EventSpamFilter()
        # (namespace, PodGroup name) named by our pods' pod-group-name, as of _pod_group_members_rv:
        # only those get PodGroup events (a bare pod's group is no object).
        self._pod_group_members: set[tuple[str, str]] = set()
        self._pod_group_members_rv: str | None = None
        # (namespace, pod, uid) -> (reason, message) last written to its PodScheduled condition
        self._unschedulable: dict[tuple[str, str, str], tuple[str, str]] = {}

    def note_all(self, events: list[PodEvent]) -> list[OperationResult]:
        """Post the events, and PodScheduled=False for each pending pod explained as Unschedulable.

        Concurrent across objects; the events about one object stay in series in their order, so
        two writes of the same aggregated Event never race (its count would lose a bump)."""
        about: dict[tuple[str, str, str], list[PodEvent]] = {}
        for event in events:
            about.setdefault((event.kind, event.namespace, event.name), []).append(event)

        def one_object(of_object: list[PodEvent]) -> list[OperationResult]:
            results: list[OperationResult] = []
            for event in of_object:
                if self.event_allowed(event):
                    results.append(self.post_event(event))
                if event.kind == "Pod" and event.reason == UNSCHEDULABLE:
                    marked = self.mark_unschedulable(event)
                    if marked is not None:
                        results.append(marked)
                if event.kind == "Pod" and event.reason == BOUND:
                    # Written even when the spam filter drops the event, as KAI's binder does.
                    results.append(self.mark_bound(event))
            return results

        done = concurrently(self.concurrency, one_object, list(about.values()))
        return [r for results in done for r in results]

    def event_allowed(self, event: PodEvent) -> bool:
        """Whether the spam filter lets this event about its object through (keyed by the object's
        kind, namespace, name and uid, so a re-created pod starts with a full bucket, and by reason)."""
        uid = event.uid
        if uid is None and event.kind == "Pod":
            cached = self.cache.pods.get((event.namespace, event.name))
            uid = cached.uid if cached is not None else None
        return self.event_filter.allow((event.kind, event.namespace, event.name, uid, event.reason))

    def mark_unschedulable(self, event: PodEvent) -> OperationResult | None:
        """PodScheduled=False on a pending pod, unless it already says this."""
        cached = self.cache.pods.get((event.namespace, event.name))
        if cached is None or cached.node:
            return None
        key = (event.namespace, event.name, cached.uid)  # a re-created pod starts clean
        said = (event.condition_reason, event.message)
        if self._unschedulable.get(key) == said:
            return None
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": event.condition_reason,
            "message": event.message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(datetime.now(UTC).replace(microsecond=0)),
        }
        result = self._patch_condition(event.namespace, event.name, condition)
        if result.ok:
            if len(self._unschedulable) >= EVENT_CACHE_LIMIT:
                self._unschedulable.clear()
            self._unschedulable[key] = said
        return result

    def mark_bound(self, event: PodEvent) -> OperationResult:
        """KAI's binder's ``PodBound`` condition on a pod it bound (bindrequest_controller.go:
        reason ``Bound``, its event's message), one status patch per bound pod, sent beside the
        pod's events, after every bind of the cycle."""
        condition = {
            "type": POD_BOUND,
            "status": "True",
            "reason": BOUND,
            "message": event.message,
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(datetime.now(UTC).replace(microsecond=0)),
        }
        return self._patch_condition(event.namespace, event.name, condition)

    def _patch_condition(self, namespace: str, name: str, condition: dict[str, Any]) -> OperationResult:
        # A strategic merge patch: conditions merge by type, the pod's others stay.
        body = {"status": {"conditions": [condition]}}
        return self.caller.call(
            "condition",
            namespace,
            name,
            lambda: self.writes.patch_pod_status(namespace, name, body),
        )

    def events_to_post(
        self, events: list[PodEvent], pod_groups: set[tuple[str, str]] | None = None
    ) -> list[PodEvent]:
        """The events that have an object to be about: every pod event, and PodGroup events of
        groups that exist as PodGroups (KAI's podgrouper makes one for every workload, and so does
        the portal's ``pod_groups``, whose PodGroups come as ``pod_groups``; an Event about no
        object only fills etcd)."""
        pod_rv = self.cache.pod_rv
        if self._pod_group_members_rv != pod_rv or not self._pod_group_members_rv:
            self._pod_group_members = {
                (pod.job.namespace, pod.job.name)
                for pod in self.cache.pods.values()
                if pod.job.kind == "PodGroup"
            }
            self._pod_group_members_rv = pod_rv
        known = self._pod_group_members | (pod_groups or set())
        return [e for e in events if e.kind != "PodGroup" or (e.namespace, e.name) in known]

    def post_event(self, event: PodEvent, annotations: dict[str, str] | None = None) -> OperationResult:
        """Create the event, or bump the count of the one already written for the same object and words.

        The name is a hash of (object uid, type, reason, message), so the same event maps to the same
        object in every process: a restarted worker's create answers 409 and it bumps the count too.
        """
        if event.kind == "Pod" and event.uid is None:
            cached = self.cache.pods.get((event.namespace, event.name))
            if cached is not None and cached.uid:
                event = replace(event, uid=cached.uid)  # a re-created pod of the same name starts afresh
        name = event_name(event)
        now = datetime.now(UTC).replace(microsecond=0)
        count = self._recent_events.get((event.namespace, name))
        if count is not None:
            result = self._bump_event(event.namespace, name, count, now)
            if result.ok or result.status_code != 404:
                return result
            # The old event expired (events live about an hour): write it again.
        component = BINDER_COMPONENT if event.reason in BINDER_REASONS else self.component
        body = event_body(event, name, now, component, annotations)
        result = self.caller.call(
            "event",
            event.namespace,
            name,
            lambda: self.writes.create_event(event.namespace, body),
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
            return failure("event", namespace, name, error)
        return self._bump_event(namespace, name, count, now)

    def _bump_event(self, namespace: str, name: str, count: int, now: datetime) -> OperationResult:
        result = self.caller.call(
            "event",
            namespace,
            name,
            lambda: self.writes.patch_event(
                namespace, name, {"count": count + 1, "lastTimestamp": rfc3339(now)}
            ),
        )
        if result.ok:
            self._remember_event(namespace, name, count + 1)
        return result

    def _remember_event(self, namespace: str, name: str, count: int) -> None:
        if len(self._recent_events) >= EVENT_CACHE_LIMIT and (namespace, name) not in self._recent_events:
            self._recent_events.clear()  # forgetting costs one 409 and a GET per event, nothing more
        self._recent_events[namespace, name] = count


def event_name(event: PodEvent) -> str:
    """``<object>.<16 hex>``: one name per (object uid, kind, type, reason, message), as stable as those."""
    identity = "\x00".join((event.kind, event.uid or "", str(event.type), event.reason, event.message))
    digest = hashlib.sha256(identity.encode()).hexdigest()[:EVENT_HASH_LENGTH]
    head = event.name[: EVENT_NAME_LIMIT - EVENT_HASH_LENGTH - 1].rstrip("-.")  # a label ends alphanumeric
    return f"{head}.{digest}"


def event_body(
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
        "firstTimestamp": rfc3339(now),
        "lastTimestamp": rfc3339(now),
        "count": 1,
    }
