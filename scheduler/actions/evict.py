"""The eviction actions: consolidation (§3.6), reclaim (§3.7), preempt (§3.8) and stale gang
eviction (§3.10). The victim search they share lives in :mod:`scheduler.actions.victims`."""

from __future__ import annotations

from collections.abc import Callable

from scheduler import gang, reasons
from scheduler.actions.victim_sums import job_position, leaf_victims, need_gpu
from scheduler.actions.victims import Contribution, Note, Outcome, active_tasks, run_action, spend
from scheduler.model import RESOURCES, Job, Task, TaskState, clean
from scheduler.ordering import allocatable_share
from scheduler.result import Eviction
from scheduler.session import EPS, QueueState, Session

Validator = Callable[[Outcome], bool]


def _request(session: Session, tasks: list[Task]) -> dict[str, float]:
    total = dict.fromkeys(RESOURCES, 0.0)
    for t in tasks:
        for r, v in session.pending_request(t).items():
            total[r] = clean(total[r] + v)
    return total


def _charges(session: Session, tasks: list[Task]) -> dict[str, float]:
    total = dict.fromkeys(RESOURCES, 0.0)
    for t in tasks:
        for r, v in session.placements[t.name].charge.items():
            total[r] = clean(total[r] + v)
    return total


def _diverging(session: Session, a: str, b: str) -> tuple[QueueState, QueueState]:
    """The two queues where the root paths of leaf queues ``a`` and ``b`` part."""
    pa = list(reversed(session.ancestors(a)))
    pb = list(reversed(session.ancestors(b)))
    for x, y in zip(pa, pb, strict=False):
        if x.name != y.name:
            return x, y
    return pa[-1], pb[-1]


def is_elastic(job: Job) -> bool:
    return len(job.tasks) > job.gang_min


def protected(job: Job, min_runtime: float) -> bool:
    """Inside its minimum guaranteed runtime (§5.3); jobs without a start time are not."""
    return job.last_start_s is not None and min_runtime > 0 and job.last_start_s < min_runtime


def preempt_min_runtime(session: Session, victim_queue: str) -> float:
    for qs in session.ancestors(victim_queue):
        if qs.queue.preempt_min_runtime_s is not None:
            return float(qs.queue.preempt_min_runtime_s)
    return 0.0


def reclaim_min_runtime(session: Session, reclaimer_queue: str, victim_queue: str) -> float:
    """Method ``lca``: one level below the lowest common ancestor toward the victim, then up."""
    _q, v_star = _diverging(session, reclaimer_queue, victim_queue)
    for qs in session.ancestors(v_star.name):
        if qs.queue.reclaim_min_runtime_s is not None:
            return float(qs.queue.reclaim_min_runtime_s)
    return 0.0


def _min_runtime_ok(session: Session, outcome: Outcome, core_protected: set[str]) -> bool:
    """A protected elastic job may lose only its surplus."""
    for c in outcome.contributions:
        if c.job.name in core_protected and not gang.gang_satisfied(session, c.job):
            return False
    return True


def _split_candidates(
    session: Session, jobs: list[Job], min_runtime: Callable[[Job], float]
) -> tuple[list[Job], set[str]]:
    out: list[Job] = []
    core_protected: set[str] = set()
    for v in jobs:
        if protected(v, min_runtime(v)):
            if not is_elastic(v):
                continue
            core_protected.add(v.name)
        out.append(v)
    return out, core_protected


def _victim_jobs(
    session: Session, preemptor: Job, queue: str | None = None, below: int | None = None
) -> list[Job]:
    """Preemptible jobs with active tasks in leaf queues, in job order; only ``queue``'s jobs and
    only priorities below ``below`` when given (checked first: they are the cheap filters)."""
    jobs = session.jobs.values() if queue is None else session.jobs_of_queue(queue)
    spend(session, len(jobs))  # the list is a scan of them: work for the action's budget
    return [
        v
        for v in jobs
        if (below is None or v.priority < below)
        and v is not preemptor
        and v.is_preemptible
        and v.queue in session.queues
        and session.queues[v.queue].is_leaf
        and active_tasks(session, v)
    ]


# ---- reclaim ------------------------------------------------------------------------------


def _as_of(qs: QueueState) -> Callable[[str], float]:
    def share(r: str) -> float:
        return allocatable_share(qs, r)

    return share


def _over(alloc: dict[str, float], threshold: Callable[[str], float]) -> bool:
    return any(threshold(r) >= 0 and alloc[r] > threshold(r) + EPS for r in RESOURCES)


def reclaim(session: Session) -> None:
    core: dict[str, set[str]] = {}

    def preemptor_ok(job: Job, tasks: list[Task]) -> bool | Note:
        qs = session.queues[job.queue]
        j = _request(session, tasks)
        for r in RESOURCES:
            if clean(qs.allocated[r] + j[r]) > qs.fair_share[r] + EPS:
                msg = reasons.reclaim_over_fair_share(qs.name, qs.allocated, qs.fair_share, j)
                return reasons.RECLAIM_NOT_POSSIBLE, msg
            if (
                not job.is_preemptible
                and qs.quota(r) >= 0
                and clean(qs.allocated_np[r] + j[r]) > qs.quota(r) + EPS
            ):
                quota = {r: qs.quota(r) for r in RESOURCES}
                return reasons.RECLAIM_NOT_POSSIBLE, reasons.reclaim_np_over_quota(qs.name, quota, j)
        return True

    def explain(job: Job, kind: str) -> Note:
        if kind == "no_victims":
            return reasons.RECLAIM_NOT_POSSIBLE, reasons.reclaim_no_victims(job.queue)
        return reasons.RECLAIM_NOT_POSSIBLE, reasons.reclaim_no_scenario(job.queue)

    def candidates(job: Job, tasks: list[Task]) -> tuple[list[Job], set[str]]:
        j = _request(session, tasks)
        allowed: dict[str, bool] = {}
        jobs = []
        for v in _victim_jobs(session, job):
            if v.queue == job.queue:
                continue
            if v.queue not in allowed:
                allowed[v.queue] = _reclaimable(session, job.queue, v.queue, j)
            if allowed[v.queue]:
                jobs.append(v)
        runtimes: dict[str, float] = {}  # per victim queue: the rule depends on the queues only

        def min_runtime(v: Job) -> float:
            if v.queue not in runtimes:
                runtimes[v.queue] = reclaim_min_runtime(session, job.queue, v.queue)
            return runtimes[v.queue]

        out, prot = _split_candidates(session, jobs, min_runtime)
        core[job.name] = prot
        return out, prot

    def make_validator(job: Job, tasks: list[Task]) -> Validator:
        j = _request(session, tasks)
        base = {name: dict(qs.allocated) for name, qs in session.queues.items()}
        base_np = {name: dict(qs.allocated_np) for name, qs in session.queues.items()}
        mult = max(1.0, session.config.saturation_multiplier(session.pool))
        path = session.ancestors(job.queue)

        def validate(outcome: Outcome) -> bool:
            if not _min_runtime_ok(session, outcome, core.get(job.name, set())):
                return False
            taken: dict[str, dict[str, float]] = {}
            remaining = {k: dict(v) for k, v in base.items()}
            # 1-2: chunks per victim job, each judged against its diverging queue V*.
            for c_job, chunk in _chunks(session, outcome):
                q_star, v_star = _diverging(session, job.queue, c_job.queue)
                rem = remaining[v_star.name]
                maintain = _over(rem, _as_of(v_star))
                guarantee = all(
                    q_star.quota(r) < 0 or clean(base[q_star.name][r] + j[r]) <= q_star.quota(r) + EPS
                    for r in RESOURCES
                ) and _over(rem, v_star.quota)
                if not (maintain or guarantee):
                    return False
                ch = _charges_static(chunk)
                for qs in session.ancestors(c_job.queue):
                    t = taken.setdefault(qs.name, dict.fromkeys(RESOURCES, 0.0))
                    for r in RESOURCES:
                        remaining[qs.name][r] -= ch[r]
                        t[r] += ch[r]
            # 3: the reclaimer never ends more saturated than a queue it took from.
            for x in path:
                siblings = _siblings(session, x)
                tx = taken.get(x.name, dict.fromkeys(RESOURCES, 0.0))
                for s in siblings:
                    ts = taken.get(s.name)
                    if not ts or all(v <= EPS for v in ts.values()):
                        continue
                    for r in RESOURCES:
                        if j[r] <= EPS and ts[r] <= EPS:
                            continue
                        ratio_x = _ratio(base[x.name][r] - tx[r] + j[r], x.fair_share[r])
                        ratio_s = _ratio(base[s.name][r] - ts[r], s.fair_share[r])
                        if ratio_x > 1 + EPS and s.fair_share[r] > EPS and ratio_x * mult >= ratio_s - EPS:
                            return False
                if not job.is_preemptible:
                    for r in RESOURCES:
                        if x.quota(r) >= 0 and clean(base_np[x.name][r] + j[r]) > x.quota(r) + EPS:
                            return False
            return True

        chunk_charges: dict[str, dict[str, float]] = {}

        def _charges_static(chunk: list[Task]) -> dict[str, float]:
            total = dict.fromkeys(RESOURCES, 0.0)
            for t in chunk:
                ch = chunk_charges.get(t.name)
                if ch is None:
                    ch = dict(session.placements[t.name].charge)
                    chunk_charges[t.name] = ch
                for r in RESOURCES:
                    total[r] += ch.get(r, 0.0)
            return total

        return validate

    # A queue's usage line by (queue, allocation, fair-share dict): the victims of one scenario
    # are described in one state, mostly from a few queues.
    usage_lines: dict[tuple[str, tuple[float, ...]], tuple[object, str]] = {}

    def usage_line(q: QueueState) -> str:
        key = (q.name, tuple(q.allocated.values()))
        hit = usage_lines.get(key)
        if hit is not None and hit[0] is q.fair_share:
            return hit[1]
        line = reasons.queue_usage_line(
            q.name, q.allocated, {r: q.quota(r) for r in RESOURCES}, q.fair_share, q.queue.priority
        )
        usage_lines[key] = (q.fair_share, line)
        return line

    def describe(job: Job, t: Task, outcome: Outcome) -> tuple[str, str]:
        vjob = session.task_job[t.name]
        vq, rq = session.queues[vjob.queue], session.queues[job.queue]
        if vq.queue.parent != rq.queue.parent:
            vq, rq = _diverging(session, vjob.queue, job.queue)
        lines = [usage_line(q) for q in (vq, rq)]
        msg = reasons.evicted_by_reclaim(vjob.namespace, t.name, job.namespace, job.name, lines)
        why = (
            f"queue {vjob.queue} is above its fair share and job {vjob.name} (priority {vjob.priority}) "
            f"comes first in victim order; {job.queue} is below its fair share"
        )
        return msg, why

    def max_gain(job: Job, tasks: list[Task], stream: list[Contribution]) -> float:
        """Most GPUs the victim queues may give: a chunk is taken only while its queue V* is still
        above its allocatable share (or quota), so V* gives less than its excess plus one chunk."""
        j = _request(session, tasks)
        per_v: dict[str, tuple[QueueState, float, float]] = {}
        v_stars: dict[str, QueueState] = {}  # per victim leaf queue
        for c in stream:
            v_star = v_stars.get(c.job.queue)
            if v_star is None:
                v_star = v_stars[c.job.queue] = _diverging(session, job.queue, c.job.queue)[1]
            g = sum(session.placements[t.name].charge.get("gpu", 0.0) for t in c.tasks)
            vs, total, biggest = per_v.get(v_star.name, (v_star, 0.0, 0.0))
            per_v[v_star.name] = (vs, total + g, max(biggest, g))
        gain = 0.0
        for v_star, total, biggest in per_v.values():
            q_star, _v = _diverging(
                session,
                job.queue,
                next(c.job.queue for c in stream if v_star in session.ancestors(c.job.queue)),
            )
            gain = _add_gain(gain, q_star, v_star, j, total, biggest)
        return gain

    def quick_screen(job: Job, tasks: list[Task]) -> str | None:
        """The screen's verdict from per-leaf sums (``victim_sums``), without listing the victim
        jobs: "no_victims" or "no_scenario" exactly when ``candidates``, ``victim_chunks`` and
        ``max_gain`` would say so; None when it cannot tell that cheaply (the job then goes
        through them): sums not exact, a minimum runtime that could protect a victim, or usable
        nodes that are not simply the schedulable ones."""
        j = _request(session, tasks)
        # Per V*: its q*, GPUs of all chunks, the largest, where its first victim job stands.
        per_v: dict[str, tuple[QueueState, QueueState, float, float, list[str | None]]] = {}
        for leaf, qs in session.queues.items():
            if not qs.is_leaf or leaf == job.queue:
                continue
            sums = leaf_victims(session, leaf)
            if sums is None:
                return None
            if not sums.jobs or not _reclaimable(session, job.queue, leaf, j):
                continue
            if sums.started and reclaim_min_runtime(session, job.queue, leaf) > 0:
                return None
            q_star, v_star = _diverging(session, job.queue, leaf)
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
            gain = _add_gain(gain, q_star, v_star, j, total, biggest)
        # ``FreeTracker``'s free GPUs over every schedulable node: the same additions in the same
        # order as ``_free_gpus_scan`` (which only skips adding 0.0).
        if _free_gpus(session) + gain + EPS < need_gpu(session, tasks):
            return "no_scenario"
        return None

    run_action(
        session,
        "reclaim",
        preemptor_ok,
        candidates,
        make_validator,
        describe,
        max_gain,
        explain,
        quick_screen=quick_screen if QUICK_SCREEN else None,
    )


# Reclaim's screen from per-leaf sums first (tests switch it off to compare with the job-by-job
# screen).
QUICK_SCREEN = True


def _reclaimable(session: Session, job_queue: str, leaf: str, j: dict[str, float]) -> bool:
    """Whether a reclaimer of ``job_queue`` asking ``j`` may take from victim leaf ``leaf``
    (judged at V*, the victim side's queue where their paths part)."""
    q_star, v_star = _diverging(session, job_queue, leaf)
    fair_share_reclaim = any(
        q_star.quota(r) >= 0 and clean(q_star.allocated[r] + j[r]) > q_star.quota(r) + EPS for r in RESOURCES
    )
    if fair_share_reclaim:
        return _over(v_star.allocated, _as_of(v_star))
    rs = [r for r in RESOURCES if j[r] > EPS and v_star.quota(r) >= 0]
    over = any(v_star.allocated[r] > v_star.quota(r) + EPS for r in rs)
    under = any(v_star.allocated[r] < v_star.quota(r) - EPS for r in rs)
    return over or not under


def _add_gain(
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


def _chunks(session: Session, outcome: Outcome) -> list[tuple[Job, list[Task]]]:
    """Reclaimed resources per victim job: each elastic surplus task alone, the gang core as one."""
    real = {t.name for t in outcome.victims}
    per_job: dict[str, list[Task]] = {}
    order: list[Job] = []
    for c in outcome.contributions:
        for t in c.tasks:
            if t.name in real:
                if c.job.name not in per_job:
                    order.append(c.job)
                per_job.setdefault(c.job.name, []).append(t)
    out: list[tuple[Job, list[Task]]] = []
    for job in order:
        tasks = per_job[job.name]
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


# ---- preempt ------------------------------------------------------------------------------


def preempt(session: Session) -> None:
    core: dict[str, set[str]] = {}

    def preemptor_ok(job: Job, tasks: list[Task]) -> bool | Note:
        if job.is_preemptible:
            return True
        j = _request(session, tasks)
        for qs in session.ancestors(job.queue):
            for r in RESOURCES:
                if j[r] > EPS and qs.quota(r) >= 0 and clean(qs.allocated_np[r] + j[r]) > qs.quota(r) + EPS:
                    return reasons.PREEMPT_NOT_POSSIBLE, reasons.preempt_np_over_quota(qs.name)
        return True

    def explain(job: Job, kind: str) -> Note:
        if kind == "no_victims":
            return reasons.PREEMPT_NOT_POSSIBLE, reasons.preempt_no_victims(job.queue, job.priority)
        return reasons.PREEMPT_NOT_POSSIBLE, reasons.preempt_no_scenario(job.queue, job.priority)

    def candidates(job: Job, tasks: list[Task]) -> tuple[list[Job], set[str]]:
        jobs = _victim_jobs(session, job, job.queue, job.priority)
        out, prot = _split_candidates(session, jobs, lambda v: preempt_min_runtime(session, v.queue))
        core[job.name] = prot
        return out, prot

    def make_validator(job: Job, tasks: list[Task]) -> Validator:
        return lambda outcome: _min_runtime_ok(session, outcome, core.get(job.name, set()))

    def describe(job: Job, t: Task, outcome: Outcome) -> tuple[str, str]:
        vjob = session.task_job[t.name]
        msg = reasons.evicted_by_preempt(vjob.namespace, t.name, job.namespace, job.name)
        why = f"priority {vjob.priority} is below {job.priority} of {job.name} in queue {job.queue}"
        return msg, why

    run_action(session, "preempt", preemptor_ok, candidates, make_validator, describe, explain=explain)


# ---- consolidation --------------------------------------------------------------------------


def _free_gpus(session: Session) -> float:
    cached = session.free_gpus_cache
    if cached is not None and cached[0] == session.node_version:
        return cached[1]
    free = _free_gpus_scan(session)
    session.free_gpus_cache = (session.node_version, free)
    return free


def _free_gpus_scan(session: Session) -> float:
    free = 0.0
    for ns in session.nodes.values():
        if not ns.schedulable:
            continue
        for d in ns.devices:
            if d.memory > 0:
                free += max(0.0, d.memory - d.active) / d.memory
    return free


def consolidation(session: Session) -> None:
    # KAI disables consolidation when the GPU or the CPU strategy is spread (§3.2)
    if session.config.any_spread or session.config.max_consolidation_preemptees <= 0:
        return

    def explain(job: Job, kind: str) -> Note | None:
        if kind == "no_scenario":
            return reasons.CONSOLIDATION_NOT_POSSIBLE, reasons.consolidation_not_possible()
        return None

    def preemptor_ok(job: Job, tasks: list[Task]) -> bool | Note:
        if not job.is_preemptible:
            return False
        need = sum(session.pending_request(t, for_limit=True)["gpu"] for t in tasks)
        return _free_gpus(session) + EPS >= need

    def candidates(job: Job, tasks: list[Task]) -> tuple[list[Job], set[str]]:
        return _victim_jobs(session, job), set()

    def make_validator(job: Job, tasks: list[Task]) -> Validator:
        limit = session.config.max_consolidation_preemptees + 1

        def validate(outcome: Outcome) -> bool:
            if outcome.victims:
                return False  # every evicted task must be re-placed
            return len({session.task_job[t.name].name for t in outcome.moved}) <= limit

        return validate

    def describe(job: Job, t: Task, outcome: Outcome) -> tuple[str, str]:
        vjob = session.task_job[t.name]
        msg = reasons.evicted_by_consolidation(vjob.namespace, t.name)
        return msg, f"moved to make room for {job.name}; it keeps running elsewhere"

    run_action(
        session,
        "consolidation",
        preemptor_ok,
        candidates,
        make_validator,
        describe,
        explain=explain,
        moves_only=True,
    )


# ---- stale gang eviction ---------------------------------------------------------------------

ACTIVE_USED = (TaskState.RUNNING, TaskState.ALLOCATED, TaskState.PIPELINED, TaskState.RELEASING)


def stale_gang_eviction(session: Session) -> None:
    """Evict, whole, every running gang that has been below its minimum past its grace period."""
    placements = session.placements
    active_used = ACTIVE_USED
    for job in session.jobs.values():
        if not job.subgroups:
            # Without sub-groups only the count matters (``short_subgroup`` is None): counted
            # inline, as ``gang.status`` reads it, before any list is made.
            used = 0
            for t in job.tasks:
                p = placements.get(t.name)
                if p is not None and p.status in active_used:
                    used += 1
            if used == 0 or used >= job.gang_min:
                continue
        used_tasks = [t for t in job.tasks if gang.status(session, t) in active_used]
        used = len(used_tasks)
        short = gang.short_subgroup(job, used_tasks)
        if used == 0 or (used >= job.gang_min and short is None):
            continue
        session.events.append((job.name, "StaleJob", reasons.stale_job(used, job.gang_min)))
        grace = job.staleness_grace_period_s
        if grace is None:
            grace = session.config.staleness_grace_period_s
        stale_for = job.stale_s if job.stale_s is not None else 0.0
        if grace < 0 or stale_for < grace:
            continue
        stmt = session.statement()
        for t in job.tasks:
            p = session.placements[t.name]
            if p.status not in gang.ACTIVE_ALLOCATED:
                continue
            node = p.node
            stmt.evict(t)
            if used < job.gang_min or short is None:
                msg = reasons.evicted_stale_gang(job.gang_min, job.namespace, t.name)
            else:
                sg_min = gang.subgroup_mins(job)[short]
                msg = reasons.evicted_stale_subgroup(sg_min, short, job.namespace, t.name)
            session.evictions.append(
                Eviction(
                    task=t.name,
                    job=job.name,
                    queue=job.queue,
                    action="stalegangeviction",
                    message=msg,
                    reason=f"{used} of {job.gang_min} required pods active for {stale_for:g}s "
                    f"(grace period {grace:g}s)",
                    node=node,
                    pool=session.pool,
                )
            )
            session.task_reasons[t.name] = msg
            session.events.append((job.name, "Evict", msg))
        stmt.commit()
