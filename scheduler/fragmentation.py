"""The fragmentation-aware placement strategy (``fragmentation``, an option beside KAI's binpack
and spread): a node is scored by how much it lowers the expected GPU fragmentation of the
cluster, given the workload's distribution of requests. It is the score of the FGD policy
(Weng et al., "Beware of Fragmentation", USENIX ATC '23), read from its simulator
(hkust-adsl/kubernetes-scheduler-simulator, ``pkg/utils/frag.go`` and
``pkg/simulator/plugin/fgd_score.go``) and written here in the engine's terms.

Fragmentation of one node, for a workload whose requests ``r`` come with shares ``p(r)``
(summing to 1), is ``sum over r of p(r) * F(node, r)``, where ``F`` is the free GPU capacity
that request could not use:

* a request for no GPU: all free GPU capacity (a CPU-only pod uses none of it);
* a request the node cannot hold (too few devices with room, or not enough CPU): all of it;
* otherwise the free capacity of the devices with less room than the request asks per device.

A task's score on a node is ``sigmoid(F_before - F_after)`` (GPUs), in (0, 1): the node whose
fragmentation drops most (or grows least) wins. Unlike the simulator it is kept as a float, not
cut to an integer out of 100, so fewer nodes tie; ties go to the node name as elsewhere.

The placement tiers of ``placement.node_score`` that are not about resources stay: a node the
task fits now beats one it fits only once releasing pods leave, and a job's preferences weigh
above both. KAI's GPU-sharing tier (a node with a shared device first) is left out, as under
spread: the fragmentation score already decides where a fraction goes, and on which device
``fit`` chooses (binpack's device choice, the fullest shared device that has room).

Where the distribution comes from: ``Config.fragmentation_requests`` when given (the FGD
simulator's way: the whole trace's requests), else the tasks of the session (running and
pending), the most frequent request shapes that make up 95% of them, as the simulator
chooses its "typical pods"."""

from __future__ import annotations

import math
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scheduler.fit import AMOUNT_EPS, Fit, Rules, node_fit
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import EPS, NodeState, opens_group

FRAGMENTATION = "fragmentation"
# The simulator's typical pods: the most frequent request shapes, up to 95% of all pods.
POPULARITY = 0.95
# Score tier of a node the task fits now (not only once releasing pods leave), as in node_score.
NOW_TIER = 1_000.0
# Among nodes of one fragmentation level, the fullest first (binpack): for a fraction or a CPU-only
# task free CPU weighs as this many millicores per free GPU (a tiebreak; whole-GPU tasks use the
# pool's own CPU per GPU, ``pool_cpu_per_gpu``).
CPU_PER_GPU = 100_000.0


@dataclass(frozen=True, slots=True)
class Request:
    """One request shape of the workload: ``gpu`` is a fraction of one device (< 1), a whole
    device count (>= 1) or 0; ``share`` its part of the workload (the shares sum to 1)."""

    gpu: float
    cpu_millis: float
    memory_mib: float
    share: float


def typical_requests(
    shapes: Iterable[tuple[float, float, float]], popularity: float = POPULARITY
) -> tuple[Request, ...]:
    """The most frequent (gpu, cpu_millis) shapes that make up ``popularity`` of ``shapes``, with
    their shares renormalised to 1; among equally frequent shapes the larger first (the
    simulator's order)."""
    counts: dict[tuple[float, float, float], int] = {}
    for shape in shapes:
        counts[shape] = counts.get(shape, 0) + 1
    total = sum(counts.values())
    if not total:
        return ()
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], kv[0][1], *_per_device(kv[0][0])), reverse=True)
    kept: list[tuple[tuple[float, float, float], int]] = []
    covered = 0
    for shape, n in ranked:
        if covered >= popularity * total:
            break
        kept.append((shape, n))
        covered += n
    return tuple(Request(gpu, cpu, mem, n / covered) for (gpu, cpu, mem), n in kept)


def _per_device(gpu: float) -> tuple[float, int]:
    """(share of each device, device count) of a request: 0.3 -> (0.3, 1), 2 -> (1.0, 2)."""
    if gpu <= 0:
        return 0.0, 0
    return (gpu, 1) if gpu < 1 else (1.0, int(gpu))


def task_shape(task: Task) -> tuple[float, float, float]:
    """A task's (gpu, cpu_millis) in ``Request`` terms; a GPU-memory request counts as one device
    share (its fraction depends on the node, which a workload shape does not know)."""
    gpu = task.gpu if task.gpu > 0 else (1.0 if task.gpu_memory_mib > 0 else 0.0)
    return (gpu, task.cpu_millis, task.memory_mib)


# A node's free resources as fragmentation sees them: each device's free part (0..1, sorted) and
# the free CPU (idle or releasing, as ``fit`` counts them).
NodeFree = tuple[tuple[float, ...], float, float]


def fragmentation(free: NodeFree, requests: Sequence[Request]) -> float:
    """Expected free GPU capacity (in devices) that the workload's next request could not use."""
    lefts, cpu_left, mem_left = free
    total = sum(lefts)
    if total <= EPS:
        return 0.0
    frag = 0.0
    for r in requests:
        if r.gpu <= 0:
            frag += r.share * total
            continue
        need, count = _per_device(r.gpu)
        roomy = sum(1 for x in lefts if x >= need - EPS)
        if roomy < count or cpu_left < r.cpu_millis - EPS or mem_left < r.memory_mib - EPS:
            frag += r.share * total
        else:
            frag += r.share * sum(x for x in lefts if x < need - EPS)
    return frag


def node_free(ns: NodeState) -> NodeFree:
    lefts = tuple(
        sorted(round((d.memory - d.active) / d.memory, 6) if d.memory > 0 else 0.0 for d in ns.devices)
    )
    return lefts, ns.cpu_idle + ns.cpu_rel, ns.mem_idle + ns.mem_rel


def free_after(session: Session, ns: NodeState, task: Task, fit: Fit) -> NodeFree:
    """The node's free resources once the task sits where ``fit`` puts it."""
    lefts = [round((d.memory - d.active) / d.memory, 6) if d.memory > 0 else 0.0 for d in ns.devices]
    if task.whole_gpus:
        for i in fit.devices:
            lefts[i] = 0.0
    elif task.is_fractional:
        for i in fit.devices:
            d = ns.devices[i]
            lefts[i] = round(lefts[i] - session.device_need(task, d.memory) / d.memory, 6)
    cpu_left = ns.cpu_idle + ns.cpu_rel - task.cpu_millis
    return tuple(sorted(lefts)), cpu_left, ns.mem_idle + ns.mem_rel - task.memory_mib


def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@dataclass
class _Cache:
    """Per session: the workload's requests, fragmentation by node state, and per task shape the
    score of every node (None: does not fit) as of a node version."""

    requests: tuple[Request, ...]
    cpu_per_gpu: float  # the pool's, for whole-GPU tasks (``resource_score``)
    frag: dict[NodeFree, float] = field(default_factory=dict)
    shapes: dict[tuple[object, ...], tuple[int, dict[str, tuple[float, Fit] | None]]] = field(
        default_factory=dict
    )

    def of(self, free: NodeFree) -> float:
        v = self.frag.get(free)
        if v is None:
            v = self.frag[free] = fragmentation(free, self.requests)
        return v


_caches: weakref.WeakKeyDictionary[Session, _Cache] = weakref.WeakKeyDictionary()


def _cache(session: Session) -> _Cache:
    c = _caches.get(session)
    if c is None:
        given = session.config.fragmentation_requests
        if given is not None:
            total = sum(r[-1] for r in given) or 1.0
            requests = tuple(Request(g, cpu, mem, w / total) for g, cpu, mem, w in given)
        else:
            requests = typical_requests(task_shape(t) for job in session.jobs.values() for t in job.tasks)
        c = _caches[session] = _Cache(requests, pool_cpu_per_gpu(session))
    return c


def pool_cpu_per_gpu(session: Session) -> float:
    """The pool's CPU per GPU (millicores), the rate at which a whole-GPU task's fullness counts
    free CPU; a pool without GPUs or CPU falls back to ``CPU_PER_GPU``."""
    gpus = sum(ns.node.gpus for ns in session.nodes.values())
    cpu = sum(ns.node.cpu_millis for ns in session.nodes.values())
    return cpu / gpus if gpus > 0 and cpu > 0 else CPU_PER_GPU


def applies(session: Session, task: Task) -> bool:
    """Whether the task is placed by fragmentation (its kind's strategy is ``fragmentation``)."""
    return session.config.strategy(task.needs_gpu) == FRAGMENTATION


def resource_score(session: Session, ns: NodeState, task: Task, fit: Fit) -> tuple[float, Fit]:
    """The task's score on a node it fits, and the fit to place it with: for a fraction of one
    device, the device whose choice lowers fragmentation most (the simulator's choice), else
    ``fit`` as ``node_fit`` made it.

    The score: the fits-now tier, then the simulator's level ``floor(100 * sigmoid(drop))``,
    then, within a level, the fuller node first (binpack; below 1, so it never crosses a level).
    Binpack within a level is where this beats the simulator, which draws one of the tied nodes
    at random: on the openb trace it keeps whole nodes free for large requests.

    How full a node is (free GPUs plus free CPU in GPUs) depends on what the task takes: whole
    devices come with the CPU to run on them, so for a whole-GPU task free CPU counts at the
    pool's own rate (its cores per GPU) and a node whose CPU is nearly gone is nearly full,
    whatever devices it has left; for a fraction or a CPU-only task the free GPU decides (a
    fraction shares a device, a CPU-only task can only strand GPUs) and CPU only breaks ties
    (``CPU_PER_GPU``)."""
    c = _cache(session)
    free = node_free(ns)
    before = c.of(free)
    best_fit = fit
    best_after = c.of(free_after(session, ns, task, fit))
    if task.is_fractional and task.fraction_device_count == 1:
        for other in _device_fits(session, ns, task):
            if other.devices == fit.devices:
                continue
            after = c.of(free_after(session, ns, task, other))
            if after < best_after or (after == best_after and other.now and not best_fit.now):
                best_fit, best_after = other, after
    level = math.floor(100 * sigmoid(before - best_after))
    lefts, cpu_left, _ = free
    per_gpu = c.cpu_per_gpu if task.whole_gpus else CPU_PER_GPU
    fullness = 1.0 / (2.0 + (sum(lefts) + cpu_left / per_gpu))
    return (NOW_TIER if best_fit.now else 0.0) + level + fullness, best_fit


def _device_fits(session: Session, ns: NodeState, task: Task) -> Iterable[Fit]:
    """Every device a fraction of one device could take on a node it fits (``fit``'s rules: room
    now or once releasing tasks leave, a pod slot for a new group's reservation pod)."""
    need = session.device_need(task, ns.node.gpu_memory_mib)
    rest_now = ns.cpu_idle >= task.cpu_millis - AMOUNT_EPS and ns.mem_idle >= task.memory_mib - AMOUNT_EPS
    for d in ns.devices:
        if need > d.memory + EPS or d.memory - d.active < need - EPS:
            continue
        opens = opens_group(d)
        if ns.pods_idle + ns.pods_rel < 1 + (1 if d.is_free else 0):
            continue
        now = (
            rest_now
            and d.memory - d.active - d.releasing >= need - EPS
            and ns.pods_idle >= 1 + (1 if opens else 0)
        )
        yield Fit(True, now=now, devices=(d.index,), shares_group=d.is_group)


def best(session: Session, task: Task, selector: Rules) -> tuple[NodeState, Fit] | None:
    """The best node of the whole pool for a task without scored rules (the first of
    ``placement.score_nodes`` under fragmentation): each node's score is kept per task shape and
    recomputed only for the nodes changed since (``Session.node_log``)."""
    c = _cache(session)
    key: tuple[object, ...] = (
        task.gpu,
        task.gpu_memory_mib,
        task.gpu_fraction_devices,
        task.cpu_millis,
        task.memory_mib,
    )
    if isinstance(selector, Job):
        if selector.node_selector:
            key = (*key, *sorted(selector.node_selector.items()))
    elif selector:
        key = (*key, *sorted(selector.items()))
    hit = c.shapes.get(key)
    if hit is None:
        changed: Iterable[str] = session.nodes
        scores: dict[str, tuple[float, Fit] | None] = {}
    else:
        version, scores = hit
        changed = set(session.node_log[version:]) if version != session.node_version else ()
    for name in changed:
        ns = session.nodes[name]
        fit = node_fit(session, ns, task, selector)
        scores[name] = resource_score(session, ns, task, fit) if fit.ok else None
    c.shapes[key] = (session.node_version, scores)
    found: tuple[float, str, Fit] | None = None
    for name, s in scores.items():
        if s is not None and (found is None or s[0] > found[0] or (s[0] == found[0] and name < found[1])):
            found = (s[0], name, s[1])
    if found is None:
        return None
    return session.nodes[found[1]], found[2]
