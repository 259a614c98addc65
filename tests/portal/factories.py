"""Plain factory functions for portal models (valid by default, override any field)."""

from __future__ import annotations

from typing import Any

from kai_portal.nodes.models import GpuDevice, Node, NodePool
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Team
from kai_portal.workloads import submission
from kai_portal.workloads.models import Job


def queue(name: str, **fields: Any) -> Queue:
    q = Queue(name=name, **fields)
    q.save()
    return q


def team(slug: str = "ml", **fields: Any) -> Team:
    t = Team(slug=slug, name=fields.pop("name", slug.upper()), **fields)
    t.save()
    return t


def job(queue: Queue, name: str = "train", **fields: Any) -> Job:
    return submission.submit(Job(queue=queue, name=name, **{"gpu_count": 1, **fields}))


def node(name: str = "node-1", pool: str = "default", gpus: int = 8, **fields: Any) -> Node:
    p, _ = NodePool.objects.get_or_create(name=pool)
    n = Node(name=name, pool=p, **{"cpu_millicores": 64_000, "memory_mib": 262_144, **fields})
    n.save()
    for i in range(gpus):
        GpuDevice(node=n, index=i, model="NVIDIA A100-SXM4-80GB", memory_mib=81_920).save()
    return n
