"""The allocate action: place pending jobs on free (or releasing) resources, best job first
(kai-semantics.md §3.3). It never evicts and never looks at fair share directly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scheduler import gang, reasons
from scheduler.fit import Fit, node_fit
from scheduler.model import RESOURCES, Job, Task, TaskState, clean
from scheduler.ordering import JobQueue
from scheduler.placement import best_fit, scan_fits, score_nodes
from scheduler.reasons import Reason, Ref, render
from scheduler.session import Session
from scheduler.state import EPS, NodeState
from scheduler.statement import Statement
from scheduler.topology import NodeSet, domain_fits, node_sets, required_domain_errors


def allocate(session: Session) -> None:
    queue = JobQueue(session, session.capacity)
    for job in session.pending_jobs():
        if eligible(session, job):
            queue.push(job)
    while (next_job := queue.pop()) is not None:
        if allocate_step(session, next_job) and gang.pending_tasks(session, next_job):
            queue.push(next_job)  # elastic: re-compete for one more task


def eligible(session: Session, job: Job) -> bool:
    """Pending work in an existing leaf queue, and ready (enough pods for its gang)."""
    if not gang.pending_tasks(session, job):
        return False
    qs = session.queues.get(job.queue)
    if qs is None:
        message = reasons.queue_missing(job.queue, session.pool, session.queue_pools.get(job.queue))
        add_job_error(session, job, reasons.QUEUE_DOES_NOT_EXIST, message)
        return False
    if not qs.is_leaf:
        return False
    if not gang.is_ready(session, job):
        msg = reasons.not_ready(job.gang_min, gang.alive(session, job))
        add_job_error(session, job, reasons.NOT_READY, msg)
        return False
    return True


def add_job_error(session: Session, job: Job, reason: str, message: Reason) -> None:
    errors = session.job_errors.setdefault(job.key, [])
    if (reason, message) not in errors:
        errors.append((reason, message))


def step_request(session: Session, tasks: Sequence[Task]) -> dict[str, float]:
    total = dict.fromkeys(RESOURCES, 0.0)
    for t in tasks:
        for r, v in session.pending_request(t, for_limit=True).items():
            total[r] = clean(total[r] + v)
    return total


def capacity_error(session: Session, job: Job, request: dict[str, float]) -> tuple[str, Reason] | None:
    """Queue limit and non-preemptible quota checks on the leaf queue and every ancestor (§3.5)."""
    asked = [(r, request[r]) for r in RESOURCES if request[r] > EPS]
    if not asked:
        return None
    preemptible = job.is_preemptible
    for qs in session.ancestors(job.queue):
        for r, j in asked:
            lim = qs.limit(r)
            if lim >= 0 and clean(qs.allocated[r] + j) > lim + EPS:
                return reasons.OVER_LIMIT, reasons.over_limit(qs.name, r, lim, qs.allocated[r], j)
            d = qs.quota(r)
            if not preemptible and d >= 0 and clean(qs.allocated_np[r] + j) > d + EPS:
                return (
                    reasons.NON_PREEMPTIBLE_OVER_QUOTA,
                    reasons.non_preemptible_over_quota(qs.name, r, j, d, qs.allocated_np[r]),
                )
    return None


def pre_predicate_error(session: Session, job: Job, task: Task) -> Reason | None:
    """MaxNodePoolResources: no single node of the pool could ever hold this task."""
    max_gpu, max_cpu, max_mem = session.pool_max()
    if (task.whole_gpus and task.whole_gpus > max_gpu) or (task.is_fractional and max_gpu == 0):
        return reasons.max_node_pool_resources(
            Ref(task.key, job.namespace), task.gpu, task.cpu_millis, task.memory_mib, session.pool, max_gpu
        )
    if task.cpu_millis > max_cpu + EPS:
        return reasons.max_node_pool_other(Ref(task.key, job.namespace), "cpu", session.pool, max_cpu)
    if task.memory_mib > max_mem + EPS:
        return reasons.max_node_pool_other(Ref(task.key, job.namespace), "memory", session.pool, max_mem)
    return None


def place_task(
    session: Session,
    stmt: Statement,
    job: Job,
    task: Task,
    nodes: Sequence[NodeState],
    pipeline_only: bool = False,
    extra: Mapping[str, float] | None = None,
) -> Reason | None:
    """Put one task on the best fitting node; return the pod fit error when none fits."""
    memory_request = task.gpu == 0 and task.gpu_memory_mib > 0
    if memory_request:
        # The queue check charges the fraction of each node's device memory; when the largest
        # of them (smallest device) passes, every node passes and the plain search applies.
        worst = session.gpu_fraction_on(task, session.min_device_memory)
        memory_request = capacity_error(session, job, {"gpu": worst, "cpu": 0.0, "memory": 0.0}) is not None
    if memory_request:
        # The batch check used the largest device; redo it with this node's exact fraction.
        fits = []
        counts: dict[str, int] = {}
        for ns in nodes:
            fit = node_fit(session, ns, task, job)
            if fit.ok:
                gpu = session.gpu_fraction_on(task, ns.node.gpu_memory_mib)
                charge = {"gpu": gpu, "cpu": 0.0, "memory": 0.0}
                err = capacity_error(session, job, charge)
                if err:
                    fit = Fit(False, reason=reasons.node_over_capacity(err[0], render(err[1])))
            if fit.ok:
                fits.append((ns, fit))
            elif fit.reason:
                counts[fit.reason] = counts.get(fit.reason, 0) + 1
        if not fits:
            return reasons.fit_error(counts)
        ns, fit = score_nodes(session, task, fits, job, extra)[0]
    else:
        # A task shape that fitted no node still fits none while no node has changed (not kept
        # for jobs with their own rules: tolerations, affinities, anti-affinity to own pods).
        whole_pool = len(nodes) == len(session.nodes) and not job.has_rules
        # The device count is part of the shape: 2 x 0.5 GPU failing says nothing of 1 x 0.5.
        shape = (task.gpu, task.gpu_memory_mib, task.fraction_device_count, task.cpu_millis, task.memory_mib)
        key: tuple[object, ...] = shape
        if job.node_selector:
            key = (*key, *sorted(job.node_selector.items()))
        cached = session.fit_error_cache.get(key) if whole_pool else None
        if cached is not None and cached[0] == session.node_version:
            return cached[1]
        found = best_fit(session, task, job, nodes, extra)
        if found is None:
            if whole_pool:
                return _fit_error(session, task, job, nodes, key)
            _, counts = scan_fits(session, task, job, nodes)
            return reasons.fit_error(counts)
        ns, fit = found
    pipelined = pipeline_only or not fit.now
    devices: tuple[int, ...] | None = fit.devices
    if not pipelined and task.whole_gpus:
        # KAI's idle count may cover GPUs that tasks pipelined this cycle hold (fit.node_fit)
        devices = stmt.idle_from_pipelined(ns, fit.devices)
    if devices is None:
        devices, pipelined = fit.devices, True
    stmt.place(task, ns.name, devices, pipelined=pipelined)
    return None


def _fit_error(
    session: Session, task: Task, job: Job, nodes: Sequence[NodeState], key: tuple[object, ...]
) -> Reason:
    """The fit error of a task that fits no node of the whole pool: every node's reason counted
    once per shape, then only the nodes changed since re-checked."""
    hit = session.fit_error_cache.get(key)
    if hit is None:
        per_node: dict[str, str | None] = {}
        counts: dict[str, int] = {}
        for ns in nodes:
            why = node_fit(session, ns, task, job).reason
            per_node[ns.name] = why
            if why:
                counts[why] = counts.get(why, 0) + 1
    else:
        version, _, per_node, counts = hit
        for name in set(session.node_log[version:]):
            if name not in per_node:
                continue
            old, why = per_node[name], node_fit(session, session.nodes[name], task, job).reason
            if why == old:
                continue
            if old:
                counts[old] -= 1
                if not counts[old]:
                    del counts[old]
            if why:
                counts[why] = counts.get(why, 0) + 1
            per_node[name] = why
    error = reasons.fit_error(counts)
    session.fit_error_cache[key] = (session.node_version, error, per_node, counts)
    return error


def allocate_step(session: Session, job: Job) -> bool:
    """Try the job's next step (gang minimum or one elastic extra); commit or roll back."""
    tasks = gang.step_tasks(session, job)
    if not tasks:
        return False
    err = capacity_error(session, job, step_request(session, tasks))
    if err:
        add_job_error(session, job, *err)
        return False
    for t in tasks:
        pre = pre_predicate_error(session, job, t)
        if pre:
            session.task_reasons[t.key] = pre
            add_job_error(session, job, reasons.POD_SCHEDULING_ERRORS, pre)
            return False

    is_gang = (job.gang_min > 1 or bool(job.subgroups)) and not gang.gang_satisfied(session, job)
    # both only word a gang's failure
    before = gang.active_allocated(session, job) if is_gang else 0
    sg_mins = gang.subgroup_mins(job) if is_gang else {}
    topo = job.topology
    if topo is None or (topo.required is None and topo.preferred is None):
        sets = [NodeSet("cluster", session.node_list())]  # what node_sets gives, without a copy
    else:
        sets = node_sets(session, job, tasks, list(session.nodes.values()))
    if not sets:
        # KAI: one fit error per domain of the required level, then the unmatched requirement
        topo = job.topology
        level = topo.required if topo and topo.required else ""
        name = (topo.name if topo else None) or level
        all_nodes = list(session.nodes.values())
        if not domain_fits(session, all_nodes, tasks):
            # KAI checks the whole cluster first and then names only it
            where = "not enough resources in the cluster to allocate the job"
            msg = reasons.topology_no_match(name, level, Ref(job.key, job.namespace, kind="job"), where)
            add_job_error(session, job, reasons.POD_SCHEDULING_ERRORS, msg)
            return False
        for domain_error in required_domain_errors(session, job, tasks, all_nodes):
            domain_reason = reasons.plain(reasons.UNSCHEDULABLE, domain_error)
            add_job_error(session, job, reasons.NOT_ENOUGH_FOR_WORKLOAD, domain_reason)
        add_job_error(
            session,
            job,
            reasons.POD_SCHEDULING_ERRORS,
            reasons.topology_no_match(name, level, Ref(job.key, job.namespace, kind="job")),
        )
        return False

    # (the failing task, its pod fit error, the job's text for it)
    failure: tuple[Task, Reason, Reason] | None = None
    for node_set in sets:
        stmt = session.statement()
        failure = None
        for i, task in enumerate(tasks):
            error = place_task(session, stmt, job, task, node_set.nodes, extra=node_set.scores)
            if error is not None:
                if is_gang and task.subgroup in sg_mins:
                    text = reasons.subgroup_partial(before + i, task.subgroup, sg_mins[task.subgroup], error)
                elif is_gang:
                    text = reasons.gang_partial(before + i, job.gang_min, error)
                else:
                    text = reasons.pod_not_found(Ref(task.key, job.namespace), error)
                failure = (task, error, text)
                break
        if failure is None:
            _pipeline_partial_gang(session, stmt, job, tasks)
            stmt.commit()
            return True
        stmt.rollback()

    assert failure is not None
    task, error, text = failure
    # KAI's status updater: the pod's event and condition carry its own fit error; the job's
    # "Resources were not found for pod ..." goes to the PodGroup (kai-semantics.md section 8).
    session.task_reasons[task.key] = error
    add_job_error(session, job, reasons.POD_SCHEDULING_ERRORS, text)
    return False


def _pipeline_partial_gang(session: Session, stmt: Statement, job: Job, tasks: Sequence[Task]) -> None:
    """Never start part of a gang: if some tasks had to be pipelined and the ones that can start
    now do not reach the minimum, every task of this step waits (§3.3 step 5)."""
    placed = [session.placements[t.key] for t in tasks]
    pipelined = TaskState.PIPELINED
    if not any(p.status == pipelined for p in placed):
        return
    started = [t for t in job.tasks if gang.status(session, t) in (TaskState.RUNNING, TaskState.ALLOCATED)]
    if not gang.meets_minimum(job, started):
        for t in tasks:
            if session.placements[t.key].status == TaskState.ALLOCATED:
                stmt.set_status(t, TaskState.PIPELINED)
