"""Proofs that reclaim cannot help a job, before any scenario is simulated: the most GPUs the
victim queues may give under ``each_victim_queue_may_give`` (``max_gain``), and the same bound
from per-leaf sums without listing the victim jobs (``quick_screen``, :mod:`.victim_sums`).

KAI has no such bound (it simulates); it is exact: a job it screens out has no scenario that
the rules would accept (held against the job-by-job screen in tests/engine/test_victim_sums.py).
"""

from __future__ import annotations

from scheduler.actions.common.free_gpus import free_gpus
from scheduler.actions.common.queues import diverging, request_of
from scheduler.actions.reclaim.rules import may_reclaim_from, reclaim_min_runtime
from scheduler.actions.reclaim.victim_sums import job_position, leaf_victims
from scheduler.actions.solvers.free_capacity import need_gpu
from scheduler.actions.solvers.scenario import Contribution
from scheduler.model import RESOURCES, Job, Task, clean
from scheduler.ordering import allocatable_share
from scheduler.session import Session
from scheduler.state import EPS, QueueState


def max_gain(session: Session, job: Job, tasks: list[Task], stream: list[Contribution]) -> float:
    """Most GPUs the victim queues may give: a chunk is taken only while its queue V* is still
    above its allocatable share (or quota), so V* gives less than its excess plus one chunk."""
    j = request_of(session, tasks)
    per_v: dict[str, tuple[QueueState, float, float]] = {}
    v_stars: dict[str, QueueState] = {}  # per victim leaf queue
    for c in stream:
        v_star = v_stars.get(c.job.queue)
        if v_star is None:
            v_star = v_stars[c.job.queue] = diverging(session, job.queue, c.job.queue)[1]
        g = sum(session.placements[t.key].charge.get("gpu", 0.0) for t in c.tasks)
        vs, total, biggest = per_v.get(v_star.name, (v_star, 0.0, 0.0))
        per_v[v_star.name] = (vs, total + g, max(biggest, g))
    gain = 0.0
    for v_star, total, biggest in per_v.values():
        q_star, _v = diverging(
            session,
            job.queue,
            next(c.job.queue for c in stream if v_star in session.ancestors(c.job.queue)),
        )
        gain = add_gain(gain, q_star, v_star, j, total, biggest)
    return gain


def quick_screen(session: Session, job: Job, tasks: list[Task]) -> str | None:
    """The screen's verdict from per-leaf sums (``victim_sums``), without listing the victim
    jobs: "no_victims" or "no_scenario" exactly when the reclaim candidates, ``victim_chunks`` and
    ``max_gain`` would say so; None when it cannot tell that cheaply (the job then goes
    through them): sums not exact, a minimum runtime that could protect a victim, or usable
    nodes that are not simply the schedulable ones."""
    j = request_of(session, tasks)
    # Per V*: its q*, GPUs of all chunks, the largest, where its first victim job stands.
    per_v: dict[str, tuple[QueueState, QueueState, float, float, list[str | None]]] = {}
    for leaf, qs in session.queues.items():
        if not qs.is_leaf or leaf == job.queue:
            continue
        sums = leaf_victims(session, leaf)
        if sums is None:
            return None
        if not sums.jobs or not may_reclaim_from(session, job.queue, leaf, j):
            continue
        if sums.started and reclaim_min_runtime(session, job.queue, leaf) > 0:
            return None
        q_star, v_star = diverging(session, job.queue, leaf)
        had = per_v.get(v_star.name)
        if had is None:
            per_v[v_star.name] = (q_star, v_star, sums.gpu, sums.biggest, [sums.first])
        else:
            had[4].append(sums.first)
            # exact: sums of quarters
            per_v[v_star.name] = (q_star, v_star, had[2] + sums.gpu, max(had[3], sums.biggest), had[4])
    if not per_v:
        return "no_victims"
    if job.node_selector or job.node_affinity or session.hard_taints:
        return None  # the usable nodes are not simply the schedulable ones
    terms = list(per_v.values())
    if len(terms) > 1:
        # ``max_gain`` adds the V*s in the order their first victim job comes in.
        terms.sort(key=lambda e: min(job_position(session, name) for name in e[4] if name))
    gain = 0.0
    for q_star, v_star, total, biggest, _first in terms:
        gain = add_gain(gain, q_star, v_star, j, total, biggest)
    # ``FreeTracker``'s free GPUs over every schedulable node: the same additions in the same
    # order as ``free_gpus_scan`` (which only skips adding 0.0).
    if free_gpus(session) + gain + EPS < need_gpu(session, tasks):
        return "no_scenario"
    return None


def add_gain(
    gain: float, q_star: QueueState, v_star: QueueState, j: dict[str, float], total: float, biggest: float
) -> float:
    """``gain`` plus what V* may give at most: a chunk is taken only while V* is still above its
    allocatable share (or quota), so it gives less than its excess plus one chunk."""
    guarantee = all(
        q_star.quota(r) < 0 or clean(q_star.allocated[r] + j[r]) <= q_star.quota(r) + EPS for r in RESOURCES
    )

    def threshold(r: str) -> float:
        a_s = allocatable_share(v_star, r)
        if guarantee and v_star.quota(r) >= 0:
            return v_star.quota(r) if a_s < 0 else min(a_s, v_star.quota(r))
        return a_s

    if any(threshold(r) >= 0 and v_star.allocated[r] > threshold(r) + EPS for r in ("cpu", "memory")):
        return gain + total  # over in another resource: GPUs are not bounded by this rule
    t = threshold("gpu")
    if t < 0:
        return gain
    excess = v_star.allocated["gpu"] - t
    if excess <= EPS:
        return gain
    return gain + min(total, excess - 0.01 + biggest)
