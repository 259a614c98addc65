"""Cluster backends: one small interface over a real or simulated cluster.

Plain Python on purpose (no Django): the scheduling loop converts these data
classes with its own adapter. Import the Kubernetes backend from
`kai_portal.cluster.backends.kubernetes`; it pulls in the kubernetes client.
"""

from .base import (
    ApplyReport,
    Bind,
    ClusterBackend,
    ClusterState,
    EventType,
    Evict,
    GpuRequest,
    JobRef,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
    TaskStatus,
)

__all__ = [
    "ApplyReport",
    "Bind",
    "ClusterBackend",
    "ClusterState",
    "Evict",
    "EventType",
    "GpuRequest",
    "JobRef",
    "ObservedNode",
    "ObservedPod",
    "OperationResult",
    "PodEvent",
    "PodSpecRequest",
    "TaskStatus",
]
