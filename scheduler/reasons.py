"""Message templates, worded as KAI words them (kai-semantics.md §8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

NODE_UNSCHEDULABLE = "node is unschedulable"
NODE_SELECTOR = "node(s) didn't match Pod's node affinity/selector"
PODS_EXCEEDED = "node(s) pod number exceeded"
NO_NODES = "no nodes with enough resources were found"
DEFAULT_POD_TEXT = "Unable to schedule pod"
UNABLE_PODGROUP = "Unable to schedule podgroup"

OVER_LIMIT = "OverLimit"
NON_PREEMPTIBLE_OVER_QUOTA = "NonPreemptibleOverQuota"
POD_SCHEDULING_ERRORS = "PodSchedulingErrors"
QUEUE_DOES_NOT_EXIST = "QueueDoesNotExist"
NOT_ENOUGH_FOR_WORKLOAD = "Not enough resources for the workload"

# Queue messages print GPUs, cores and GB (10^9 bytes); memory here is MiB.
_MIB_TO_GB = 1048576 / 1e9


def num(x: float) -> str:
    """A number with 3 significant digits, without trailing zeros."""
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def human(r: str, amount: float) -> str:
    """Amount of resource ``r`` in user units (GPUs, cores, GB)."""
    if r == "cpu":
        return num(amount / 1000)
    if r == "memory":
        return num(amount * _MIB_TO_GB)
    return num(amount)


def not_enough(resource: str) -> str:
    return f"node(s) didn't have enough resources: {resource}"


def fit_error(counts: Mapping[str, int], base: str = NO_NODES) -> str:
    """Compact pod fit error: one sorted ``<count> <reason>`` entry per reason."""
    entries = sorted(f"{n} {reason}" for reason, n in counts.items())
    if not entries:
        return base + "."
    return f"{base}: " + ". \n".join(entries) + "."


def pod_not_found(namespace: str, pod: str, error: str) -> str:
    return f"Resources were not found for pod {namespace}/{pod} due to: {error}"


def gang_partial(found: int, minimum: int, error: str) -> str:
    return (
        f"Resources were found for {found} pods while {minimum} are required for gang scheduling. "
        f"Additional pods cannot be scheduled due to: {error}"
    )


def over_limit(queue: str, r: str, limit: float, allocated: float, requested: float) -> str:
    if r == "gpu":
        what, unit = "GPUs", "GPUs"
    elif r == "cpu":
        what, unit = "CPU cores", "cores"
    else:
        what, unit = "memory", "GB"
    return (
        f"{queue} quota has reached the allowable limit of {what}. Limit is {human(r, limit)} {unit}, "
        f"currently {human(r, allocated)} {unit} allocated and "
        f"workload requested {human(r, requested)} {unit}"
    )


def non_preemptible_over_quota(
    queue: str, r: str, requested: float, quota: float, allocated_np: float
) -> str:
    if r == "gpu":
        req_unit, unit = "GPUs", "GPUs"
    elif r == "cpu":
        req_unit, unit = "CPU cores", "cores"
    else:
        req_unit, unit = "GB memory", "GB"
    return (
        f"Non-preemptible workload is over quota. Workload requested {human(r, requested)} {req_unit}, "
        f"but {queue} quota is {human(r, quota)} {unit}, while {human(r, allocated_np)} {unit} are already "
        "allocated for non-preemptible pods. Use a preemptible workload to go over quota."
    )


def max_node_pool_resources(
    namespace: str,
    pod: str,
    gpu: float,
    cpu_millis: float,
    memory_mib: float,
    pool: str,
    max_gpu: float | None,
) -> str:
    """Pre-predicate error when no single node of the pool could ever hold the pod."""
    head = (
        f"Scheduling conditions were not met for pod {namespace}/{pod}:\nMaxNodePoolResources: "
        f"The pod {namespace}/{pod} requires GPU: {num(gpu)}, CPU: {human('cpu', cpu_millis)} (cores), "
        f"memory: {human('memory', memory_mib)} (GB). "
    )
    if not max_gpu:
        return head + f"No node in the {pool} node-pool has GPU resources."
    return (
        head
        + f"Max GPU resources available in a single node in the {pool} node-pool is topped at {num(max_gpu)}."
    )


def max_node_pool_other(namespace: str, pod: str, resource: str, pool: str, top: str) -> str:
    return (
        f"Scheduling conditions were not met for pod {namespace}/{pod}:\nMaxNodePoolResources: "
        f"The pod {namespace}/{pod} requires more {resource} than any node in the {pool} node-pool has "
        f"(topped at {top})."
    )


def job_message(errors: Sequence[tuple[str, str]]) -> str:
    """PodGroup message: one reason as prefix (or the generic one), distinct messages sorted."""
    if not errors:
        return DEFAULT_POD_TEXT
    prefix = errors[0][0] if len(errors) == 1 else UNABLE_PODGROUP
    counts: dict[str, int] = {}
    for _reason, msg in errors:
        counts[msg] = counts.get(msg, 0) + 1
    parts = sorted(msg if n == 1 else f"{n} {msg}" for msg, n in counts.items())
    body = ". \n".join(p.rstrip(".") for p in parts)
    return f"{prefix}: {body}."


def not_ready(minimum: int, alive: int, gated: int = 0) -> str:
    return (
        f"Job is not ready for scheduling. Waiting for {minimum} pods, "
        f"currently {alive} exist, {gated} are gated"
    )


def queue_missing(queue: str) -> str:
    return f"Queue '{queue}' does not exist"


def scheduled(namespace: str, pod: str, node: str, pool: str) -> str:
    return f"Successfully assigned pod {namespace}/{pod} to node {node} at node-pool {pool}"


def pipelined(namespace: str, pod: str, node: str) -> str:
    return f"Pod {namespace}/{pod} was pipelined to node {node}"


def topology_unsatisfied(topology: str, level: str, job: str, where: str) -> str:
    return (
        f"topology {topology}, requirement {level} couldn't be satisfied for job {job}: "
        f"not enough resources in {where} to allocate the job"
    )
