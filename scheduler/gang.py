"""Job (pod group) state used by ordering and actions: gang minimum, sub-groups, elastic extras.

A job is satisfied when its active pods reach the job's minimum and every sub-group's active
pods reach the sub-group's minimum (kai-semantics §4.3, §5.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scheduler.model import Job, SubGroup, Task, TaskState
from scheduler.session import Session

# Task states as module constants: reading a member through the enum class costs ~15x a global.
_PENDING = TaskState.PENDING
_RUNNING = TaskState.RUNNING
_ALLOCATED = TaskState.ALLOCATED
_PIPELINED = TaskState.PIPELINED

ACTIVE_ALLOCATED = (_RUNNING, _ALLOCATED, _PIPELINED)


def status(session: Session, task: Task) -> TaskState:
    placements = session.placements
    p = placements.get(task.key) or placements.on_demand(task.key)
    return p.status if p else _PENDING


def active_allocated(session: Session, job: Job) -> int:
    placements = session.placements
    n = 0
    for t in job.tasks:
        p = placements.get(t.key) or placements.on_demand(t.key)  # status(), inline: hot
        if p is not None and p.status in ACTIVE_ALLOCATED:
            n += 1
    return n


def pending_tasks(session: Session, job: Job) -> list[Task]:
    """Pending tasks in task order (file order stands for pod age)."""
    placements = session.placements
    pending = _PENDING
    out = []
    for t in job.tasks:
        p = placements.get(t.key) or placements.on_demand(t.key)
        if p is None or p.status == pending:
            out.append(t)
    return out


def alive(session: Session, job: Job) -> int:
    """Active and pending pods (active_allocated + len(pending_tasks), in one pass)."""
    placements = session.placements
    n = 0
    for t in job.tasks:
        p = placements.get(t.key) or placements.on_demand(t.key)
        if p is None or p.status == _PENDING or p.status in ACTIVE_ALLOCATED:
            n += 1
    return n


def subgroup_mins(job: Job) -> dict[str, int]:
    """Pod minimum of each leaf sub-group."""
    return {g.name: g.min_available for g in job.subgroups}


def _children(job: Job) -> dict[str | None, list[SubGroup]]:
    kids: dict[str | None, list[SubGroup]] = {}
    for g in job.subgroups:
        kids.setdefault(g.parent, []).append(g)
    return kids


def subgroup_counts(tasks: Iterable[Task], job: Job) -> dict[str, int]:
    out = dict.fromkeys(subgroup_mins(job), 0)
    for t in tasks:
        if t.subgroup in out:
            out[t.subgroup] += 1
    return out


class _Tree:
    """A job's sub-group tree evaluated for one set of active pods."""

    def __init__(self, job: Job, tasks: Iterable[Task]) -> None:
        self.kids = _children(job)
        self.counts = subgroup_counts(tasks, job)
        self.memo: dict[str, bool] = {}

    def need(self, g: SubGroup) -> int:
        """Direct children a set needs satisfied."""
        kids = self.kids.get(g.name, [])
        return len(kids) if g.min_subgroups is None else min(g.min_subgroups, len(kids))

    def ok(self, g: SubGroup) -> bool:
        done = self.memo.get(g.name)
        if done is None:
            kids = self.kids.get(g.name)
            if not kids:
                done = self.counts[g.name] >= g.min_available
            else:
                done = sum(1 for c in kids if self.ok(c)) >= self.need(g)
            self.memo[g.name] = done
        return done

    def first_short(self, groups: Sequence[SubGroup]) -> SubGroup | None:
        """The first unsatisfied sub-group, followed down to an unsatisfied leaf."""
        for g in groups:
            if not self.ok(g):
                return self.first_short(self.kids.get(g.name, [])) or g
        return None


def short_subgroup(job: Job, tasks: Sequence[Task]) -> str | None:
    """The sub-group (a leaf where one can be named) that ``tasks`` leave unsatisfied."""
    if not job.subgroups:
        return None
    tree = _Tree(job, tasks)
    g = tree.first_short(tree.kids.get(None, []))
    return g.name if g is not None else None


def meets_minimum(job: Job, tasks: Sequence[Task]) -> bool:
    """Whether these pods (as the job's active ones) satisfy the job and every sub-group."""
    return len(tasks) >= job.gang_min and short_subgroup(job, tasks) is None


def active_tasks(session: Session, job: Job) -> list[Task]:
    return [t for t in job.tasks if status(session, t) in ACTIVE_ALLOCATED]


def is_ready(session: Session, job: Job) -> bool:
    """A job whose pods could never reach its gang minimum is not scheduled (§1.2)."""
    if not job.subgroups:
        return alive(session, job) >= job.gang_min
    live = [t for t in job.tasks if status(session, t) in ACTIVE_ALLOCATED or status(session, t) == _PENDING]
    return meets_minimum(job, live)


def step_tasks(session: Session, job: Job) -> list[Task]:
    """Tasks to place in the next step: the missing gang members, or one elastic extra (§5.1).

    With sub-groups: first each sub-group's missing members (sub-groups below their minimum
    first), then more pods until the job's own minimum; an elastic extra comes from the
    sub-group with the lowest allocated/minimum ratio (§4.3)."""
    if not job.subgroups:
        # pending_tasks and active_allocated in one pass (this runs at every step of every job)
        placements = session.placements
        waiting: list[Task] = []
        n_active = 0
        for t in job.tasks:
            p = placements.get(t.key) or placements.on_demand(t.key)
            if p is None or p.status == _PENDING:
                waiting.append(t)
            elif p.status in ACTIVE_ALLOCATED:
                n_active += 1
        missing = job.gang_min - n_active
        if missing > 0:
            return waiting[:missing]
        return waiting[:1]
    pending = pending_tasks(session, job)
    active = active_tasks(session, job)
    tree = _Tree(job, active)
    counts = tree.counts
    mins = subgroup_mins(job)
    by_group: dict[str, list[Task]] = {}
    for t in pending:
        if t.subgroup is not None:
            by_group.setdefault(t.subgroup, []).append(t)

    def lacking_pods(g: SubGroup) -> list[Task]:
        """Pending pods that would satisfy ``g``: a leaf's deficit; for a set, those of the
        unsatisfied children with the fewest missing pods, as many children as it lacks."""
        if tree.ok(g):
            return []
        kids = tree.kids.get(g.name)
        if not kids:
            return by_group.get(g.name, [])[: g.min_available - counts[g.name]]
        lacking = tree.need(g) - sum(1 for c in kids if tree.ok(c))
        options = sorted((lacking_pods(c) for c in kids if not tree.ok(c)), key=len)
        return [t for opt in options[:lacking] for t in opt]

    chosen: list[Task] = []
    for g in tree.kids.get(None, []):
        chosen.extend(lacking_pods(g))
    missing = job.gang_min - len(active) - len(chosen)
    if missing > 0:
        taken = {t.key for t in chosen}
        chosen.extend([t for t in pending if t.key not in taken][:missing])
    if chosen:
        return sorted(chosen, key=job.tasks.index)

    def ratio(t: Task) -> tuple[int, float, int]:
        if t.subgroup in mins:
            m = mins[t.subgroup]
            # required sub-groups before optional ones, then fewer allocated per minimum
            return (0 if m > 0 else 1, counts[t.subgroup] / m if m > 0 else counts[t.subgroup], 0)
        return (1, float(len(active)), 0)

    return sorted(pending, key=ratio)[:1]


def surplus_task(job: Job, remaining: Sequence[Task]) -> Task | None:
    """The first of ``remaining`` (a job's active pods, in victim order) that can go while the
    rest still satisfy the job and every sub-group; None when none can."""
    if len(remaining) <= job.gang_min:
        return None
    if not job.subgroups:
        return remaining[0]
    tree = _Tree(job, remaining)
    top = tree.kids.get(None, [])
    if not all(tree.ok(g) for g in top):
        return None
    mins = subgroup_mins(job)
    verdict: dict[str | None, bool] = {}  # per leaf: may one of its pods go?
    for t in remaining:
        leaf = t.subgroup if t.subgroup in mins else None
        if leaf not in verdict:
            if leaf is None or tree.counts[leaf] > mins[leaf]:
                verdict[leaf] = True  # no sub-group's satisfaction changes
            else:
                fewer = _Tree(job, ())
                fewer.counts = dict(tree.counts)
                fewer.counts[leaf] -= 1
                verdict[leaf] = all(fewer.ok(g) for g in top)
        if verdict[leaf]:
            return t
    return None


def elastic_state(session: Session, job: Job) -> int:
    """0 below the gang minimum, 1 exactly at it, 2 above it."""
    if not job.subgroups:
        n = active_allocated(session, job)
        m = job.gang_min
        return 0 if n < m else (1 if n == m else 2)
    active = active_tasks(session, job)
    if not meets_minimum(job, active):
        return 0
    return 2 if surplus_task(job, active) is not None else 1


def gang_satisfied(session: Session, job: Job) -> bool:
    if not job.subgroups:
        return active_allocated(session, job) >= job.gang_min
    return meets_minimum(job, active_tasks(session, job))
