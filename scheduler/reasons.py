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


def subgroup_partial(found: int, subgroup: str, minimum: int, error: str) -> str:
    return (
        f"Resources were found for {found} pods from all sub-groups while sub-group {subgroup} "
        f"requires {minimum} pods for gang scheduling. Additional pods cannot be scheduled in this "
        f"sub-group due to: {error}"
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


def queue_missing(queue: str, pool: str | None = None, elsewhere: str | None = None) -> str:
    """No such queue in this shard; ``elsewhere`` names the node pool the queue belongs to."""
    if elsewhere is None or pool is None:
        return f"Queue '{queue}' does not exist"
    return (
        f"Queue '{queue}' does not exist in node-pool '{pool}': it belongs to node-pool '{elsewhere}'. "
        f"Submit the job to a queue of node-pool '{pool}', or drop the node-pool selector."
    )


def scheduled(namespace: str, pod: str, node: str, pool: str) -> str:
    return f"Successfully assigned pod {namespace}/{pod} to node {node} at node-pool {pool}"


def pipelined(namespace: str, pod: str, node: str) -> str:
    return f"Pod {namespace}/{pod} was pipelined to node {node}"


def node_over_capacity(reason: str, details: str) -> str:
    """Per-node fit error when the queue check on that node fails (KAI's predicates plugin)."""
    return f"node does not have enough capacity. Reason: {reason}, Details: {details}"


def topology_no_match(topology: str, level: str, namespace: str, job: str) -> str:
    """KAI's job fit error when no domain of the required level can hold the job."""
    return f"topology {topology}, requirement {level} couldn't be satisfied for job <{namespace}/{job}>"


def domain_pods(domain: str, can: int, required: int) -> str:
    """A domain that could hold only some of the job's (identical) pods."""
    return f"node-group {domain} can allocate only {can} of {required} required pods"


def domain_short(resource: str) -> str:
    """A domain short of one resource (pods of different shapes): GPUs, CPU cores or memory."""
    return f"node-group(s) didn't have enough resources: {resource}"


# ---- eviction messages (§8) ---------------------------------------------------------------


def evicted_by_preempt(namespace: str, pod: str, evictor_ns: str, evictor: str) -> str:
    return f"Pod {namespace}/{pod} was preempted by higher priority workload {evictor_ns}/{evictor}"


def evicted_by_reclaim(namespace: str, pod: str, evictor_ns: str, evictor: str, lines: Sequence[str]) -> str:
    head = f"Pod {namespace}/{pod} was preempted by workload {evictor_ns}/{evictor}."
    return "\n".join([head, *lines])


def queue_usage_line(
    queue: str,
    used: Mapping[str, float],
    quota: Mapping[str, float],
    fair_share: Mapping[str, float],
    priority: int,
) -> str:
    return (
        f"{queue} uses {_vector(used)} with a quota of {_vector(quota)}, "
        f"fair-share of {_vector(fair_share)} and queue priority of {priority}."
    )


def _amount(r: str, v: float) -> str:
    return "-1" if v < 0 else human(r, v)


def _vector(v: Mapping[str, float]) -> str:
    return (
        f"GPU: {_amount('gpu', v.get('gpu', 0.0))}, CPU: {_amount('cpu', v.get('cpu', 0.0))} (cores), "
        f"memory: {_amount('memory', v.get('memory', 0.0))} (GB)"
    )


def evicted_by_consolidation(namespace: str, pod: str) -> str:
    return (
        f"Pod {namespace}/{pod} was preempted and rescheduled due to bin packing "
        "(resource consolidation) procedure"
    )


def evicted_stale_gang(minimum: int, namespace: str, pod: str) -> str:
    return (
        f"Workload doesn't meet the minimum required number of pods ({minimum}), "
        f"evicting remaining pod: {namespace}/{pod}"
    )


def evicted_stale_subgroup(minimum: int, subgroup: str, namespace: str, pod: str) -> str:
    return (
        f"Workload doesn't meet the minimum required number of pods ({minimum}) in sub-group "
        f"{subgroup}, evicting remaining pod: {namespace}/{pod}"
    )


def stale_job(active: int, minimum: int) -> str:
    return f"Job is stale. {active} pods are active, minMember is {minimum}"


def go_duration(seconds: float) -> str:
    """A duration as Go prints it: ``30s``, ``5m0s``, ``1h30m0s``."""
    total = round(seconds, 3)
    if total == 0:
        return "0s"
    sign = "-" if total < 0 else ""
    total = abs(total)
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    sec_text = f"{sec:g}s"
    if h:
        return f"{sign}{int(h)}h{int(m)}m{sec_text}"
    if m:
        return f"{sign}{int(m)}m{sec_text}"
    return f"{sign}{sec_text}"


def preemption_delay(delay_s: float, until: str) -> str:
    return (
        f"Workload is within its preemption delay window ({go_duration(delay_s)}) and may not trigger "
        f"evictions before {until}"
    )


# ---- why an eviction action could not help a pending job ------------------------------------
# KAI emits none of these but PreemptionDelayNotElapsed: the others are the engine's own notes,
# kept apart from the KAI-worded job message (``CycleResult.job_notes``).
RECLAIM_NOT_POSSIBLE = "ReclaimNotPossible"
PREEMPT_NOT_POSSIBLE = "PreemptNotPossible"
CONSOLIDATION_NOT_POSSIBLE = "ConsolidationNotPossible"
PREEMPTION_DELAY_NOT_ELAPSED = "PreemptionDelayNotElapsed"


def reclaim_over_fair_share(
    queue: str, used: Mapping[str, float], fair_share: Mapping[str, float], requested: Mapping[str, float]
) -> str:
    return (
        f"Resources cannot be reclaimed from other queues: {queue} uses {_vector(used)} with a "
        f"fair-share of {_vector(fair_share)}, and the workload requested {_vector(requested)}, which "
        "would take it above its fair share"
    )


def reclaim_np_over_quota(queue: str, quota: Mapping[str, float], requested: Mapping[str, float]) -> str:
    return (
        f"Resources cannot be reclaimed from other queues: non-preemptible workload requested "
        f"{_vector(requested)}, which would take {queue} above its quota of {_vector(quota)}"
    )


def reclaim_no_victims(queue: str) -> str:
    return (
        "Resources cannot be reclaimed from other queues: no preemptible workload of another queue "
        f"may be reclaimed for {queue} (queues at or below their fair share and quota are protected, "
        "and so are workloads within their minimum runtime)"
    )


def reclaim_no_scenario(queue: str) -> str:
    return (
        f"Resources cannot be reclaimed from other queues: the workloads that may be reclaimed for {queue} "
        "would not free enough resources for the workload, or only by taking a queue below its fair "
        "share or quota"
    )


def preempt_no_victims(queue: str, priority: int) -> str:
    return (
        f"No workload can be preempted: {queue} has no preemptible workload with a priority lower "
        f"than {priority} that is past its minimum runtime"
    )


def preempt_no_scenario(queue: str, priority: int) -> str:
    return (
        f"No workload can be preempted: evicting the preemptible workloads of {queue} with a priority "
        f"lower than {priority} would not make room for the workload"
    )


def preempt_np_over_quota(queue: str) -> str:
    return f"No workload can be preempted: a non-preemptible workload may not go above the quota of {queue}"


def consolidation_not_possible() -> str:
    return (
        "Resource consolidation cannot make room: running workloads cannot be moved to other nodes "
        "to free enough resources for the workload"
    )
