"""The node pools a cluster names, for ``run_scheduler`` with shards and no ``--pool`` (kubernetes mode).

A pool's rows are written by that pool's own cycle (cluster/sync.py with a pool's share), so a pool
the portal has no row of yet would never get a cycle if the pools were read from the rows alone:
its nodes' node-pool label and the Queue objects' pools name it first.
"""

from __future__ import annotations

from kai_portal.cluster.backends import ClusterBackend, QueueObjectStore
from kai_portal.cluster.queue_sync import object_pools
from kai_portal.nodes.models import DEFAULT_POOL_NAME


def cluster_pools(backend: ClusterBackend) -> set[str]:
    """Every pool named by a node (its label; none: the default pool) or a Queue object of the cluster."""
    state = backend.observe()
    pools = {node.pool or DEFAULT_POOL_NAME for node in state.nodes.values()}
    if isinstance(backend, QueueObjectStore):
        queues = backend.queue_objects.observe()
        if queues:
            pools |= set(object_pools(queues, {}).values())
    return pools
