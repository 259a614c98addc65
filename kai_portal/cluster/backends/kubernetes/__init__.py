"""The Kubernetes backend, in KAI's component shape; the only package that imports the `kubernetes` client.

- ``backend``: ``KubernetesBackend``, composing the components below;
- ``client``: loading the API client, paged lists and resumable watches, one caught write;
- ``cache``: the cluster as last observed (nodes, our pods, foreign pods; list + watch);
- ``owners`` and ``pod_grouping``: KAI's pod-grouper (top owners and their plugins; PodGroups,
  PriorityClasses);
- ``binder``, ``evictor``, ``status``: binds, evictions, pod conditions and events;
- ``gpu_sharing`` and ``reservation``: KAI's reservation-pod protocol for shared GPUs;
- ``portal_jobs``: the portal's own jobs as pods, and their namespaces;
- ``queue_objects``: KAI's Queue objects; ``lease``: the leader-election Lease;
- ``pod_groups`` and ``queue_status``: the PodGroups and ``Queue.status`` KAI's podgrouper and
  controllers write (docs/kai-objects.md);
- ``objects``: Kubernetes JSON parsed into the backend's plain data.

The rest of the portal uses what this module exports (an import-linter contract keeps the
`kubernetes` client in here).
"""

from __future__ import annotations

from .backend import KubernetesBackend
from .client import load_api_client
from .gpu_sharing import GpuSharing
from .lease import LeaderElector
from .objects import (
    MATCH_OPERATORS,
    PORTAL_JOB_UID_LABEL,
    TAINT_EFFECTS,
    node_affinity_of,
    quantity,
    tolerations_of,
)
from .queue_objects import QueueObjectConflict, QueueObjects, QueueObjectUnavailable

__all__ = [
    "MATCH_OPERATORS",
    "PORTAL_JOB_UID_LABEL",
    "TAINT_EFFECTS",
    "GpuSharing",
    "KubernetesBackend",
    "LeaderElector",
    "QueueObjectConflict",
    "QueueObjectUnavailable",
    "QueueObjects",
    "load_api_client",
    "node_affinity_of",
    "quantity",
    "tolerations_of",
]
