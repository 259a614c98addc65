"""Cluster backends: one declared interface over a real or simulated cluster (base.py).

Plain Python on purpose (no Django, no portal app): the scheduling loop converts these data
classes with its own adapter. Import the Kubernetes backend from
`kai_portal.cluster.backends.kubernetes`; it pulls in the kubernetes client. The simulated
backend (simulated.py) fronts a cluster the portal gives it. `kai_portal.workloads.configured_backend`
picks the configured backend (``settings.CLUSTER_BACKEND``).
"""

from __future__ import annotations

from .base import (
    ApplyReport,
    Bind,
    Capabilities,
    ChangeFeed,
    ClusterBackend,
    ClusterState,
    Elector,
    EventType,
    Evict,
    ForeignPod,
    GpuRequest,
    JobRef,
    LeaseConfig,
    LeaseHolder,
    NamespaceManager,
    NodeTaint,
    NodeUsage,
    ObservedNode,
    ObservedPod,
    OperationResult,
    PodEvent,
    PodSpecRequest,
    PodTemplate,
    QueueObjectReader,
    QueueObjectStore,
    TaskStatus,
)

__all__ = [
    "ApplyReport",
    "Bind",
    "Capabilities",
    "ChangeFeed",
    "ClusterBackend",
    "ClusterState",
    "Elector",
    "EventType",
    "Evict",
    "ForeignPod",
    "GpuRequest",
    "JobRef",
    "LeaseConfig",
    "LeaseHolder",
    "NamespaceManager",
    "NodeTaint",
    "NodeUsage",
    "ObservedNode",
    "ObservedPod",
    "OperationResult",
    "PodEvent",
    "PodSpecRequest",
    "PodTemplate",
    "QueueObjectReader",
    "QueueObjectStore",
    "TaskStatus",
]
