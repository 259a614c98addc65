"""Reclaim's eviction policy as declared rules (§3.7), each mirroring a KAI plugin callback.

Three kinds of rule, each listed once below:

* ``RECLAIMER_RULES``: may this job reclaim at all (KAI's proportion plugin,
  ``Reclaimable.CanReclaimResources``)? Checked resource by resource, rule by rule; the first
  that objects gives the job's note.
* Victim rules: from which queues (``may_reclaim_from``: ``Reclaimable.FilterVictim``) and which
  jobs (``reclaim_min_runtime``: the ``minruntime`` plugin's reclaim filter) it may take.
* ``SCENARIO_RULES``: does a simulated scenario keep every queue within bounds (KAI's
  ``Reclaimable.Reclaimable`` and the ``minruntime`` scenario validator)? All must hold.

Queues are judged where the reclaimer's and the victim's root paths part: Q* on the reclaimer's
side, V* on the victim's (``common.queues.diverging``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler import gang, reasons
from scheduler.actions.common.notes import Note
from scheduler.actions.common.queues import diverging
from scheduler.actions.solvers.scenario import Outcome
from scheduler.actions.solvers.victim_jobs import min_runtime_ok
from scheduler.model import RESOURCES, Job, Task, clean
from scheduler.ordering import allocatable_share
from scheduler.session import Session
from scheduler.state import EPS, QueueState

# ---- may this job reclaim at all -----------------------------------------------------------

ReclaimerRule = Callable[[QueueState, Job, dict[str, float], str], Note | None]


def over_fair_share(qs: QueueState, job: Job, j: dict[str, float], r: str) -> Note | None:
    """The reclaimer's queue would go over its fair share with the job: reclaim serves only
    queues below their fair share (KAI: ``CanReclaimResources``, allocated + request <= fair share)."""
    if clean(qs.allocated[r] + j[r]) > qs.fair_share[r] + EPS:
        msg = reasons.reclaim_over_fair_share(qs.name, qs.allocated, qs.fair_share, j)
        return reasons.RECLAIM_NOT_POSSIBLE, msg
    return None


def non_preemptible_over_quota(qs: QueueState, job: Job, j: dict[str, float], r: str) -> Note | None:
    """A non-preemptible reclaimer would put its queue's non-preemptible jobs over quota: what it
    takes could never be taken back (KAI: ``CanReclaimResources``, non-preemptible allocated +
    request <= deserved)."""
    if not job.is_preemptible and qs.quota(r) >= 0 and clean(qs.allocated_np[r] + j[r]) > qs.quota(r) + EPS:
        quota = {r: qs.quota(r) for r in RESOURCES}
        return reasons.RECLAIM_NOT_POSSIBLE, reasons.reclaim_np_over_quota(qs.name, quota, j)
    return None


RECLAIMER_RULES: tuple[ReclaimerRule, ...] = (over_fair_share, non_preemptible_over_quota)


def reclaimer_objection(session: Session, job: Job, j: dict[str, float]) -> Note | None:
    """The first objection of ``RECLAIMER_RULES``, resource by resource (None: it may reclaim)."""
    qs = session.queues[job.queue]
    for r in RESOURCES:
        for rule in RECLAIMER_RULES:
            note = rule(qs, job, j, r)
            if note is not None:
                return note
    return None


# ---- from whom -----------------------------------------------------------------------------


def as_of(qs: QueueState) -> Callable[[str], float]:
    """The queue's allocatable share per resource, as a threshold."""

    def share(r: str) -> float:
        return allocatable_share(qs, r)

    return share


def over(alloc: dict[str, float], threshold: Callable[[str], float]) -> bool:
    """Above the threshold in some resource that has one."""
    return any(threshold(r) >= 0 and alloc[r] > threshold(r) + EPS for r in RESOURCES)


def may_reclaim_from(session: Session, job_queue: str, leaf: str, j: dict[str, float]) -> bool:
    """Whether a reclaimer of ``job_queue`` asking ``j`` may take from victim leaf ``leaf``, judged
    at V* (KAI's ``Reclaimable.FilterVictim``). A reclaimer whose Q* would go over its quota
    reclaims fair share: V* must be above its allocatable share. One within quota may take from
    a V* over its quota in a resource the job asks for, or not under it in any."""
    q_star, v_star = diverging(session, job_queue, leaf)
    fair_share_reclaim = any(
        q_star.quota(r) >= 0 and clean(q_star.allocated[r] + j[r]) > q_star.quota(r) + EPS for r in RESOURCES
    )
    if fair_share_reclaim:
        return over(v_star.allocated, as_of(v_star))
    rs = [r for r in RESOURCES if j[r] > EPS and v_star.quota(r) >= 0]
    over_quota = any(v_star.allocated[r] > v_star.quota(r) + EPS for r in rs)
    under = any(v_star.allocated[r] < v_star.quota(r) - EPS for r in rs)
    return over_quota or not under


def reclaim_min_runtime(session: Session, reclaimer_queue: str, victim_queue: str) -> float:
    """The victim's minimum runtime against reclaim, method ``lca`` (KAI's ``minruntime``
    resolver): from one level below the lowest common ancestor toward the victim, then up."""
    _q, v_star = diverging(session, reclaimer_queue, victim_queue)
    for qs in session.ancestors(v_star.name):
        if qs.queue.reclaim_min_runtime_s is not None:
            return float(qs.queue.reclaim_min_runtime_s)
    return 0.0


# ---- does a scenario keep every queue within bounds ----------------------------------------


@dataclass
class ReclaimStep:
    """What the scenario rules read of one reclaimer's step, taken when its search starts:
    the request, every queue's allocation then, the saturation multiplier and the reclaimer's
    path. ``core`` maps each reclaimer to its victims whose gang core is protected."""

    session: Session
    job: Job
    request: dict[str, float]
    core: dict[str, set[str]]
    base: dict[str, dict[str, float]] = field(init=False)
    base_np: dict[str, dict[str, float]] = field(init=False)
    mult: float = field(init=False)
    path: list[QueueState] = field(init=False)
    chunk_charges: dict[str, dict[str, float]] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        session = self.session
        self.base = {name: dict(qs.allocated) for name, qs in session.queues.items()}
        self.base_np = {name: dict(qs.allocated_np) for name, qs in session.queues.items()}
        self.mult = max(1.0, session.config.saturation_multiplier(session.pool))
        self.path = session.ancestors(self.job.queue)

    def charges(self, chunk: list[Task]) -> dict[str, float]:
        """What the chunk's tasks were charged, each read once per step."""
        total = dict.fromkeys(RESOURCES, 0.0)
        for t in chunk:
            ch = self.chunk_charges.get(t.key)
            if ch is None:
                ch = dict(self.session.placements[t.key].charge)
                self.chunk_charges[t.key] = ch
            for r in RESOURCES:
                total[r] += ch.get(r, 0.0)
        return total


Chunks = list[tuple[Job, list[Task]]]
ScenarioRule = Callable[[ReclaimStep, Outcome, Chunks], bool]


def protected_victims_keep_their_core(step: ReclaimStep, outcome: Outcome, chunks: Chunks) -> bool:
    """A victim inside its minimum runtime loses only its elastic surplus (KAI's ``minruntime``
    reclaim scenario validator)."""
    return min_runtime_ok(step.session, outcome, step.core.get(step.job.key, set()))


def each_victim_queue_may_give(step: ReclaimStep, outcome: Outcome, chunks: Chunks) -> bool:
    """Chunk by chunk, V* is taken from only while it is still above its allocatable share
    (KAI's ``MaintainFairShareStrategy``) or, for a reclaimer whose Q* stays within quota, above
    its quota (``GuaranteeDeservedQuotaStrategy``)."""
    session, j, base = step.session, step.request, step.base
    remaining = {k: dict(v) for k, v in base.items()}
    for c_job, chunk in chunks:
        q_star, v_star = diverging(session, step.job.queue, c_job.queue)
        rem = remaining[v_star.name]
        maintain = over(rem, as_of(v_star))
        guarantee = all(
            q_star.quota(r) < 0 or clean(base[q_star.name][r] + j[r]) <= q_star.quota(r) + EPS
            for r in RESOURCES
        ) and over(rem, v_star.quota)
        if not (maintain or guarantee):
            return False
        ch = step.charges(chunk)
        for qs in session.ancestors(c_job.queue):
            for r in RESOURCES:
                remaining[qs.name][r] -= ch[r]
    return True


def _taken(step: ReclaimStep, chunks: Chunks) -> dict[str, dict[str, float]]:
    """What the chunks take from each queue on their victims' paths."""
    taken: dict[str, dict[str, float]] = {}
    for c_job, chunk in chunks:
        ch = step.charges(chunk)
        for qs in step.session.ancestors(c_job.queue):
            t = taken.setdefault(qs.name, dict.fromkeys(RESOURCES, 0.0))
            for r in RESOURCES:
                t[r] += ch[r]
    return taken


def reclaimer_ends_less_saturated(step: ReclaimStep, outcome: Outcome, chunks: Chunks) -> bool:
    """At every level of its path the reclaimer's queue, over its fair share after the step,
    never ends as saturated (times ``pool_saturation_multiplier``) as a sibling it took from
    (KAI's ``reclaimingQueuesRemainWithinBoundaries``, ``isFairShareSaturationLowerPerResource``)."""
    session, j, base = step.session, step.request, step.base
    taken = _taken(step, chunks)
    for x in step.path:
        tx = taken.get(x.name, dict.fromkeys(RESOURCES, 0.0))
        for s in _siblings(session, x):
            ts = taken.get(s.name)
            if not ts or all(v <= EPS for v in ts.values()):
                continue
            for r in RESOURCES:
                if j[r] <= EPS and ts[r] <= EPS:
                    continue
                ratio_x = _ratio(base[x.name][r] - tx[r] + j[r], x.fair_share[r])
                ratio_s = _ratio(base[s.name][r] - ts[r], s.fair_share[r])
                if ratio_x > 1 + EPS and s.fair_share[r] > EPS and ratio_x * step.mult >= ratio_s - EPS:
                    return False
    return True


def non_preemptible_reclaimer_within_quota(step: ReclaimStep, outcome: Outcome, chunks: Chunks) -> bool:
    """A non-preemptible reclaimer keeps every queue on its path within quota for its
    non-preemptible jobs (KAI's ``reclaimingQueuesRemainWithinBoundaries``, the non-preemptible part)."""
    if step.job.is_preemptible:
        return True
    j = step.request
    for x in step.path:
        for r in RESOURCES:
            if x.quota(r) >= 0 and clean(step.base_np[x.name][r] + j[r]) > x.quota(r) + EPS:
                return False
    return True


SCENARIO_RULES: tuple[ScenarioRule, ...] = (
    protected_victims_keep_their_core,
    each_victim_queue_may_give,
    reclaimer_ends_less_saturated,
    non_preemptible_reclaimer_within_quota,
)


def scenario_holds(step: ReclaimStep, outcome: Outcome) -> bool:
    """Whether every rule of ``SCENARIO_RULES`` holds for the simulated scenario."""
    chunks = reclaimed_chunks(step.session, outcome)
    return all(rule(step, outcome, chunks) for rule in SCENARIO_RULES)


def reclaimed_chunks(session: Session, outcome: Outcome) -> Chunks:
    """Reclaimed resources per victim job: each elastic surplus task alone, the gang core as one."""
    real = {t.key for t in outcome.victims}
    per_job: dict[str, list[Task]] = {}
    order: list[Job] = []
    for c in outcome.contributions:
        for t in c.tasks:
            if t.key in real:
                if c.job.key not in per_job:
                    order.append(c.job)
                per_job.setdefault(c.job.key, []).append(t)
    out: list[tuple[Job, list[Task]]] = []
    for job in order:
        tasks = per_job[job.key]
        if job.subgroups:
            # a task is surplus while the pods left keep the job and every sub-group satisfied
            left = gang.active_tasks(session, job) + tasks
            core: list[Task] = []
            for t in tasks:
                if not core and gang.surplus_task(job, left) is t:
                    out.append((job, [t]))
                    left = [x for x in left if x is not t]
                else:
                    core.append(t)
            if core:
                out.append((job, core))
            continue
        before = gang.active_allocated(session, job) + len(tasks)
        surplus = max(0, before - job.gang_min)
        for t in tasks[:surplus]:
            out.append((job, [t]))
        if tasks[surplus:]:
            out.append((job, tasks[surplus:]))
    return out


def _siblings(session: Session, qs: QueueState) -> list[QueueState]:
    parent = qs.queue.parent
    if parent and parent in session.queues:
        return [session.queues[c] for c in session.queues[parent].children if c != qs.name]
    return [
        q
        for q in session.queues.values()
        if q.name != qs.name and (not q.queue.parent or q.queue.parent not in session.queues)
    ]


def _ratio(alloc: float, fs: float) -> float:
    if fs <= EPS:
        return float("inf") if alloc > EPS else 0.0
    return alloc / fs
