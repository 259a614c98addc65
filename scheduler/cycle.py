"""One scheduling cycle: split into node pools, compute fair shares, run the actions."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import cast

from scheduler import pools, reasons
from scheduler.actions import get_action
from scheduler.fairshare import compute_fair_shares
from scheduler.gc_pause import gc_paused
from scheduler.model import RESOURCES, Config, Job, Snapshot, Task, TaskState, clean
from scheduler.reasons import Reason, Ref
from scheduler.result import CycleResult, Deferred, Event, NodeRoom, QueueOutcome, TaskOutcome
from scheduler.session import Session, exact_sums
from scheduler.state import NodeState, Placement

# Task states as module constants: reading a member through the enum class costs ~15x a global.
_PENDING = TaskState.PENDING
_RUNNING = TaskState.RUNNING
_RELEASING = TaskState.RELEASING
_ALLOCATED = TaskState.ALLOCATED
_PIPELINED = TaskState.PIPELINED


def run_cycle(snapshot: Snapshot, config: Config | None = None) -> CycleResult:
    """Run ``config.actions`` in order on every node pool of the snapshot."""
    with gc_paused():
        return _run_cycle(snapshot, config)


def _run_cycle(snapshot: Snapshot, config: Config | None) -> CycleResult:
    config = config or Config()
    actions = [get_action(name) for name in config.actions]  # unknown name -> ValueError first
    queue_pools = pools.queue_pools(snapshot.queues)
    jobs = pools.assign_pools(snapshot.jobs, snapshot.nodes, queue_pools)
    snapshot = dataclasses.replace(snapshot, jobs=jobs)
    shards = sorted(
        {n.pool for n in snapshot.nodes} | {j.pool for j in snapshot.jobs} | {*queue_pools.values()}
    )
    result = CycleResult()
    out_of_time = out_of_work = 0
    # Allocated, Pipelined and Pending outcomes, counted as they are made (None: read them back)
    counts: list[int] | None = [0, 0, 0]
    for pool in shards:
        session = _open_session(snapshot, config, pool, queue_pools, whole=len(shards) == 1)
        for action in actions:
            action(session)
        pool_counts = _collect(session, result)
        if counts is not None and pool_counts is not None:
            counts = [a + b for a, b in zip(counts, pool_counts, strict=True)]
        else:
            counts = None
        out_of_time += len(session.out_of_time)
        out_of_work += len(session.out_of_work)
        session.close()
    _queue_outcomes(result, queue_pools)
    result.counters = {
        "allocated": len(result.allocations) if counts is None else counts[0],
        "pipelined": len(result.pipelined) if counts is None else counts[1],
        "evicted": sum(1 for e in result.evictions if e.moved_to is None),
        "moved": sum(1 for e in result.evictions if e.moved_to is not None),
        "pending": len(result.with_status(_PENDING)) if counts is None else counts[2],
        # eviction actions (per node pool) that spent their work budget before trying every job
        "actions_out_of_work": out_of_work,
        # ... stopped by the wall-clock fault stop instead (the answer then depends on speed)
        "actions_out_of_time": out_of_time,
    }
    return result


def open_session(
    snapshot: Snapshot, config: Config, pool: str, queue_pools: dict[str, str] | None = None
) -> Session:
    """Build the virtual state of one pool and its fair shares (computed once per cycle).

    ``queue_pools`` maps queues to their pools (``pools.queue_pools``); jobs must already be in
    their pools (``pools.assign_pools``)."""
    with gc_paused():
        return _open_session(snapshot, config, pool, queue_pools)


def _open_session(
    snapshot: Snapshot, config: Config, pool: str, queue_pools: dict[str, str] | None, whole: bool = False
) -> Session:
    """``open_session``; ``whole``: the snapshot has this one pool (every node, job and queue is
    in it), so nothing is filtered (a pass over every job, in a cluster without pools)."""
    if queue_pools is None:
        queue_pools = pools.queue_pools(snapshot.queues)
    if whole:
        nodes, jobs, queues = list(snapshot.nodes), list(snapshot.jobs), list(snapshot.queues)
    else:
        nodes = [n for n in snapshot.nodes if n.pool == pool]
        jobs = [j for j in snapshot.jobs if j.pool == pool]
        queues = [q for q in snapshot.queues if queue_pools[q.name] == pool]
    session = Session(pool, config, nodes, queues, jobs)
    session.queue_pools = queue_pools
    session.load_tasks(jobs)
    session.hold_external()
    # What other schedulers' pods hold is nobody's fair share (KAI's proportion plugin).
    schedulable = [n for n in nodes if not n.unschedulable]
    session.capacity = {
        "gpu": float(sum(max(0, n.gpus - n.external.gpus) for n in schedulable)),
        "cpu": float(sum(max(0.0, n.cpu_millis - n.external.cpu_millis) for n in schedulable)),
        "memory": float(sum(max(0.0, n.memory_mib - n.external.memory_mib) for n in schedulable)),
    }
    # What each leaf asks for: its running tasks' charges and its pending tasks' requests, added
    # in job order (releasing pods are no longer charged nor requested).
    requested = _requested(session, jobs, session.running_sums)
    usage = None
    k = 0.0
    if config.usage_enabled:
        usage = {q.name: q.historical_usage for q in queues}
        k = config.usage_k if config.usage_k is not None else 1.0
    shares = compute_fair_shares(queues, session.capacity, requested, usage, k)
    for name, qs in session.queues.items():
        qs.fair_share = shares.fair_share.get(name, dict.fromkeys(RESOURCES, 0.0))
        qs.requested = shares.requested.get(name, dict.fromkeys(RESOURCES, 0.0))
    return session


def _requested(
    session: Session, jobs: list[Job], running: dict[str, list[float]] | None
) -> dict[str, dict[str, float]]:
    """What each leaf asks for: its running tasks' charges and its pending tasks' requests,
    added in job order (releasing pods are no longer charged nor requested). ``running``: the
    running charges summed per leaf (``Session.running_sums``), or None to add them one by one."""
    asks: dict[str, list[dict[str, float]]] = {}
    by_shape: dict[tuple[float, ...], dict[str, float]] = {}
    placements = session.placements
    scan = jobs
    if running is not None and session.pending_at_load is not None:
        # Only the jobs with a task pending at load add a request (nothing has run since).
        asks = {queue: [] for queue in dict.fromkeys([job.queue for job in jobs])}
        scan = session.pending_at_load
    for job in scan:
        acc = asks.setdefault(job.queue, [])
        for task in job.tasks:
            p = placements[task.key]
            if p.status == _PENDING:
                shape = (
                    task.gpu,
                    task.gpu_memory_mib,
                    task.gpu_fraction_devices,
                    task.cpu_millis,
                    task.memory_mib,
                )
                req = by_shape.get(shape)
                if req is None:
                    req = by_shape[shape] = session.pending_request(task)
                acc.append(req)
            elif p.status == _RUNNING and running is None:
                acc.append(p.charge)
        if job.more_pending and job.tasks:
            acc.extend([_request_of(session, job.tasks[-1], by_shape)] * job.more_pending)
    for qs in session.queues.values():
        for task, count in qs.queue.unlisted:
            asks.setdefault(qs.name, []).extend([_request_of(session, task, by_shape)] * count)
    if running is None:
        return {queue: add_up(amounts) for queue, amounts in asks.items()}
    # The running charges are exact in quarters and summed per leaf already (``load_tasks``):
    # when the pending requests are too, every order of addition gives add_up's sums.
    out: dict[str, dict[str, float]] = {}
    for queue, amounts in asks.items():
        sums = running.get(queue)
        n = len(amounts) + (int(sums[0]) if sums is not None else 0)
        if n >= 2**20 or not exact_sums(amounts):
            return _requested(session, jobs, None)
        pending = {r: 0.0 + sum(a.get(r, 0.0) for a in amounts) for r in RESOURCES}
        if sums is not None:
            pending = {r: pending[r] + sums[k] for k, r in enumerate(RESOURCES, start=1)}
        out[queue] = pending
    return out


def _request_of(
    session: Session, task: Task, by_shape: dict[tuple[float, ...], dict[str, float]]
) -> dict[str, float]:
    """A pending task's fair-share request, one dict per task shape."""
    shape = (task.gpu, task.gpu_memory_mib, task.gpu_fraction_devices, task.cpu_millis, task.memory_mib)
    req = by_shape.get(shape)
    if req is None:
        req = by_shape[shape] = session.pending_request(task)
    return req


def add_up(amounts: list[dict[str, float]]) -> dict[str, float]:
    """Per resource, ``clean(clean(a1 + a2) + a3)...`` in list order. When every amount is a
    multiple of 1/4 (small enough) each partial sum is exact and rounding changes nothing, so a
    plain sum gives the same floats."""
    if len(amounts) < 2**20 and exact_sums(amounts):
        return {r: 0.0 + sum(a.get(r, 0.0) for a in amounts) for r in RESOURCES}
    total = dict.fromkeys(RESOURCES, 0.0)
    for a in amounts:
        for r in RESOURCES:
            total[r] = clean(total[r] + a.get(r, 0.0))
    return total


# Action notes that KAI itself puts among a job's fit errors; the others (why reclaim, preempt or
# consolidation could not help) are the engine's own and go to ``CycleResult.job_notes``, so the
# job message carries only KAI's decisive reasons, in its wording (kai-semantics.md §8).
KAI_NOTES = frozenset({reasons.PREEMPTION_DELAY_NOT_ELAPSED})


def _job_message(session: Session, job: Job) -> Reason | None:
    own = session.job_errors.get(job.key, [])
    notes = session.action_notes.get(job.key)
    kai_notes = [n for n in notes if n[0] in KAI_NOTES and n not in own] if notes else []
    errors = own + kai_notes
    return reasons.job_message(errors) if errors else None


def _job_notes(session: Session, job: Job) -> list[Reason]:
    return [reasons.note(r, m) for r, m in session.action_notes.get(job.key, []) if r not in KAI_NOTES]


# The codes of a job's fit errors that are refusals by its queue's limit or quota, and the note code
# of each eviction action whose search records what it met (``Session.blockers``).
_QUOTA_CODES = frozenset({reasons.OVER_LIMIT, reasons.NON_PREEMPTIBLE_OVER_QUOTA})
_ACTION_NOTES = {reasons.RECLAIM_NOT_POSSIBLE: "reclaim", reasons.PREEMPT_NOT_POSSIBLE: "preempt"}


def _job_blockers(session: Session, job: Job) -> list[Reason]:
    """``CycleResult.job_blockers`` of a pending job (see there)."""
    out = [m for code, m in session.job_errors.get(job.key, []) if code in _QUOTA_CODES]
    for code, m in session.action_notes.get(job.key, []):
        if code in KAI_NOTES:
            continue
        out.append(m)
        action = _ACTION_NOTES.get(code)
        if action is not None:
            out.extend(session.blockers.get(action, {}).get(job.key, []))
    return [m for i, m in enumerate(out) if m not in out[:i]]  # once each (reasons hold dicts: no set)


def _collect(session: Session, result: CycleResult) -> tuple[int, int, int] | None:
    """Put the pool's outcomes, events and queue numbers in ``result``; returns how many of its
    tasks end Allocated, Pipelined and Pending (None if a task key was already in the result,
    which the counts would then not add up to)."""
    pool = session.pool
    get = session.placements.get
    outcomes = result.tasks
    # Only the jobs with a stored placement when no other was made since the load: the other
    # jobs' pods all run as loaded, and their outcomes are made when the result is read.
    deferred = _only_stored(session) if isinstance(outcomes, Deferred) else None
    made: dict[str, TaskOutcome] = {}
    seen = 0
    counts = [0, 0, 0]
    outcome_of = TaskOutcome
    running = _RUNNING
    for job in session.jobs.values() if deferred is None else deferred:
        jk = job.key
        tasks = job.tasks
        seen += len(tasks)
        placed: list[tuple[str, Placement, TaskOutcome]] | None = None  # the tasks not running
        for task in tasks:
            name = task.key
            p = get(name)
            if p is None:
                # Running as loaded, on its pinned GPUs: its placement was never made (most pods
                # of a large cluster; ``state.Placements``).
                if deferred is None:
                    made[name] = outcome_of(name, jk, running, task.node, task.gpu_devices, None, pool)
                continue
            status = p.status
            outcome = made[name] = outcome_of(name, jk, status, p.node, p.devices, None, pool)
            if status is running:  # most pods of a large cluster: ``is`` before anything slower
                continue
            if placed is None:
                placed = []
            placed.append((name, p, outcome))
        if placed is not None:
            # after the job's tasks: a running task has no event, so the events stay in order
            _job_outcomes(session, result, job, placed, counts)
    if deferred is None:
        before = len(outcomes)
        outcomes.update(made)  # as many assignments in this order (an earlier key keeps its place)
        unique = len(outcomes) - before == seen
    else:
        # Task keys are unique in a snapshot (``Task.key``), so the counts add up.
        cast(Deferred[TaskOutcome], outcomes).defer(
            functools.partial(_fill_outcomes, session.jobs, made, pool)
        )
        unique = True
    result.events.extend(Event(o, k, m) for o, k, m in session.events)
    result.evictions.extend(session.evictions)
    pool_out: dict[str, QueueOutcome] = {}
    for name, qs in session.queues.items():
        pool_out[name] = QueueOutcome(
            deserved={r: qs.quota(r) for r in RESOURCES},
            fair_share=dict(qs.fair_share),
            allocated=dict(qs.allocated),
            allocated_non_preemptible=dict(qs.allocated_np),
            requested=dict(qs.requested),
            limit={r: qs.limit(r) for r in RESOURCES},
        )
    result.pool_queues[session.pool] = pool_out
    rooms = result.node_room
    if isinstance(rooms, Deferred):
        # made when read (most cycles' results are not): the nodes' state is final now
        rooms.defer(functools.partial(_fill_room, session.pool, session.nodes))
    else:
        _fill_room(session.pool, session.nodes, rooms)
    return (counts[0], counts[1], counts[2]) if unique else None


def _fill_room(pool: str, nodes: dict[str, NodeState], out: dict[str, list[NodeRoom]]) -> None:
    """The pool's ``CycleResult.node_room``: what each schedulable node has idle after the cycle."""
    dict.__setitem__(
        out,
        pool,
        [
            NodeRoom(ns.node, ns.idle_whole_gpus(), ns.cpu_idle, ns.mem_idle, ns.pods_idle)
            for ns in nodes.values()
            if ns.schedulable
        ],
    )


def _only_stored(session: Session) -> list[Job] | None:
    """The jobs, in order, that hold every stored placement, when those stored by the load are
    all there is (no placement made since for a pod it deferred, none for another key); else
    None (read every job)."""
    placements = session.placements
    jobs = session.stored_jobs
    if jobs is None or placements.made or len(placements) != session.stored_count:
        return None
    return jobs


def _fill_outcomes(
    jobs: dict[str, Job], made: dict[str, TaskOutcome], pool: str, out: dict[str, TaskOutcome]
) -> None:
    """Every task's outcome in job order: ``made``'s, else running as loaded (``_collect``)."""
    put = dict.__setitem__
    get = made.get
    outcome_of = TaskOutcome
    running = _RUNNING
    for job in jobs.values():
        jk = job.key
        for task in job.tasks:
            name = task.key
            o = get(name)
            put(
                out,
                name,
                outcome_of(name, jk, running, task.node, task.gpu_devices, None, pool) if o is None else o,
            )


def _job_outcomes(
    session: Session,
    result: CycleResult,
    job: Job,
    placed: list[tuple[str, Placement, TaskOutcome]],
    counts: list[int],
) -> None:
    """The outcomes of a job's tasks that do not run (in task order), their events, and the
    job's message, notes and blockers when one is pending; ``counts``: Allocated, Pipelined and
    Pending outcomes so far."""
    task_reasons = session.task_reasons
    evicted_pipelined = session.evicted_pipelined
    events = result.events
    pool = session.pool
    message: Reason | None = None
    pending = False  # the message is needed (and made) once a task is found pending
    for name, p, outcome in placed:
        status = p.status
        if status == _PENDING and name in evicted_pipelined:
            # pipelined earlier in the cycle and evicted: Releasing on that node in KAI
            # (framework/statement.go: Evict). No bind was made for it there, so it holds nothing,
            # unless that node is the one it runs on: moved to another GPU group of its own node,
            # its pod still holds the GPUs it started on (hypothesis seed 103 of
            # test_overcommit_cycles; test_evict.py)
            node = evicted_pipelined[name]
            task = next(t for t in job.tasks if t.key == name)
            held = task.gpu_devices if task.node == node and task.state != _PENDING else ()
            outcome.status, outcome.node, outcome.gpu_devices = _RELEASING, node, held
            outcome.reason = task_reasons.get(name)
            continue
        if status == _PENDING:
            counts[2] += 1
            if not pending:
                message = _job_message(session, job)
                pending = True
            outcome.node, outcome.gpu_devices = None, ()
            outcome.reason = task_reasons.get(name) or message or reasons.DEFAULT_POD_REASON
            events.append(Event(name, "Unschedulable", outcome.reason))
            continue
        if status == _ALLOCATED:
            counts[0] += 1
        elif status == _PIPELINED:
            counts[1] += 1
        if status == _ALLOCATED and p.node:
            events.append(Event(name, "Scheduled", reasons.scheduled(Ref(name, job.namespace), p.node, pool)))
        elif status == _PIPELINED and p.node:
            events.append(Event(name, "Pipelined", reasons.pipelined(Ref(name, job.namespace), p.node)))
        elif status == _RELEASING and name in task_reasons:
            outcome.reason = task_reasons[name]
    if not pending:
        return
    if message:
        result.job_messages[job.key] = message
        kind = (
            "NotReady"
            if any(r == "NotReady" for r, _ in session.job_errors.get(job.key, []))
            else "Unschedulable"
        )
        events.append(Event(job.key, kind, message))
    notes = _job_notes(session, job)
    if notes:
        result.job_notes[job.key] = notes
    blocked = _job_blockers(session, job)
    if blocked:
        result.job_blockers[job.key] = blocked


def _queue_outcomes(result: CycleResult, queue_pools: dict[str, str]) -> None:
    """Each queue's outcome is the one of its own pool: a queue lives in exactly one shard."""
    for name, pool in queue_pools.items():
        result.queues[name] = result.pool_queues[pool][name]


def advance(snapshot: Snapshot, result: CycleResult) -> Snapshot:
    """The next cycle's snapshot: Allocated tasks run where they were placed (last start now),
    Pipelined and Releasing tasks go back to Pending (scenario-format.md, ``rounds``)."""
    jobs = []
    for job in snapshot.jobs:
        started = False
        tasks = []
        for task in job.tasks:
            out = result.tasks.get(task.key)
            if out is None:
                tasks.append(task)
            elif out.status == _ALLOCATED:
                started = True
                tasks.append(
                    dataclasses.replace(task, state=_RUNNING, node=out.node, gpu_devices=out.gpu_devices)
                )
            elif out.status in (_PIPELINED, _RELEASING, _PENDING):
                tasks.append(dataclasses.replace(task, state=_PENDING, node=None, gpu_devices=()))
            else:
                tasks.append(dataclasses.replace(task, gpu_devices=out.gpu_devices or task.gpu_devices))
        jobs.append(dataclasses.replace(job, tasks=tasks, last_start_s=0.0 if started else job.last_start_s))
    return Snapshot(nodes=list(snapshot.nodes), queues=list(snapshot.queues), jobs=jobs)


def run_rounds(snapshot: Snapshot, config: Config) -> CycleResult:
    """Run ``config.rounds`` cycles, moving the state on between them; return the last result."""
    result = run_cycle(snapshot, config)
    for _ in range(max(1, config.rounds) - 1):
        snapshot = advance(snapshot, result)
        result = run_cycle(snapshot, config)
    return result


__all__: Sequence[str] = ["run_cycle", "run_rounds", "advance", "open_session"]
