"""Engine to rows and cluster: what a ``CycleResult`` means for the backend and the database.

``cluster_operations`` turns a result into the backend's binds, evictions and
events; ``persist_result`` writes the result (and the backend's report on
carrying it out) in the caller's transaction:

* pods: allocated -> bound on their node and GPU devices; evicted -> releasing;
  a failed bind or eviction leaves the pod as it was, with the error as its
  reason, so the next cycle simply tries again;
* ``Pod.reason`` / ``Job.message``: the latest explanation;
* ``Decision`` rows: one per pod per cycle for allocated, pipelined and
  evicted. *Unschedulable* decisions are stored only when the pod's reason
  text changed since the last one (a pod pending for an hour keeps one row per
  distinct reason, not 720), and ``JobMessage`` rows likewise only when the
  job message changed. ``Pod.reason`` always holds the current text;
* job states from their pods (``lifecycle.refresh_job_states``);
* usage samples and the per-queue ``QueueStatus`` (``usage.record_usage``);
* the cycle record's counts.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import F
from django.utils import timezone

from kai_portal.cluster.backends import ApplyReport, Bind, EventType, Evict, PodEvent
from kai_portal.core import bulk
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle
from kai_portal.scheduling import usage, waiting
from kai_portal.scheduling.backlog import persist_backlog
from kai_portal.scheduling.blockers import persist_blockers
from kai_portal.scheduling.pool_usage import record_pool_usage
from kai_portal.scheduling.snapshot_index import CycleInput, PodRef, SnapshotIndex
from kai_portal.workloads import lifecycle
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.models import Job, Pod
from scheduler import CycleResult, Reason, TaskState

REASON_CODES = ("OverLimit", "NonPreemptibleOverQuota", "PodSchedulingErrors", "PreemptionDelayNotElapsed",
                "QueueDoesNotExist", "NotReady")  # fmt: skip
ACTIONS = {
    "reclaim": Decision.Action.RECLAIM,
    "preempt": Decision.Action.PREEMPT,
    "consolidation": Decision.Action.CONSOLIDATION,
    "stalegangeviction": Decision.Action.STALE_GANG,
}
# The Evict operation's action names (kai-semantics.md §8, evictor-action-type).
EVICT_ACTIONS = {"stalegangeviction": "stale-gang"}


@dataclass
class Operations:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    events: list[PodEvent] = field(default_factory=list)


def cluster_operations(inp: CycleInput, result: CycleResult) -> Operations:
    """The backend calls that carry out a result: binds, evictions, and the reasons as events."""
    ops = Operations()
    index = inp.index
    fractions = _fractions(inp)
    # The tasks with their rows, sorted once (50,000 at scale): binds and events go out in pod name
    # order (then key: two pods of one name in two namespaces).
    tasks = sorted(
        ((key, ref, outcome) for key, outcome in result.tasks.items() if (ref := index.tasks.get(key))),
        key=lambda item: (item[1].name, item[0]),
    )
    for _key, ref, outcome in tasks:
        if outcome.status == TaskState.ALLOCATED and outcome.node:
            fraction = fractions.get(outcome.job)
            ops.binds.append(
                Bind(
                    ref.namespace,
                    ref.name,
                    outcome.node,
                    gpu_devices=list(outcome.gpu_devices),
                    gpu_fraction=fraction,
                    pool=index.node_pools.get(outcome.node),
                )
            )
    for eviction in result.evictions:
        ref = index.tasks.get(eviction.task)
        if ref is None:
            continue
        evictor = index.jobs.get(eviction.evictor_job or "")
        ops.evictions.append(
            Evict(
                ref.namespace,
                ref.name,
                index.text(eviction.message),
                action=EVICT_ACTIONS.get(eviction.action, eviction.action),
                evictor_namespace=evictor.namespace if evictor else None,
                evictor_job=evictor.name if evictor else None,
            )
        )
    # Task and job names may coincide (a lone pod is its own job), so pod events come
    # from the task outcomes and pod-group events from the job messages.
    for _key, ref, outcome in tasks:
        if outcome.status == TaskState.PENDING and outcome.reason:
            ops.events.append(
                PodEvent(
                    ref.namespace,
                    ref.name,
                    EventType.WARNING,
                    "Unschedulable",
                    index.text(outcome.reason),
                    condition_reason=waiting.condition_reason(outcome.reason.code),
                )
            )
    for key, reason in sorted(result.job_messages.items(), key=lambda kv: (index.job_name(kv[0]), kv[0])):
        job = index.jobs.get(key)
        if job is not None:
            kind = "NotReady" if reason.code == "NotReady" else "Unschedulable"
            message = index.text(_not_ready_sentence(reason) if kind == "NotReady" else reason)
            ops.events.append(
                PodEvent(job.namespace, job.name, EventType.NORMAL, kind, message, kind="PodGroup")
            )
    for event in result.events:
        if event.kind == "StaleJob" and event.object in index.jobs:
            job = index.jobs[event.object]
            ops.events.append(
                PodEvent(
                    job.namespace,
                    job.name,
                    EventType.NORMAL,
                    event.kind,
                    index.text(event.message),
                    kind="PodGroup",
                )
            )
    return ops


def _fractions(inp: CycleInput) -> dict[str, float | None]:
    """Each job's GPU fraction per task (None for whole GPUs), by engine key: one pass over the
    jobs, not one per bind (2,000 binds x 12,500 jobs was 0.6 s a cycle at scale)."""
    out: dict[str, float | None] = {}
    for job in inp.snapshot.jobs:
        task = job.tasks[0] if job.tasks else None
        out.setdefault(job.key, task.gpu if task is not None and 0 < task.gpu < 1 else None)
    return out


def reason_code(reason: Reason) -> str:
    """KAI's reason code of a message (the one at its head: ``OverLimit: ...``), else
    ``Unschedulable``."""
    return reason.code if reason.code in REASON_CODES else "Unschedulable"


def persist_result(
    cycle: SchedulingCycle,
    inp: CycleInput,
    result: CycleResult,
    report: ApplyReport,
    now: datetime,
) -> SchedulingCycle:
    """Write one cycle's decisions, reasons, job states and usage. Call inside a transaction.

    In order: the binds (one batch), a decision and a reason per task, the evictions, then the
    job-level rows (backlog, job messages, job states from their pods, usage) and the cycle's own
    counters."""
    rows = _CycleRows(cycle, inp.index, report)
    bound = lifecycle.bind_pods(rows.binds(result), now)
    rows.record_tasks(result, bound, now)
    rows.record_evictions(result, now)
    bulk.insert_rows(Decision, DECISION_FIELDS, rows.decisions)

    # A large backlog's pods and jobs the snapshot did not list (``backlog.py``).
    index = inp.index
    hidden_messages = {
        key: index.text(result.job_messages[key])
        for key, _last in index.hidden.values()
        if key in result.job_messages
    }
    left_out = persist_backlog(cycle.pk, index.hidden, index.left_out, hidden_messages, now)
    _persist_job_messages(cycle, inp, result, skip=left_out)
    persist_blockers(inp, result, now, skip=left_out)
    lifecycle.refresh_job_states({ref.job_id for ref in index.tasks.values()}, now)
    usage.record_usage(cycle, index.queues, result.queues, now)
    record_pool_usage(inp, result, now)
    return _finish(cycle, inp, result, report, rows.counts, left_out)


class _CycleRows:
    """The ``Decision`` rows and pod reasons of one cycle, gathered task by task."""

    def __init__(self, cycle: SchedulingCycle, index: SnapshotIndex, report: ApplyReport) -> None:
        self.cycle = cycle
        self.index = index
        self.failed = {(r.operation, r.namespace, r.name): r.error or "failed" for r in report.failures}
        self.decisions: list[tuple[object, ...]] = []  # DECISION_FIELDS of each row, written in one go
        self.written_at = timezone.now()  # what ``auto_now_add`` would give them (``now`` may be simulated)
        self.counts = {"allocated": 0, "pipelined": 0, "evicted": 0, "unschedulable": 0}

    def decide(self, ref: PodRef, kind: str, reason: str, message: str, **extra: Any) -> None:
        self.decisions.append(_decision(self.cycle, self.written_at, ref, kind, reason, message, **extra))

    def binds(self, result: CycleResult) -> list[tuple[int, int, list[int], str]]:
        """Every bind the cluster accepted, to be written at once (a few queries, not three per pod)."""
        index = self.index
        binds: list[tuple[int, int, list[int], str]] = []
        for name, outcome in result.tasks.items():
            ref = index.tasks.get(name)
            node_id = index.nodes.get(outcome.node or "")
            if ref is None or outcome.status != TaskState.ALLOCATED or node_id is None:
                continue
            if ("bind", ref.namespace, ref.name) in self.failed:
                continue
            here = [(node_id, i) for i in outcome.gpu_devices]
            devices = [index.devices[key] for key in here if key in index.devices]
            binds.append((ref.pod_id, node_id, devices, _bound_text(index, ref, outcome.node or "")))
        return binds

    def record_tasks(self, result: CycleResult, bound: set[int], now: datetime) -> None:
        """A decision per placed, pipelined or waiting task, and the pod reasons that changed."""
        evicted = {e.task for e in result.evictions}
        # Pending pods whose reason changed (pod id, reason): written in one statement, not per pod.
        # A text equal to the stored one is not written again (nor its time): a second cycle that
        # changes nothing writes almost nothing.
        new_reasons: list[tuple[object, ...]] = []
        pipelined_reasons: list[tuple[object, ...]] = []
        for name, outcome in result.tasks.items():
            ref = self.index.tasks.get(name)
            if ref is None:
                continue
            node_id = self.index.nodes.get(outcome.node or "")
            if outcome.status == TaskState.ALLOCATED and node_id is not None:
                self._allocated(ref, outcome.node or "", node_id, bound, now)
            elif outcome.status == TaskState.PIPELINED:
                self.counts["pipelined"] += 1
                text = (
                    f"Pipelined to node {outcome.node}: "
                    "it starts there once resources being released are free."
                )
                if name not in evicted and text != ref.reason:
                    pipelined_reasons.append((ref.pod_id, text))
                self.decide(ref, Decision.Kind.PIPELINED, "Pipelined", text, node_id=node_id)
            elif outcome.status == TaskState.PENDING and outcome.reason:
                self.counts["unschedulable"] += 1
                reason = self.index.text(outcome.reason)
                if reason != ref.reason:
                    new_reasons.append((ref.pod_id, reason))
                    self.decide(ref, Decision.Kind.UNSCHEDULABLE, reason_code(outcome.reason), reason)
            elif outcome.status == TaskState.RELEASING and ref.state == PodState.PENDING and outcome.reason:
                # Pipelined earlier in the cycle, then evicted by a later action: KAI reports it
                # Releasing on that node, but it never bound, so it still waits and its reason is
                # the eviction (its Evict decision is written by ``record_evictions``).
                self.counts["unschedulable"] += 1
                reason = self.index.text(outcome.reason)
                if reason != ref.reason:
                    new_reasons.append((ref.pod_id, reason))
        bulk.update_rows(Pod, ["reason"], new_reasons, {"reason_at": now})
        bulk.update_rows(Pod, ["reason"], pipelined_reasons, {"reason_at": now}, where={"state": "pending"})

    def _allocated(self, ref: PodRef, node: str, node_id: int, bound: set[int], now: datetime) -> None:
        error = self.failed.get(("bind", ref.namespace, ref.name))
        if error is not None:
            message = f"Failed to bind pod {ref.namespace}/{ref.name} to node {node}. {error}"
            Pod.objects.filter(pk=ref.pod_id).update(reason=message, reason_at=now)
            self.decide(ref, Decision.Kind.UNSCHEDULABLE, "FailedBinding", message)
            self.counts["unschedulable"] += 1
            return
        if ref.pod_id in bound:
            self.counts["allocated"] += 1
            self.decide(
                ref, Decision.Kind.ALLOCATED, "Scheduled", _bound_text(self.index, ref, node),
                action=Decision.Action.ALLOCATE, node_id=node_id,
            )  # fmt: skip

    def record_evictions(self, result: CycleResult, now: datetime) -> None:
        """Evict each victim's pod row (unless the cluster refused) and record why."""
        index = self.index
        for eviction in {e.task: e for e in result.evictions}.values():
            ref = index.tasks.get(eviction.task)
            if ref is None:
                continue
            error = self.failed.get(("evict", ref.namespace, ref.name))
            evictor = index.jobs.get(eviction.evictor_job or "")
            said = index.text(eviction.message)
            why = index.text(eviction.reason) if eviction.reason is not None else ""
            message = said if error is None else f"Eviction failed: {error}. {said}"
            if error is None and lifecycle.evict_pod(ref.pod_id, said, now):
                self.counts["evicted"] += 1
            self.decide(
                ref,
                Decision.Kind.EVICTED,
                "Evict" if error is None else "FailedEviction",
                message + (f"\n{why}" if why else ""),
                action=ACTIONS.get(eviction.action, Decision.Action.NONE),
                node_id=index.nodes.get(eviction.node or "") or ref.node_id,
                evictor_job_id=evictor.job_id if evictor else None,
                evictor_queue_id=index.queues.get(eviction.evictor_queue or ""),
            )


def _finish(
    cycle: SchedulingCycle,
    inp: CycleInput,
    result: CycleResult,
    report: ApplyReport,
    counts: dict[str, int],
    left_out: set[int],
) -> SchedulingCycle:
    """The cycle's row: its counts and counters, marked succeeded."""
    cycle.allocated_count = counts["allocated"]
    cycle.pipelined_count = counts["pipelined"]
    cycle.evicted_count = counts["evicted"]
    cycle.unschedulable_count = counts["unschedulable"]
    cycle.counters = {**result.counters, "apply_failures": len(report.failures)}
    index = inp.index
    if index.hidden or index.left_out:
        # How much of the backlog this cycle did not expand (tasks of cut jobs; jobs left out).
        cycle.counters["backlog_tasks_not_listed"] = sum(j.more_pending for j in inp.snapshot.jobs)
        cycle.counters["backlog_jobs_not_considered"] = len(left_out)
    cycle.status = SchedulingCycle.Status.SUCCEEDED
    cycle.save()
    return cycle


def _bound_text(index: SnapshotIndex, ref: PodRef, node: str) -> str:
    pool = index.node_pools.get(node, "default")
    return f"Successfully assigned pod {ref.namespace}/{ref.name} to node {node} at node-pool {pool}"


# A Decision row as written by ``bulk.insert_rows`` (12,000 rows on a first cycle at scale: model
# instances and ``bulk_create`` cost a second there).
DECISION_FIELDS = ("cycle_id", "pod_id", "pod_name", "job_id", "kind", "action", "node_id", "evictor_job_id",
                   "evictor_queue_id", "reason", "message", "created_at")  # fmt: skip


def _decision(
    cycle: SchedulingCycle,
    written_at: datetime,
    ref: PodRef,
    kind: str,
    reason: str,
    message: str,
    *,
    action: str = Decision.Action.NONE,
    node_id: int | None = None,
    evictor_job_id: int | None = None,
    evictor_queue_id: int | None = None,
) -> tuple[object, ...]:
    """One Decision row's DECISION_FIELDS (``created_at`` = ``written_at``)."""
    return (cycle.pk, ref.pod_id, ref.name, ref.job_id, kind, action, node_id, evictor_job_id,
            evictor_queue_id, reason[:64], message, written_at)  # fmt: skip


def _persist_job_messages(
    cycle: SchedulingCycle, inp: CycleInput, result: CycleResult, skip: Collection[int] = ()
) -> None:
    """Job messages that changed since the snapshot: written on the job and as a JobMessage row
    (not for the jobs in ``skip``: left out of the cycle, with the reason ``backlog`` gave them)."""
    index = inp.index
    changed: list[tuple[int, str, Reason | None]] = []
    for key, ref in index.jobs.items():
        reason = result.job_messages.get(key)
        message = "" if reason is None else index.text(reason)
        if message != ref.message and ref.job_id not in skip:
            changed.append((ref.job_id, message, reason))
    # Read under the cycle's job locks: an ended job (its pods still releasing) keeps the message
    # that says why it ended. Only the jobs whose message changed are looked up.
    active: set[int] = set()
    for part in bulk.id_slices([job_id for job_id, _m, _r in changed]):
        jobs = Job.objects.filter(bulk.AnyOf(F("pk"), part), state__in=JobState.active())
        active.update(jobs.values_list("pk", flat=True))
    messages = [(job_id, message, reason) for job_id, message, reason in changed if job_id in active]
    # one statement, not one per job
    bulk.update_rows(Job, ["message"], [(job_id, message) for job_id, message, _r in messages])
    bulk.insert_rows(
        JobMessage,
        ("cycle_id", "job_id", "reason", "message"),
        [(cycle.pk, job_id, reason_code(reason), message) for job_id, message, reason in messages if reason],
    )


def _not_ready_sentence(reason: Reason) -> Reason:
    """KAI's scheduler posts a not-ready group's ``NotReady`` event as the bare sentence ("Job is
    not ready for scheduling. Waiting for ..."), not as a fit-error message ("NotReady: ... .")."""
    errors = reason.params[0] if reason.wording == "job_message" and reason.params else ()
    if isinstance(errors, tuple) and len(errors) == 1:
        only = errors[0]
        if isinstance(only, tuple) and len(only) == 2 and isinstance(only[1], Reason):
            return only[1]
    return reason
