"""Cluster backends: one small interface over a real or simulated cluster.

Plain Python on purpose (no Django): the scheduling loop converts these data
classes with its own adapter. Import the Kubernetes backend from
`kai_portal.cluster.backends.kubernetes`; it pulls in the kubernetes client.
`get_backend()` picks the configured backend (``settings.CLUSTER_BACKEND``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from .base import (
    ApplyReport,
    Bind,
    ClusterBackend,
    ClusterState,
    EventType,
    Evict,
    ForeignPod,
    GpuRequest,
    JobRef,
    NodeTaint,
    NodeUsage,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
    PodTemplate,
    TaskStatus,
)

_kubernetes_backend: ClusterBackend | None = None


def get_backend(clock: Callable[[], datetime] | None = None) -> ClusterBackend:
    """The cluster backend named by ``settings.CLUSTER_BACKEND``.

    The simulated backend keeps its state in the database, so a fresh one per
    cycle is fine and ``clock`` sets its time. The Kubernetes backend keeps a
    watch cache between cycles, so one instance lives per process.
    """
    global _kubernetes_backend
    from django.conf import settings

    if settings.CLUSTER_BACKEND == "kubernetes":
        if _kubernetes_backend is None:
            from .gpu_sharing import GpuSharing
            from .kubernetes import KubernetesBackend

            backend = KubernetesBackend(scheduler_name=settings.SCHEDULER_NAME)
            backend.gpu_sharing = GpuSharing(
                backend.core,
                scheduler_name=settings.SCHEDULER_NAME,
                namespace=settings.GPU_SHARING_NAMESPACE,
                image=settings.GPU_SHARING_RESERVATION_IMAGE,
                runtime_class=settings.GPU_SHARING_RUNTIME_CLASS or None,
                allocation_timeout_seconds=settings.GPU_SHARING_ALLOCATION_TIMEOUT_SECONDS,
            )
            _kubernetes_backend = backend
        return _kubernetes_backend
    from .simulated import SimulatedBackend

    return SimulatedBackend(clock=clock)


__all__ = [
    "ApplyReport",
    "Bind",
    "ClusterBackend",
    "ClusterState",
    "Evict",
    "EventType",
    "ForeignPod",
    "GpuRequest",
    "JobRef",
    "NodeTaint",
    "NodeUsage",
    "ObservedNode",
    "ObservedPod",
    "OperationResult",
    "PodEvent",
    "PodSpecRequest",
    "PodTemplate",
    "TaskStatus",
    "get_backend",
]
