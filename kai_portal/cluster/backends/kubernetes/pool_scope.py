"""One node pool's share of the cluster: what a pool's scheduler observes and may write (shards).

KAI runs a scheduler per ``SchedulingShard``, started with ``--partition-label-value``: its
informers take only the nodes whose node-pool label has that value (no label: the default pool)
and the PodGroups and queues carrying it. The portal's pools are the same partition; a job's pool
is decided as the engine assigns pools (``scheduler.pools.assign_pools``, and the snapshot's
``Shard``):

- a job whose pods are on nodes belongs to the pool of its first such pod's node (by pod name);
- else to the pool its node selector names on the pool label (a pod's own node-pool label is
  read as that selector, objects.parse_pod);
- else to its queue's pool (the portal's rows, given by the cycle; unknown queue: the default).

Unlike KAI the watches still list the whole cluster (a pod carries no pool of its own, and a node
relabelled to another pool must not look deleted); the share is cut from it each cycle.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..base import ClusterState, ObservedNode, ObservedPod

DEFAULT_POOL = "default"  # a node without the pool label, a queue without a pool
DEFAULT_QUEUE = "default-queue"  # KAI's queue for a pod naming none


@dataclass
class PoolScope:
    """The share of node pool ``pool`` in a cluster whose nodes carry ``pool_label``."""

    pool: str
    pool_label: str
    queue_pools: Mapping[str, str] = field(default_factory=dict)  # queue name -> its pool

    def node_pool(self, node: ObservedNode) -> str:
        return node.pool or DEFAULT_POOL

    def job_pool(self, pods: list[ObservedPod], nodes: Mapping[str, ObservedNode]) -> str:
        """The pool whose scheduler owns the job of ``pods`` (see the module's text)."""
        ordered = sorted(pods, key=lambda p: p.name)
        for pod in ordered:
            if pod.node and pod.node in nodes:
                return self.node_pool(nodes[pod.node])
        first = ordered[0]
        selected = first.node_selector.get(self.pool_label)
        if selected:
            return selected
        return self.queue_pools.get(first.queue or DEFAULT_QUEUE, DEFAULT_POOL)

    def share(self, state: ClusterState) -> ClusterState:
        """This pool's nodes, the pods of this pool's jobs, and every node and job key of the cluster."""
        nodes = {name: node for name, node in state.nodes.items() if self.node_pool(node) == self.pool}
        by_job: dict[str, list[ObservedPod]] = defaultdict(list)
        for pod in state.pods.values():
            by_job[pod.job.key].append(pod)
        ours = {key for key, pods in by_job.items() if self.job_pool(pods, state.nodes) == self.pool}
        return ClusterState(
            nodes=nodes,
            pods={key: pod for key, pod in state.pods.items() if pod.job.key in ours},
            node_resource_version=state.node_resource_version,
            pod_resource_version=state.pod_resource_version,
            external={name: usage for name, usage in state.external.items() if name in nodes},
            cluster_nodes=frozenset(state.nodes),
            cluster_jobs=frozenset(by_job),
        )

    def refuses_node(self, node: str, nodes: Mapping[str, ObservedNode]) -> str | None:
        """Why this pool's scheduler must not bind onto, or evict from, ``node`` (None: it may)."""
        observed = nodes.get(node)
        if observed is None:
            return f"node {node} is not in the cluster as observed (pool {self.pool!r}'s scheduler)"
        pool = self.node_pool(observed)
        if pool != self.pool:
            return (
                f"node {node} is in node pool {pool!r}, not {self.pool!r}: only pool {pool!r}'s "
                "scheduler binds or evicts there (shards)"
            )
        return None
