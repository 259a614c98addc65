"""Simulating one scenario (§3.9): evict its victims virtually, then place the preemptor and
re-place the victims in the order the next allocate would (KAI's ``by_pod_solver``'s
``solve``: a scenario run in a statement that is kept or rolled back)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from scheduler import gang
from scheduler.actions.allocate import capacity_error, place_task, step_request
from scheduler.actions.solvers.allocate_order import AllocateOrder, PendingHeads
from scheduler.actions.solvers.budget import PLACE_UNITS, spend
from scheduler.actions.solvers.scenario import Contribution, Outcome
from scheduler.fit import AMOUNT_EPS
from scheduler.model import Job, Task, TaskState
from scheduler.placement import best_fit
from scheduler.session import Session
from scheduler.state import EPS, NodeState, Placement
from scheduler.statement import Statement
from scheduler.topology import node_sets


@dataclass
class SolveLog:
    """How a search went: ``late`` when some scenario got past the preemptor's placement (its
    answer then depends on the jobs allocate would pop after the preemptor); ``last`` unset when
    some scenario came to the preemptor's turn with a victim job still to come after it in
    allocate order (see ``_carries``)."""

    late: bool = False
    last: bool = True


def _max_free(session: Session) -> tuple[int, float, float, float, float]:
    """Upper bounds over nodes of free whole GPUs, free fractional memory, CPU, memory, pods."""
    g = 0
    frac = 0.0
    cpu = mem = pods = 0.0
    # ``max(a, x)`` written out as ``x > a`` (what max tests; a tie keeps ``a``): a pass over
    # every device of the pool, taken again after each re-placement that finds no node.
    for ns in session.nodes.values():
        if ns.node.unschedulable:
            continue
        free = 0  # ``free_whole_gpus``
        for d in ns.devices:
            active = d.active
            if active <= EPS:
                free += 1
            x = d.memory - active
            if x > frac:
                frac = x
        if free > g:
            g = free
        x = ns.cpu_idle + ns.cpu_rel
        if x > cpu:
            cpu = x
        x = ns.mem_idle + ns.mem_rel
        if x > mem:
            mem = x
        x = ns.pods_idle + ns.pods_rel
        if x > pods:
            pods = x
    return g, frac, cpu, mem, pods


def _replace_victims(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    bound: list[float],
    before: dict[str, Placement],
    node_order: bool,
    groups: dict[str, tuple[int, ...]],
) -> None:
    """Re-place evicted tasks of one victim job (pipeline-only) through the normal node order, as
    KAI's ``AllocateJob(isPipelineOnly)`` does: a task whose best node is the one it ran on (on its
    own devices, for a fractional task) is un-evicted there (``Statement.Pipeline`` of a task
    already on the node unevicts it, back to the status it had: a task allocated earlier in this
    cycle is Allocated again, a whole-GPU task also on other devices of the node); a better node
    elsewhere pipelines it there, even while its own room is still free. A gang that cannot reach
    its minimum stays evicted. ``before``: the victims' placements before the scenario's evictions;
    ``groups``: the GPU groups (``Device.group``) its fractional victims were members of then.

    ``node_order`` False (the greedy and prefix scenarios, which take in victims KAI's narrower
    scenarios would not evict): a task whose own room is still free is un-evicted first, which
    stands in for KAI not evicting it at all.

    ``bound`` is ``_max_free`` taken at some point since the last time room was freed, or empty
    until a task needs it: re-placing only takes room, so a later reading is as valid a screen
    (a task it skips would fit nowhere) and most victims, un-evicted, never need one."""
    cp = stmt.checkpoint()
    nodes = session.node_list()  # the session's one list, in name order (read only)
    if node_order:
        tasks = _one_step(session, job, tasks)
    for t in tasks:
        if capacity_error(session, job, step_request(session, [t])):
            continue  # its queue's room went to the preemptor (a limit, non-preemptible quota)
        own = before[t.key]
        if not node_order and stmt.unevict(t, own.status):
            continue
        if not bound:
            bound[:] = _max_free(session)
        if (
            t.whole_gpus > bound[0]
            or t.cpu_millis > bound[2] + AMOUNT_EPS
            or t.memory_mib > bound[3] + AMOUNT_EPS
            or bound[4] < 1
        ):
            continue
        if (
            t.is_fractional
            and session.device_need(t, session.max_device_memory) > bound[1] + EPS
            and t.gpu > 0
        ):
            continue
        found = best_fit(session, t, job, nodes)
        if found is None:
            bound[:] = _max_free(session)  # tighten the screen for the victims that follow
            continue
        ns, fit = found
        if _back_to_its_move(session, t, own, ns.name):
            # A running task moved earlier in this cycle still has its Releasing pod on the node
            # it ran on; KAI's ``Statement.Pipeline`` onto that node finds it there and un-evicts
            # the task (statement.go: Pipeline -> Unevict, which undoes this scenario's eviction),
            # so it goes back to where it was moved, Pipelined (kai_diff seed 86312).
            stmt.place(t, own.node or "", own.devices, pipelined=True, unevicted=True)
            continue
        # KAI's Statement.Pipeline onto the node the task is on un-evicts it, back to the status
        # it had, unless a fractional task was given another GPU group there (then it moves,
        # Pipelined). KAI counts whole GPUs per node, not devices: a whole-GPU task whose own
        # device was taken is un-evicted all the same, on the GPUs left; its pod keeps its own
        # devices and what took them moves onto the ones it was given.
        if ns.name == own.node and (
            not t.is_fractional or _rejoins_own_group(ns, fit.devices, own.devices, groups[t.key])
        ):
            if stmt.unevict(t, own.status):
                continue
            if not t.is_fractional and _own_room_released(session, t, own):
                # A task pipelined earlier in this cycle: ``Statement.evict`` sent it back to
                # Pending and left its room releasing, as KAI's node counts its Releasing pod.
                # KAI's ``Statement.Pipeline`` onto that node un-evicts it (statement.go:
                # Pipeline -> Unevict -> unevict), which takes that releasing room back as
                # it was: its pipelined placement is restored, on its own devices, and the
                # node has no releasing room left from it (kai_diff seed 83011).
                stmt.place(t, ns.name, own.devices, pipelined=own.from_releasing, unevicted=True)
                continue
            if not t.is_fractional:
                stmt.place(t, ns.name, fit.devices, pipelined=True)
                stmt.set_status(t, own.status)
                stmt.keep_own_devices(t, own.devices)
                continue
        stmt.place(t, ns.name, fit.devices, pipelined=True)
    if not gang.gang_satisfied(session, job) and stmt.checkpoint() > cp:
        stmt.rollback(cp)
        bound.clear()  # room freed again: read it when a task next needs it


def _one_step(session: Session, job: Job, evicted: list[Task]) -> list[Task]:
    """The evicted tasks of a victim job that KAI's simulated allocate re-places: one allocate
    step. ``common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims`` pops each job once and
    ``AllocateJob`` places ``podgroup_info.GetTasksToAllocate``: the members missing to the job's
    minimum, or one task once the job is at it (``allocation_info.go: getNumTasksToAllocate``),
    the first in task order (``Session.TaskOrderFn``: creation time, file order here) of its
    Pending tasks and those evicted in this session (``PodInfo.ShouldAllocate``). So an elastic
    victim that keeps its minimum gets one evicted task back and the others stay evicted
    (kai_diff seed 89376). A Pending task of the victim taking a place in the step is not
    placed here (KAI would pipeline it). Jobs with sub-groups keep every task (not modelled)."""
    if job.subgroups:
        return evicted
    keys = {t.key for t in evicted}
    placements = session.placements
    waiting: list[Task] = []
    n_active = 0
    for t in job.tasks:
        p = placements.get(t.key) or placements.on_demand(t.key)
        if t.key in keys or p is None or p.status == TaskState.PENDING:
            waiting.append(t)
        elif p.status in gang.ACTIVE_ALLOCATED:
            n_active += 1
    missing = job.gang_min - n_active
    step = waiting[:missing] if missing > 0 else waiting[:1]
    return [t for t in step if t.key in keys]


def _own_room_released(session: Session, t: Task, own: Placement) -> bool:
    """Whether a whole-GPU (or CPU-only) task pipelined earlier in this cycle and evicted in this
    scenario (Pending again) still has its own room as ``Statement.evict`` left it: each of its
    devices releasing in full and used by nothing placed since."""
    if own.status != TaskState.PIPELINED or not own.from_releasing:
        return False
    if session.placements[t.key].status != TaskState.PENDING:
        return False
    assert own.node is not None
    ns = session.nodes[own.node]
    for i in own.devices:
        d = ns.devices[i]
        if d.active > EPS or d.releasing + EPS < d.memory:
            return False
    return True


def _back_to_its_move(session: Session, t: Task, own: Placement, best: str) -> bool:
    """Whether a whole-GPU (or CPU-only) victim moved earlier in this cycle, whose best node is
    one that still holds a Releasing pod of it, goes back to the node it was moved to instead.

    KAI's node keeps the Releasing pod of a task moved off it (``Statement.Evict`` updates it
    there, ``Statement.Pipeline`` adds the task to its new node only): the node it ran on at the
    start of the cycle, and every node a committed scenario moved it off since (a task moved
    twice has two). ``Pipeline`` onto such a node finds the task on it and un-evicts it
    (``framework/statement.go: Pipeline`` -> ``Unevict``, undoing this scenario's eviction),
    back to its Pipelined placement (kai_diff seeds 86312, 106014). The engine re-places it
    there only while its own devices are still free and the node still has a pod slot, CPU and
    memory for it (KAI's ``unevict`` checks no room; the engine never over-commits a node: a
    task put back after another took the node's last releasing slot planned three pods on a
    two-pod node, test_overcommit_cycles). Fractional tasks are left out: their GPU group
    decides (``gpuPlacementChanged``)."""
    if t.is_fractional or own.status != TaskState.PIPELINED or own.node is None or own.node == best:
        return False
    started_there = t.node == best and t.state == TaskState.RUNNING
    if not started_there and best not in session.moved_off.get(t.key, ()):
        return False
    if session.placements[t.key].status != TaskState.PENDING:
        return False
    ns = session.nodes[own.node]
    if (
        ns.pods_idle + ns.pods_rel < 1
        or ns.cpu_idle + ns.cpu_rel + EPS < t.cpu_millis
        or ns.mem_idle + ns.mem_rel + EPS < t.memory_mib
    ):
        return False
    return all(ns.devices[i].active <= EPS for i in own.devices)


def _rejoins_own_group(
    ns: NodeState, devices: tuple[int, ...], own: tuple[int, ...], groups: tuple[int, ...]
) -> bool:
    """Whether a fractional victim placed on ``devices`` of its own node goes back into its own
    GPU group. KAI lets a task join only a group with some memory not releasing
    (``node_info.IsTaskFitOnGpuGroup``: ``!isAllGpuReleased``): a group left with only releasing
    members (the victim alone, or with other evicted members not re-placed yet) takes nothing, so
    the victim gets a new group (``gpu_sharing.findGpuForSharingOnNode``) and ``Statement.Pipeline``
    moves it there, Pipelined, instead of un-evicting it. Likewise when such a new group was opened
    on its device since (by the preemptor or an earlier victim: ``Device.group`` changed): the
    victim joins that group, whose id is not its own, and ``Statement.Pipeline`` moves it
    (``framework/statement.go: Pipeline``, ``gpuPlacementChanged``; kai_diff seeds 88230, 88245)."""
    return (
        devices == own
        and all(ns.devices[i].active > EPS for i in own)
        and tuple(ns.devices[i].group for i in own) == groups
    )


def place_preemptor(session: Session, stmt: Statement, job: Job, tasks: list[Task]) -> bool:
    nodes = session.node_list()  # the session's one list, in name order (read only)
    sets = node_sets(session, job, tasks, nodes)
    for node_set in sets:
        cp = stmt.checkpoint()
        ok = True
        for t in tasks:
            if (
                place_task(session, stmt, job, t, node_set.nodes, pipeline_only=True, extra=node_set.scores)
                is not None
            ):
                ok = False
                break
        if ok:
            return True
        stmt.rollback(cp)
    return False


def simulate(
    session: Session,
    stmt: Statement,
    job: Job,
    tasks: list[Task],
    contributions: Sequence[Contribution],
    validate: Callable[[Outcome], bool],
    heads: PendingHeads | None = None,
    moves_only: bool = False,
    log: SolveLog | None = None,
    node_order: bool = False,
) -> Outcome | None:
    """Evict the scenario's victims, then place preemptor and re-place victims in job order.
    On failure everything is rolled back; on success the changes stay in ``stmt``.

    Every action orders the jobs as the next allocate would pop them (``AllocateOrder``: queues
    keyed on the current state, after the virtual evictions and every re-placement, each
    represented by its best pending job), so a victim whose queue allocate would serve before the
    preemptor's takes its room back and the scenario fails - no reclaim that the next cycle would
    undo. Consolidation (``moves_only``: every victim must be re-placed, no queue loses anything)
    orders them the same way: KAI's solver builds that order (``GetJobsToAllocate``) after the
    evictions for every action, so a job consolidation moves may be re-placed before the pending
    job it moves for (traced on kai_diff seed 9320, allocate + consolidation)."""
    victims = [t for c in contributions for t in c.tasks]
    if not victims:
        return None  # KAI's by_pod_solver.go ``solve``: a scenario without victims is never solved
    cp = stmt.checkpoint()
    spend(session, PLACE_UNITS * (len(tasks) + len(victims)))
    before = {t.key: session.placements[t.key] for t in victims}
    groups = {
        t.key: tuple(session.nodes[p.node].devices[i].group for i in p.devices)
        for t in victims
        if t.is_fractional and (p := before[t.key]).node is not None
    }
    origin = {name: p.node for name, p in before.items()}
    by_job: dict[str, tuple[Job, list[Task]]] = {}
    for c in contributions:
        by_job.setdefault(c.job.key, (c.job, []))[1].extend(c.tasks)
    entries = [(job, tasks)] + list(by_job.values())
    for t in victims:
        stmt.evict(t)
    # job keys too after the evictions: a victim that lost its gang is below its minimum
    order: Iterator[tuple[Job, list[Task]]] = iter(AllocateOrder(session, entries, heads).pop, None)
    request = step_request(session, tasks)  # a function of the tasks alone: read once
    if capacity_error(session, job, request):
        stmt.rollback(cp)
        return None
    bound: list[float] = []  # ``_max_free``, read when a victim first needs it
    # KAI re-places every evicted victim through the node order (``AllocateJob(isPipelineOnly)``
    # in ``common/action.go: TryToVirtuallyAllocatePreemptorAndGetVictims``). Consolidation does so
    # in every scenario: all its victims must be re-placed anyway (``allPodsReallocated``), so the
    # un-evict-first stand-in of the wider greedy and prefix scenarios (see ``_replace_victims``)
    # would only keep a victim where KAI moves it (kai_diff seed 50031: a gang that fits moves the
    # running j00-0 to the node that scores best).
    in_order = node_order or moves_only
    popped = 0  # victim jobs re-placed (or left evicted) before the preemptor's turn
    for j, ts in order:
        if j is job:
            if log is not None and popped < len(entries) - 1:
                log.last = False
            # again here: victims of its own queues re-placed before it may have used the room
            if capacity_error(session, job, request) or not place_preemptor(session, stmt, job, tasks):
                stmt.rollback(cp)
                return None
            bound.clear()
        else:
            popped += 1
            _replace_victims(
                session, stmt, j, sorted(ts, key=lambda t: j.tasks.index(t)), bound, before, in_order, groups
            )
    if log is not None:
        log.late = True  # whatever fails from here on was judged after the preemptor's placement
    real: list[Task] = []
    moved: list[Task] = []
    for t in victims:
        p = session.placements[t.key]
        if p.status in (TaskState.RELEASING, TaskState.PENDING):
            real.append(t)
        elif p.node != origin[t.key] or p.status == TaskState.PIPELINED:
            moved.append(t)
    outcome = Outcome(real, moved, list(contributions), origin)
    if (
        not real
        and not moved
        and not any(session.placements[t.key].status == TaskState.PIPELINED for t in tasks)
    ):
        stmt.rollback(cp)
        return None
    if not validate(outcome):
        stmt.rollback(cp)
        return None
    return outcome
