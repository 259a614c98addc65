"""Evictions, as KAI's evictor makes them (pkg/scheduler/cache/evictor).

A pod is evicted through POST pods/<pod>/eviction with a policy/v1 Eviction, so
PodDisruptionBudgets are honoured, with the pod's uid as a precondition (a re-created pod of the
same name is never evicted by mistake). After the Eviction API accepts, the pod's
``DisruptionTarget`` condition is set as KAI's evictor writes it (reason PreemptionByScheduler,
the eviction message); the API server's own (EvictionByEvictionAPI) only says that some eviction
happened. Each eviction gets KAI's Evict event, with the evictor's annotations.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client

from ..base import EventType, Evict, OperationResult, PodEvent
from .cache import ClusterCache
from .client import Caller, rfc3339

DISRUPTED_BY_SCHEDULER = "PreemptionByScheduler"  # KAI's evictor (v1.PodReasonPreemptionByScheduler)


class Evictor:
    """Evicts running pods through the Eviction API and marks them disrupted."""

    def __init__(self, core: client.CoreV1Api, caller: Caller, cache: ClusterCache) -> None:
        self.core = core
        self.caller = caller
        self.cache = cache

    def evict(self, eviction: Evict) -> OperationResult:
        cached = self.cache.pods.get((eviction.namespace, eviction.pod))
        body = client.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=client.V1ObjectMeta(name=eviction.pod, namespace=eviction.namespace),
            delete_options=client.V1DeleteOptions(
                grace_period_seconds=eviction.grace_period_seconds,
                preconditions=client.V1Preconditions(uid=cached.uid) if cached and cached.uid else None,
            ),
        )
        result = self.caller.call(
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
            "lastTransitionTime": rfc3339(datetime.now(UTC).replace(microsecond=0)),
        }
        self.caller.call(
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


def evict_event(eviction: Evict) -> PodEvent:
    """KAI's Evict event about the evicted pod."""
    return PodEvent(eviction.namespace, eviction.pod, EventType.NORMAL, "Evict", eviction.message)


def evictor_annotations(eviction: Evict) -> dict[str, str]:
    """The annotations KAI puts on its Evict events (§8)."""
    annotations = {"num-evicted-pods": "1", "evictor-action-type": eviction.action}
    if eviction.evictor_job:
        annotations["evictor-pod-group-name"] = eviction.evictor_job
    if eviction.evictor_namespace:
        annotations["evictor-pod-group-namespace"] = eviction.evictor_namespace
    return annotations
