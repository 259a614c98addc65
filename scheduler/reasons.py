"""Why the engine decided what it did: ``Reason`` values made where the engine decides (a code and
typed parameters), and their wording as KAI words them (kai-semantics.md §8), done once at the edge
by ``render``.

A ``Reason`` names tasks and jobs by ``Ref`` (engine key and namespace), never by text: whoever
shows it says how a job or task is named (``render(reason, names)``; by default as keyed), so no
text is rewritten after the fact. Each public constructor builds a ``Reason`` whose wording is the
``_w_`` function of the same name; parameters reach the wording already rendered (a ``Ref`` as
``namespace/name`` or, when ``bare``, the name alone; a nested ``Reason`` as its text).

Over 500 lines on purpose: every text a user or KAI's tooling reads is worded here and nowhere
else, each constructor beside its wording, so a text is checked against KAI's source in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Union


@dataclass(frozen=True, slots=True)
class Ref:
    """A task (or, ``kind`` job, a job) by its engine key; shown as ``namespace/<name>``
    (``bare``: the name alone)."""

    key: str
    namespace: str = ""
    bare: bool = False
    kind: Literal["task", "job"] = "task"


# A reason's parameter: a number, a word, a resource vector, a reference, a nested reason, or a
# tuple of them (the job message's (code, reason) pairs, a fit error's (text, count) pairs).
Param = Union[int, float, str, None, Ref, "Reason", Mapping[str, float], tuple["Param", ...]]


@dataclass(frozen=True, slots=True)
class Reason:
    """One decision's why: ``code`` is KAI's reason code where KAI has one (``OverLimit``,
    ``PodSchedulingErrors``, ...; ``Unschedulable`` for a pod's own text), ``wording`` names the
    template, ``params`` its values as decided (copies: the engine's state moves on)."""

    code: str
    wording: str
    params: tuple[Param, ...] = ()


Names = Callable[[Ref], str]


def as_keyed(ref: Ref) -> str:
    """The default naming: a task or job shown by its engine key."""
    return ref.key


def render(reason: Reason, names: Names = as_keyed) -> str:
    """The text of ``reason``, tasks and jobs named by ``names``."""
    args = [_resolve(p, names) for p in reason.params]
    return _WORDINGS[reason.wording](*args)


def _resolve(p: Param, names: Names) -> object:
    if isinstance(p, Ref):
        return names(p) if p.bare else f"{p.namespace}/{names(p)}"
    if isinstance(p, Reason):
        return render(p, names)
    if isinstance(p, tuple):
        return tuple(_resolve(x, names) for x in p)
    return p


_WORDINGS: dict[str, Callable[..., str]] = {}


def _wording(fn: Callable[..., str]) -> Callable[..., str]:
    _WORDINGS[fn.__name__.removeprefix("_w_")] = fn
    return fn


UNSCHEDULABLE = "Unschedulable"  # KAI's pod condition reason; the code of a pod's own text

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
NOT_READY = "NotReady"
NOT_ENOUGH_FOR_WORKLOAD = "Not enough resources for the workload"
SCHEDULED = "Scheduled"
PIPELINED = "Pipelined"
EVICT = "Evict"
STALE_JOB = "StaleJob"

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


# ---- a node's or a domain's fit error: text fragments that name no job or task, counted as
# KAI's histogram counts them ----------------------------------------------------------------


def not_enough(resource: str) -> str:
    return f"node(s) didn't have enough resources: {resource}"


def node_over_capacity(reason: str, details: str) -> str:
    """Per-node fit error when the queue check on that node fails (KAI's predicates plugin)."""
    return f"node does not have enough capacity. Reason: {reason}, Details: {details}"


def domain_pods(domain: str, can: int, required: int) -> str:
    """A domain that could hold only some of the job's (identical) pods."""
    return f"node-group {domain} can allocate only {can} of {required} required pods"


def domain_short(resource: str) -> str:
    """A domain short of one resource (pods of different shapes): GPUs, CPU cores or memory."""
    return f"node-group(s) didn't have enough resources: {resource}"


# ---- reasons ------------------------------------------------------------------------------


def plain(code: str, text: str) -> Reason:
    """A reason whose text names no task or job (a default, a domain's fit error)."""
    return Reason(code, "plain", (text,))


@_wording
def _w_plain(text: str) -> str:
    return text


DEFAULT_POD_REASON = plain(UNSCHEDULABLE, DEFAULT_POD_TEXT)


def fit_error(counts: Mapping[str, int], base: str = NO_NODES) -> Reason:
    """Compact pod fit error: one sorted ``<count> <reason>`` entry per node reason."""
    return Reason(UNSCHEDULABLE, "fit_error", (tuple(counts.items()), base))


@_wording
def _w_fit_error(counts: Sequence[tuple[str, int]], base: str) -> str:
    # KAI's TasksFitErrors.Error(): the base alone (no full stop) when no node gave a reason.
    entries = sorted(f"{n} {reason}" for reason, n in counts)
    if not entries:
        return base
    return f"{base}: " + ". \n".join(entries) + "."


def pod_not_found(task: Ref, error: Reason) -> Reason:
    return Reason(UNSCHEDULABLE, "pod_not_found", (task, error))


@_wording
def _w_pod_not_found(pod: str, error: str) -> str:
    return f"Resources were not found for pod {pod} due to: {error}"


def gang_partial(found: int, minimum: int, error: Reason) -> Reason:
    return Reason(UNSCHEDULABLE, "gang_partial", (found, minimum, error))


@_wording
def _w_gang_partial(found: int, minimum: int, error: str) -> str:
    return (
        f"Resources were found for {found} pods while {minimum} are required for gang scheduling. "
        f"Additional pods cannot be scheduled due to: {error}"
    )


def subgroup_partial(found: int, subgroup: str, minimum: int, error: Reason) -> Reason:
    return Reason(UNSCHEDULABLE, "subgroup_partial", (found, subgroup, minimum, error))


@_wording
def _w_subgroup_partial(found: int, subgroup: str, minimum: int, error: str) -> str:
    return (
        f"Resources were found for {found} pods from all sub-groups while sub-group {subgroup} "
        f"requires {minimum} pods for gang scheduling. Additional pods cannot be scheduled in this "
        f"sub-group due to: {error}"
    )


def over_limit(queue: str, r: str, limit: float, allocated: float, requested: float) -> Reason:
    return Reason(OVER_LIMIT, "over_limit", (queue, r, limit, allocated, requested))


@_wording
def _w_over_limit(queue: str, r: str, limit: float, allocated: float, requested: float) -> str:
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
) -> Reason:
    return Reason(
        NON_PREEMPTIBLE_OVER_QUOTA, "non_preemptible_over_quota", (queue, r, requested, quota, allocated_np)
    )


@_wording
def _w_non_preemptible_over_quota(
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
    task: Ref, gpu: float, cpu_millis: float, memory_mib: float, pool: str, max_gpu: float | None
) -> Reason:
    """Pre-predicate error when no single node of the pool could ever hold the pod."""
    return Reason(
        UNSCHEDULABLE, "max_node_pool_resources", (task, gpu, cpu_millis, memory_mib, pool, max_gpu)
    )


@_wording
def _w_max_node_pool_resources(
    pod: str, gpu: float, cpu_millis: float, memory_mib: float, pool: str, max_gpu: float | None
) -> str:
    head = (
        f"Scheduling conditions were not met for pod {pod}:\nMaxNodePoolResources: "
        f"The pod {pod} requires GPU: {num(gpu)}, CPU: {human('cpu', cpu_millis)} (cores), "
        f"memory: {human('memory', memory_mib)} (GB). "
    )
    if not max_gpu:
        return head + f"No node in the {pool} node-pool has GPU resources."
    return (
        head
        + f"Max GPU resources available in a single node in the {pool} node-pool is topped at {num(max_gpu)}."
    )


def max_node_pool_other(task: Ref, r: str, pool: str, top: float) -> Reason:
    """The pod asks more CPU (``r`` = cpu) or memory than the pool's largest node has (``top``)."""
    return Reason(UNSCHEDULABLE, "max_node_pool_other", (task, r, pool, top))


@_wording
def _w_max_node_pool_other(pod: str, r: str, pool: str, top: float) -> str:
    resource, shown = ("CPU", human(r, top) + " cores") if r == "cpu" else ("memory", human(r, top) + " GB")
    return (
        f"Scheduling conditions were not met for pod {pod}:\nMaxNodePoolResources: "
        f"The pod {pod} requires more {resource} than any node in the {pool} node-pool has "
        f"(topped at {shown})."
    )


def job_message(errors: Sequence[tuple[str, Reason]]) -> Reason:
    """PodGroup message: one reason as prefix (or the generic one), distinct messages sorted; its
    code is that one reason's (``Unschedulable`` for several)."""
    code = errors[0][0] if len(errors) == 1 else UNSCHEDULABLE
    return Reason(code, "job_message", (tuple(errors),))


@_wording
def _w_job_message(errors: Sequence[tuple[str, str]]) -> str:
    if not errors:
        return DEFAULT_POD_TEXT
    prefix = errors[0][0] if len(errors) == 1 else UNABLE_PODGROUP
    counts: dict[str, int] = {}
    for _reason, msg in errors:
        counts[msg] = counts.get(msg, 0) + 1
    parts = sorted(msg if n == 1 else f"{n} {msg}" for msg, n in counts.items())
    body = ". \n".join(parts)
    return f"{prefix}: {body}."


def not_ready(minimum: int, alive: int, gated: int = 0) -> Reason:
    return Reason(NOT_READY, "not_ready", (minimum, alive, gated))


@_wording
def _w_not_ready(minimum: int, alive: int, gated: int) -> str:
    return (
        f"Job is not ready for scheduling. Waiting for {minimum} pods, "
        f"currently {alive} exist, {gated} are gated"
    )


def queue_missing(queue: str, pool: str | None = None, elsewhere: str | None = None) -> Reason:
    """No such queue in this shard; ``elsewhere`` names the node pool the queue belongs to."""
    return Reason(QUEUE_DOES_NOT_EXIST, "queue_missing", (queue, pool, elsewhere))


@_wording
def _w_queue_missing(queue: str, pool: str | None, elsewhere: str | None) -> str:
    if elsewhere is None or pool is None:
        return f"Queue '{queue}' does not exist"
    return (
        f"Queue '{queue}' does not exist in node-pool '{pool}': it belongs to node-pool '{elsewhere}'. "
        f"Submit the job to a queue of node-pool '{pool}', or drop the node-pool selector."
    )


def scheduled(task: Ref, node: str, pool: str) -> Reason:
    return Reason(SCHEDULED, "scheduled", (task, node, pool))


@_wording
def _w_scheduled(pod: str, node: str, pool: str) -> str:
    return f"Successfully assigned pod {pod} to node {node} at node-pool {pool}"


def pipelined(task: Ref, node: str) -> Reason:
    return Reason(PIPELINED, "pipelined", (task, node))


@_wording
def _w_pipelined(pod: str, node: str) -> str:
    return f"Pod {pod} was pipelined to node {node}"


def topology_no_match(topology: str, level: str, job: Ref, where: str | None = None) -> Reason:
    """KAI's job fit error when no domain of the required level can hold the job (``where``: the
    detail KAI appends when the whole cluster is short)."""
    return Reason(POD_SCHEDULING_ERRORS, "topology_no_match", (topology, level, job, where))


@_wording
def _w_topology_no_match(topology: str, level: str, job: str, where: str | None) -> str:
    text = f"topology {topology}, requirement {level} couldn't be satisfied for job <{job}>"
    return text if where is None else f"{text}: {where}"


# ---- eviction messages (§8) ---------------------------------------------------------------


def evicted_by_preempt(task: Ref, evictor: Ref) -> Reason:
    return Reason(EVICT, "evicted_by_preempt", (task, evictor))


@_wording
def _w_evicted_by_preempt(pod: str, evictor: str) -> str:
    return f"Pod {pod} was preempted by higher priority workload {evictor}"


def evicted_by_reclaim(task: Ref, evictor: Ref, lines: Sequence[Reason]) -> Reason:
    return Reason(EVICT, "evicted_by_reclaim", (task, evictor, tuple(lines)))


@_wording
def _w_evicted_by_reclaim(pod: str, evictor: str, lines: Sequence[str]) -> str:
    head = f"Pod {pod} was preempted by workload {evictor}."
    return "\n".join([head, *lines])


def queue_usage_line(
    queue: str,
    used: Mapping[str, float],
    quota: Mapping[str, float],
    fair_share: Mapping[str, float],
    priority: int,
) -> Reason:
    return Reason("", "queue_usage_line", (queue, dict(used), dict(quota), dict(fair_share), priority))


@_wording
def _w_queue_usage_line(
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


def evicted_by_consolidation(task: Ref) -> Reason:
    return Reason(EVICT, "evicted_by_consolidation", (task,))


@_wording
def _w_evicted_by_consolidation(pod: str) -> str:
    return f"Pod {pod} was preempted and rescheduled due to bin packing (resource consolidation) procedure"


def evicted_stale_gang(minimum: int, task: Ref) -> Reason:
    return Reason(EVICT, "evicted_stale_gang", (minimum, task))


@_wording
def _w_evicted_stale_gang(minimum: int, pod: str) -> str:
    return (
        f"Workload doesn't meet the minimum required number of pods ({minimum}), "
        f"evicting remaining pod: {pod}"
    )


def evicted_stale_subgroup(minimum: int, subgroup: str, task: Ref) -> Reason:
    return Reason(EVICT, "evicted_stale_subgroup", (minimum, subgroup, task))


@_wording
def _w_evicted_stale_subgroup(minimum: int, subgroup: str, pod: str) -> str:
    return (
        f"Workload doesn't meet the minimum required number of pods ({minimum}) in sub-group "
        f"{subgroup}, evicting remaining pod: {pod}"
    )


def stale_job(active: int, minimum: int) -> Reason:
    return Reason(STALE_JOB, "stale_job", (active, minimum))


@_wording
def _w_stale_job(active: int, minimum: int) -> str:
    return f"Job is stale. {active} pods are active, minMember is {minimum}"


# ---- why a task was chosen as a victim (``Eviction.reason``; the engine's own words) -----------


def victim_over_fair_share(queue: str, job: Ref, priority: int, reclaimer_queue: str) -> Reason:
    return Reason("", "victim_over_fair_share", (queue, job, priority, reclaimer_queue))


@_wording
def _w_victim_over_fair_share(queue: str, job: str, priority: int, reclaimer_queue: str) -> str:
    return (
        f"queue {queue} is above its fair share and job {job} (priority {priority}) "
        f"comes first in victim order; {reclaimer_queue} is below its fair share"
    )


def victim_lower_priority(priority: int, preemptor_priority: int, preemptor: Ref, queue: str) -> Reason:
    return Reason("", "victim_lower_priority", (priority, preemptor_priority, preemptor, queue))


@_wording
def _w_victim_lower_priority(priority: int, preemptor_priority: int, preemptor: str, queue: str) -> str:
    return f"priority {priority} is below {preemptor_priority} of {preemptor} in queue {queue}"


def victim_moved(job: Ref) -> Reason:
    return Reason("", "victim_moved", (job,))


@_wording
def _w_victim_moved(job: str) -> str:
    return f"moved to make room for {job}; it keeps running elsewhere"


def victim_stale(used: int, minimum: int, stale_for: float, grace: float) -> Reason:
    return Reason("", "victim_stale", (used, minimum, stale_for, grace))


@_wording
def _w_victim_stale(used: int, minimum: int, stale_for: float, grace: float) -> str:
    return f"{used} of {minimum} required pods active for {stale_for:g}s (grace period {grace:g}s)"


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


# ---- why an eviction action could not help a pending job ------------------------------------
# KAI emits none of these but PreemptionDelayNotElapsed: the others are the engine's own notes,
# kept apart from the KAI-worded job message (``CycleResult.job_notes``).
RECLAIM_NOT_POSSIBLE = "ReclaimNotPossible"
PREEMPT_NOT_POSSIBLE = "PreemptNotPossible"
CONSOLIDATION_NOT_POSSIBLE = "ConsolidationNotPossible"
PREEMPTION_DELAY_NOT_ELAPSED = "PreemptionDelayNotElapsed"


def preemption_delay(delay_s: float, until: str) -> Reason:
    return Reason(PREEMPTION_DELAY_NOT_ELAPSED, "preemption_delay", (delay_s, until))


@_wording
def _w_preemption_delay(delay_s: float, until: str) -> str:
    return (
        f"Workload is within its preemption delay window ({go_duration(delay_s)}) and may not trigger "
        f"evictions before {until}"
    )


def reclaim_over_fair_share(
    queue: str, used: Mapping[str, float], fair_share: Mapping[str, float], requested: Mapping[str, float]
) -> Reason:
    params: tuple[Param, ...] = (queue, dict(used), dict(fair_share), dict(requested))
    return Reason(RECLAIM_NOT_POSSIBLE, "reclaim_over_fair_share", params)


@_wording
def _w_reclaim_over_fair_share(
    queue: str, used: Mapping[str, float], fair_share: Mapping[str, float], requested: Mapping[str, float]
) -> str:
    return (
        f"Resources cannot be reclaimed from other queues: {queue} uses {_vector(used)} with a "
        f"fair-share of {_vector(fair_share)}, and the workload requested {_vector(requested)}, which "
        "would take it above its fair share"
    )


def reclaim_np_over_quota(queue: str, quota: Mapping[str, float], requested: Mapping[str, float]) -> Reason:
    return Reason(RECLAIM_NOT_POSSIBLE, "reclaim_np_over_quota", (queue, dict(quota), dict(requested)))


@_wording
def _w_reclaim_np_over_quota(queue: str, quota: Mapping[str, float], requested: Mapping[str, float]) -> str:
    return (
        f"Resources cannot be reclaimed from other queues: non-preemptible workload requested "
        f"{_vector(requested)}, which would take {queue} above its quota of {_vector(quota)}"
    )


def reclaim_no_victims(queue: str) -> Reason:
    return Reason(RECLAIM_NOT_POSSIBLE, "reclaim_no_victims", (queue,))


@_wording
def _w_reclaim_no_victims(queue: str) -> str:
    return (
        "Resources cannot be reclaimed from other queues: no preemptible workload of another queue "
        f"may be reclaimed for {queue} (queues at or below their fair share and quota are protected, "
        "and so are workloads within their minimum runtime)"
    )


def reclaim_no_scenario(queue: str) -> Reason:
    return Reason(RECLAIM_NOT_POSSIBLE, "reclaim_no_scenario", (queue,))


@_wording
def _w_reclaim_no_scenario(queue: str) -> str:
    return (
        f"Resources cannot be reclaimed from other queues: the workloads that may be reclaimed for {queue} "
        "would not free enough resources for the workload, or only by taking a queue below its fair "
        "share or quota"
    )


def preempt_no_victims(queue: str, priority: int) -> Reason:
    return Reason(PREEMPT_NOT_POSSIBLE, "preempt_no_victims", (queue, priority))


@_wording
def _w_preempt_no_victims(queue: str, priority: int) -> str:
    return (
        f"No workload can be preempted: {queue} has no preemptible workload with a priority lower "
        f"than {priority} that is past its minimum runtime"
    )


def preempt_no_scenario(queue: str, priority: int) -> Reason:
    return Reason(PREEMPT_NOT_POSSIBLE, "preempt_no_scenario", (queue, priority))


@_wording
def _w_preempt_no_scenario(queue: str, priority: int) -> str:
    return (
        f"No workload can be preempted: evicting the preemptible workloads of {queue} with a priority "
        f"lower than {priority} would not make room for the workload"
    )


def preempt_np_over_quota(queue: str) -> Reason:
    return Reason(PREEMPT_NOT_POSSIBLE, "preempt_np_over_quota", (queue,))


@_wording
def _w_preempt_np_over_quota(queue: str) -> str:
    return f"No workload can be preempted: a non-preemptible workload may not go above the quota of {queue}"


def consolidation_not_possible() -> Reason:
    return Reason(CONSOLIDATION_NOT_POSSIBLE, "consolidation_not_possible")


@_wording
def _w_consolidation_not_possible() -> str:
    return (
        "Resource consolidation cannot make room: running workloads cannot be moved to other nodes "
        "to free enough resources for the workload"
    )


def note(code: str, reason: Reason) -> Reason:
    """A job note as ``CycleResult.job_notes`` shows it: ``<code>: <text>``."""
    return Reason(code, "note", (code, reason))


@_wording
def _w_note(code: str, text: str) -> str:
    return f"{code}: {text}"


# ---- what blocks a pending job, as the eviction searches found it (``CycleResult.job_blockers``) --
# Structured for the portal's job page, never part of KAI's texts: the jobs a search could not take
# from because they are inside their minimum runtime (``protected_job``, with the seconds left), and
# the queues above their fair share it may take from (``reclaim_source``). The quota and limit
# refusals are the job's own fit errors (``over_limit``, ``non_preemptible_over_quota``).
PROTECTED_BY_MIN_RUNTIME = "ProtectedByMinRuntime"
RECLAIM_SOURCE = "ReclaimSource"


def protected_job(action: str, job: Ref, queue: str, seconds_left: float, surplus_only: bool) -> Reason:
    """A job ``action`` (reclaim or preempt) may not evict for ``seconds_left`` more seconds (its
    ``<action>_min_runtime``); ``surplus_only``: an elastic job, whose pods above its gang minimum
    may still be taken."""
    params: tuple[Param, ...] = (action, job, queue, seconds_left, surplus_only)
    return Reason(PROTECTED_BY_MIN_RUNTIME, "protected_job", params)


@_wording
def _w_protected_job(action: str, job: str, queue: str, seconds_left: float, surplus_only: bool) -> str:
    what = "its pods above its gang minimum may be taken, the rest are" if surplus_only else "it is"
    return (
        f"job {job} of queue {queue} could make room, but {what} protected from {action} by its "
        f"minimum runtime for another {go_duration(seconds_left)}"
    )


def reclaim_source(queue: str, used: Mapping[str, float], fair_share: Mapping[str, float]) -> Reason:
    """A queue that reclaim may take from for the job (above its fair share, or its quota)."""
    return Reason(RECLAIM_SOURCE, "reclaim_source", (queue, dict(used), dict(fair_share)))


@_wording
def _w_reclaim_source(queue: str, used: Mapping[str, float], fair_share: Mapping[str, float]) -> str:
    return (
        f"queue {queue} uses {_vector(used)} with a fair-share of {_vector(fair_share)}, "
        "so reclaim may take from it"
    )
