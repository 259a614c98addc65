"""The cluster backend named by ``settings.CLUSTER_BACKEND``, wired to what it needs.

The simulated backend's cluster is the portal's rows (simulated_cluster.py), so a fresh backend
per cycle is fine and ``clock`` sets its time. The Kubernetes backend keeps a watch cache (and its
lease elector) between cycles, so one instance lives per process, and one per node pool the
process schedules as a shard (``SCHEDULING_SHARDS``: scoped to the pool, its own Lease).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings

from kai_portal.cluster.backends import ClusterBackend

if TYPE_CHECKING:
    from kai_portal.cluster.backends.kubernetes import KubernetesBackend

_kubernetes_backend: ClusterBackend | None = None
# Shards: one Kubernetes backend per node pool a process schedules (its own watches and Lease).
_pool_backends: dict[str, ClusterBackend] = {}
_pool_backends_guard = threading.Lock()


def get_backend(clock: Callable[[], datetime] | None = None, pool: str | None = None) -> ClusterBackend:
    """The configured backend: Kubernetes (one per process, and one per node pool ``pool`` that this
    process schedules), else the simulated cluster at ``clock``."""
    global _kubernetes_backend

    if settings.CLUSTER_BACKEND == "kubernetes" and pool is not None:
        with _pool_backends_guard:
            if pool not in _pool_backends:
                backend = _new_kubernetes_backend()
                backend.scope_to_pool(pool)
                _pool_backends[pool] = backend
            return _pool_backends[pool]
    if settings.CLUSTER_BACKEND == "kubernetes":
        if _kubernetes_backend is None:
            _kubernetes_backend = _new_kubernetes_backend()
        return _kubernetes_backend
    from kai_portal.workloads.simulated_cluster import RowBackend

    return RowBackend(clock=clock)


def _new_kubernetes_backend() -> KubernetesBackend:
    # Imported here: the kubernetes client is never loaded in simulated mode for this.
    from kai_portal.cluster.backends.kubernetes import GpuSharing, KubernetesBackend

    backend = KubernetesBackend(
        scheduler_name=settings.SCHEDULER_NAME, queue_label_keys=(settings.QUEUE_LABEL_KEY,)
    )
    backend.gpu_sharing = GpuSharing(
        backend.core,
        scheduler_name=settings.SCHEDULER_NAME,
        namespace=settings.GPU_SHARING_NAMESPACE,
        image=settings.GPU_SHARING_RESERVATION_IMAGE,
        runtime_class=settings.GPU_SHARING_RUNTIME_CLASS or None,
        allocation_timeout_seconds=settings.GPU_SHARING_ALLOCATION_TIMEOUT_SECONDS,
    )
    return backend
