"""Requests no node could ever hold: a task that asks for more than every node of its pool has.

Such a job would stay pending forever, so submission refuses it with a message that
says what the largest node offers. One query (the pool's nodes with their GPU counts
and largest device). A pool without nodes is not judged: the cluster may not have
been observed yet, and the fit check then says the pool has no GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.db.models import Count, Max

from kai_portal.nodes.models import Node

if TYPE_CHECKING:
    from kai_portal.workloads.models import Job

DEFAULT_POOL = "default"  # a job without a pool goes to the default pool (scheduling/snapshot.py)


@dataclass(frozen=True)
class NodeSize:
    gpus: int
    gpu_memory_mib: int
    cpu_millicores: int
    memory_mib: int


def pool_node_sizes(pool_name: str) -> list[NodeSize]:
    rows = (
        Node.objects.filter(pool__name=pool_name)
        .annotate(gpu_total=Count("gpus"), device_memory=Max("gpus__memory_mib"))
        .values_list("gpu_total", "device_memory", "cpu_millicores", "memory_mib")
    )
    return [NodeSize(g, m or 0, c, mem) for g, m, c, mem in rows]


def _gpus(n: int) -> str:
    return f"{n} GPU" + ("" if n == 1 else "s")


def oversized_task_errors(job: Job) -> dict[str, str]:
    """Field → message when one task of ``job`` is larger than every node of its pool; else empty."""
    pool = job.node_pool.name if job.node_pool_id and job.node_pool else DEFAULT_POOL
    sizes = pool_node_sizes(pool)
    if not sizes:
        return {}
    shared = job.gpu_fraction is not None or job.gpu_memory_mib is not None
    devices = (job.gpu_fraction_devices or 1) if shared else int(job.gpu_count or 0)
    gpu_memory = int(job.gpu_memory_mib or 0)
    cpu, memory = int(job.cpu_millicores or 0), int(job.memory_mib or 0)

    def holds(n: NodeSize) -> bool:
        return (
            n.gpus >= devices
            and (not gpu_memory or n.gpu_memory_mib >= gpu_memory)
            and n.cpu_millicores >= cpu
            and n.memory_mib >= memory
        )

    if any(holds(n) for n in sizes):
        return {}
    where = f"in the {pool} pool"
    errors: dict[str, str] = {}
    most_gpus = max(n.gpus for n in sizes)
    if devices > most_gpus:
        field = "gpu_fraction_devices" if shared else "gpu_count"
        errors[field] = (
            f"Each task asks for {_gpus(devices)}, but no node {where} has more than {_gpus(most_gpus)}; "
            "the job could never start."
        )
    most_memory = max(n.gpu_memory_mib for n in sizes)
    if gpu_memory > most_memory:
        errors["gpu_memory_mib"] = (
            f"Each task asks for {gpu_memory} MiB of one GPU's memory, but the largest GPU {where} has "
            f"{most_memory} MiB; the job could never start."
        )
    most_cpu = max(n.cpu_millicores for n in sizes)
    if cpu > most_cpu:
        errors["cpu_millicores"] = (
            f"Each task asks for {cpu / 1000:g} CPU cores, but no node {where} has more than "
            f"{most_cpu / 1000:g}; the job could never start."
        )
    most_ram = max(n.memory_mib for n in sizes)
    if memory > most_ram:
        errors["memory_mib"] = (
            f"Each task asks for {memory} MiB of memory, but no node {where} has more than {most_ram} MiB; "
            "the job could never start."
        )
    if not errors:
        errors["task_count"] = (
            f"No single node {where} has everything one task asks for at once (GPUs, GPU memory, CPU "
            "and memory); the job could never start."
        )
    return errors
