"""Binds, as KAI's binder makes them (pkg/binder): POST pods/<pod>/binding.

What KAI's binder and podgrouper write on a pod travels as annotations on the Binding itself
(``bind_annotations``); the API server copies a Binding's annotations onto the pod in the same
write, so they cost no call and devices and node can never disagree: for shared GPUs
``kai.scheduler/gpu-devices`` ("0,3") and ``kai.scheduler/gpu-fraction`` (the fraction granted
per device). A shared GPU is reserved and made visible (gpu_sharing.py) before
the pod is bound, never after. The pod's uid goes on the Binding, so the server refuses to bind a
re-created pod of the same name.

Binds go out concurrently on a bounded pool (kube-scheduler binds asynchronously in goroutines,
unbounded); each stays its own caught call with its own result, so a refused bind is reported
alone. A pod this process bound is shown bound until the watch does (``with_own_binds``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kubernetes import client

from ..base import Bind, EventType, ObservedPod, OperationResult, PodEvent, TaskStatus
from .cache import ClusterCache
from .client import CALL_ERRORS, Caller, HotWrites, concurrently, failure
from .gpu_sharing import GpuSharing, GpuSharingUnavailable
from .objects import GPU_DEVICES_ANNOTATION, POD_GROUP_ANNOTATION, parse_devices

GPU_FRACTION_GRANTED_ANNOTATION = "kai.scheduler/gpu-fraction"
# KAI's binder (pkg/binder/binding/binder.go, constants.ReceivedResourceType) and its values.
RECEIVED_RESOURCE_TYPE_ANNOTATION = "received-resource-type"
REGULAR, FRACTION = "Regular", "Fraction"
# Binds in flight at once: enough to hide the API server's round trip, few enough that a large
# cycle does not flood it (kube-scheduler binds asynchronously in goroutines, unbounded).
BIND_CONCURRENCY = 16


class Binder:
    """Binds pending pods to nodes (and their shared GPUs to reserved devices)."""

    def __init__(
        self,
        core: client.CoreV1Api,
        caller: Caller,
        cache: ClusterCache,
        gpu_sharing: GpuSharing,
        concurrency: int = BIND_CONCURRENCY,
        writes: HotWrites | None = None,
    ) -> None:
        self.core = core
        self.writes = writes or HotWrites(core.api_client)  # the bind itself (client.HotWrites)
        self.caller = caller
        self.cache = cache
        self.gpu_sharing = gpu_sharing
        self.concurrency = concurrency
        # Pods this process bound (key -> uid, node, devices) that the watch has not yet shown
        # bound: see with_own_binds.
        self.bound_here: dict[tuple[str, str], tuple[str, str, tuple[int, ...]]] = {}

    def bind_all(self, binds: list[Bind]) -> list[OperationResult]:
        """Each bind's result, in the binds' order.

        A bind to a shared GPU reserves its device group first (``gpu_sharing``, which keeps
        per-cycle state): those stay in series on this thread."""

        def shared(bind: Bind) -> bool:
            cached = self.cache.pods.get((bind.namespace, bind.pod))
            return cached is not None and cached.gpu.shared

        out: list[OperationResult | None] = [None] * len(binds)
        parallel = [i for i, b in enumerate(binds) if not shared(b)]
        done = concurrently(self.concurrency, self.bind, [binds[i] for i in parallel])
        for i, result in zip(parallel, done, strict=True):
            out[i] = result
        for i, bind in enumerate(binds):
            if out[i] is None:
                out[i] = self.bind(bind)
        return [o for o in out if o is not None]

    def bind(self, bind: Bind) -> OperationResult:
        cached = self.cache.pods.get((bind.namespace, bind.pod))
        annotations = self.bind_annotations(bind, cached)
        if cached is None and bind.gpu_fraction is not None:
            # A pod created since this cycle's observation (a portal submission): its shared GPU
            # can only be reserved once its annotations are seen; the next cycle binds it.
            error = "the pod was created after this cycle observed the cluster; it is bound next cycle"
            return OperationResult("bind", bind.namespace, bind.pod, ok=False, error=error)
        if cached is not None and cached.gpu.shared:
            # A shared GPU is reserved and made visible before the pod is bound, never after.
            try:
                annotations.update(self.gpu_sharing.prepare(bind, cached, self.cache.nodes.get(bind.node)))
            except GpuSharingUnavailable as error:
                return OperationResult("bind", bind.namespace, bind.pod, ok=False, error=str(error))
            except CALL_ERRORS as error:
                return failure("bind", bind.namespace, bind.pod, error)
        body = binding_body(bind, cached.uid if cached else None, annotations)
        result = self.caller.call(
            "bind", bind.namespace, bind.pod, lambda: self.writes.bind(bind.namespace, bind.pod, body)
        )
        if result.ok and cached is not None and cached.uid:
            # The devices the pod will show once watched: a shared GPU's, none for whole GPUs.
            devices = parse_devices(annotations.get(GPU_DEVICES_ANNOTATION))
            self.bound_here[cached.key] = (cached.uid, bind.node, devices)
        return result

    def bind_annotations(self, bind: Bind, cached: ObservedPod | None) -> dict[str, str]:
        """What the Binding carries onto the pod in the bind's own write (no extra call):

        - ``received-resource-type``: KAI's binder patches it on before binding (``Regular``, or
          ``Fraction`` for a shared GPU);
        - ``pod-group-name``: KAI's podgrouper writes it on every pod it groups; a pod bound in the
          cycle it is first seen gets it here rather than by a patch of its own (pod_groups.py);
        - the devices of a shared GPU only (``kai.scheduler/gpu-devices`` and the fraction
          granted): the GPU-sharing protocol reads them. KAI writes no device for a whole GPU
          (the device plugin picks it), so neither does the portal."""
        shared = bind.gpu_fraction is not None or (cached is not None and cached.gpu.shared)
        annotations = {RECEIVED_RESOURCE_TYPE_ANNOTATION: FRACTION if shared else REGULAR}
        if shared and bind.gpu_devices:
            annotations[GPU_DEVICES_ANNOTATION] = ",".join(str(d) for d in bind.gpu_devices)
        if bind.gpu_fraction is not None:
            annotations[GPU_FRACTION_GRANTED_ANNOTATION] = f"{bind.gpu_fraction:g}"
        if cached is not None and POD_GROUP_ANNOTATION not in cached.annotations:
            group = self.cache.pod_group_name_of(cached.key)
            if group:
                annotations[POD_GROUP_ANNOTATION] = group
        return annotations

    def bind_event(self, bind: Bind, result: OperationResult) -> PodEvent:
        """KAI's Scheduled / FailedBinding pod event for a bind outcome (§8)."""
        if result.ok:
            node = self.cache.nodes.get(bind.node)
            pool = bind.pool or (node.pool if node else None) or "default"
            pod = f"{bind.namespace}/{bind.pod}"
            message = f"Successfully assigned pod {pod} to node {bind.node} at node-pool {pool}"
            return PodEvent(bind.namespace, bind.pod, EventType.NORMAL, "Scheduled", message)
        message = f"Failed to bind pod {bind.namespace}/{bind.pod} to node {bind.node}. {result.error}"
        return PodEvent(bind.namespace, bind.pod, EventType.WARNING, "FailedBinding", message)

    def bound_event(self, bind: Bind) -> PodEvent:
        """KAI's binder's event once a pod is bound (pkg/binder: reason Bound)."""
        message = f"Pod bound successfully to node {bind.node}"
        return PodEvent(bind.namespace, bind.pod, EventType.NORMAL, "Bound", message)

    def with_own_binds(self, pods: dict[tuple[str, str], ObservedPod]) -> None:
        """Show the pods this process bound as bound (in ``pods``) until the watch does.

        A watch read for one short window can lag the last cycle's binds (the API server under a
        burst of thousands); the pods would look pending and be bound again, each refused with 409
        "already assigned". A pod's node never changes once set, so an event without one for the
        same pod (uid) is older than our bind; the mark goes when the watch shows the node, or the
        pod (that uid) is gone."""
        for key, (uid, node, devices) in list(self.bound_here.items()):
            pod = pods.get(key)
            if pod is None or pod.uid != uid or pod.node:
                del self.bound_here[key]
            else:
                pods[key] = replace(pod, node=node, status=TaskStatus.BOUND, gpu_devices=devices)


def binding_body(bind: Bind, uid: str | None, annotations: dict[str, str]) -> dict[str, Any]:
    """The Binding: the pod (its uid, so the server refuses to bind a re-created pod of the same
    name; the annotations it carries onto the pod) and the node."""
    metadata: dict[str, Any] = {"name": bind.pod, "namespace": bind.namespace}
    if uid:
        metadata["uid"] = uid
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": bind.node},
    }
