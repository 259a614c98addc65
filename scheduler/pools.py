"""Node pools as KAI scheduling shards (kai-semantics §1.6).

Nodes, queues and jobs carry a pool (label ``kai.scheduler/node-pool``); each pool is scheduled
on its own, with only its own nodes, queues and jobs, so quotas, fair shares, reclaim and
preemption never cross pools. A queue belongs to exactly one pool (unlabelled: its parent's,
and for a top-level queue the default pool), and a job runs in its queue's pool. A job that asks
for another pool (a node-pool selector) lands in that pool's shard, which does not see the
queue: it stays pending with QueueDoesNotExist, as in KAI, and the message names the queue's pool.
A job whose pods already run stays with the pool of their nodes (see ``assign_pools``).
"""

from __future__ import annotations

import dataclasses

from scheduler.model import DEFAULT_POOL, POOL_LABEL, Job, Node, Queue, TaskState

HOLDING = (TaskState.RUNNING, TaskState.RELEASING)


def queue_pools(queues: list[Queue]) -> dict[str, str]:
    """Each queue's pool: its own, else its nearest ancestor's, else the default pool."""
    by_name = {q.name: q for q in queues}
    pools: dict[str, str] = {}

    def resolve(queue: Queue, seen: frozenset[str] = frozenset()) -> str:
        if queue.name in pools:
            return pools[queue.name]
        if queue.pool is not None:
            pool = queue.pool
        elif queue.parent in by_name and queue.parent not in seen:
            pool = resolve(by_name[queue.parent], seen | {queue.name})
        else:
            pool = DEFAULT_POOL
        pools[queue.name] = pool
        return pool

    for queue in queues:
        resolve(queue)
    return pools


def assign_pools(jobs: list[Job], nodes: list[Node], pools: dict[str, str]) -> list[Job]:
    """Each job in the pool of the nodes its pods run on, else in the pool it asks for with a
    node-pool selector, else in its queue's pool.

    A pod that runs holds its node whatever its queue's pool is now (a relabelled node or queue):
    it must be seen where it runs, never taken for pending and placed a second time."""
    node_pool = {n.name: n.pool for n in nodes}
    # With every node and queue in one pool, a job's pods hold nodes of that pool and its queue
    # is there too: only a pool named in its node selector can put it elsewhere, so no task need
    # be looked at (a cluster without pools, the common case, has one per pod).
    every = set(node_pool.values()) | set(pools.values())
    only = every.pop() if len(every) == 1 else None
    placed: list[Job] = []
    for job in jobs:
        if only is not None and job.queue in pools and not job.node_selector.get(POOL_LABEL):
            placed.append(job if job.pool == only else dataclasses.replace(job, pool=only))
            continue
        running = None  # the pool of the first task that holds a node
        for t in job.tasks:
            if t.node in node_pool and t.state in HOLDING:
                running = node_pool[t.node]
                break
        pool = running or job.node_selector.get(POOL_LABEL) or pools.get(job.queue, job.pool)
        placed.append(job if job.pool == pool else dataclasses.replace(job, pool=pool))
    return placed
