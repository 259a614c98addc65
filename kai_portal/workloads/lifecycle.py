"""Job and pod state transitions: the ones users trigger and the ones the scheduling loop makes.

Every transition is a conditional UPDATE on the expected old state, so a user
cancelling a job and a cycle finishing it cannot both win: the loser's UPDATE
changes no row and it moves on.

Pod life: pending -> bound (a cycle placed it) -> running (the cluster started
it) -> succeeded; bound/running -> releasing (evicted, cancelled, or its node
drained) -> pending again (``OnFailure``) or failed (``Never``, or its job
ended). A job's state follows its pods (``refresh_job_states``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone

from kai_portal.core import bulk
from kai_portal.workloads import cluster_jobs
from kai_portal.workloads.choices import JobState, PodState, RestartPolicy
from kai_portal.workloads.models import Job, Pod


class TransitionError(Exception):
    """The job is no longer in a state that allows this change."""


@transaction.atomic
def cancel_job(job: Job, actor: Any = None) -> Job:
    """Withdraw an active job: pods on nodes go to releasing, pending pods end as failed.

    The simulated cluster releases them on the next cycle; in kubernetes mode the job's pods
    are deleted from the cluster here (``cluster_jobs.delete``). The job keeps its pods and
    decisions as history.
    """
    now = timezone.now()
    changed = Job.objects.filter(pk=job.pk, state__in=JobState.active()).update(
        state=JobState.CANCELLED, finished_at=now, updated_at=now
    )
    if changed != 1:
        job.refresh_from_db()
        raise TransitionError(f"Job {job.name} is {job.get_state_display().lower()} and cannot be cancelled.")
    who = getattr(actor, "username", None) or "the system"
    reason = f"Job cancelled by {who}."
    pods = Pod.objects.filter(job=job)
    pods.filter(state__in=[PodState.BOUND, PodState.RUNNING]).update(
        state=PodState.RELEASING, reason=reason, reason_at=now, updated_at=now, releasing_since=now
    )
    pods.filter(state=PodState.PENDING).update(
        state=PodState.FAILED, reason=reason, reason_at=now, finished_at=now, updated_at=now
    )
    # In kubernetes mode the pods are deleted now; if the cluster will not, nothing changes
    # (ClusterRefused rolls this transaction back) and the user is told.
    cluster_jobs.delete(job)
    job.refresh_from_db()
    return job


# ----- transitions the scheduling loop and the cluster make -------------------


def lock_jobs(job_ids: Iterable[int]) -> None:
    """Lock these job rows, in id order, for the rest of the transaction.

    Lock order is job before its pods, everywhere: ``cancel_job`` and ``fail_job`` update
    the job first, and the scheduling loop calls this before it touches any pod. Without
    it a cycle (pods, then jobs) and a cancel (job, then pods) could each hold what the
    other waits for: a deadlock that PostgreSQL breaks by failing one of them.
    """
    ids = sorted(set(job_ids))
    if ids:
        list(Job.objects.select_for_update().filter(pk__in=ids).order_by("pk").values_list("pk", flat=True))


HOLDING = [PodState.BOUND, PodState.RUNNING]


def bind_pod(pod_id: int, node_id: int, device_ids: Iterable[int], reason: str, now: datetime) -> bool:
    """A cycle placed a pending pod on a node. False if it is no longer pending (e.g. cancelled)."""
    pending = Pod.objects.filter(pk=pod_id, state=PodState.PENDING, job__state__in=JobState.active())
    changed = pending.update(
        state=PodState.BOUND, node_id=node_id, reason=reason, reason_at=now, updated_at=now,
        releasing_since=None,
    )  # fmt: skip
    if changed:
        Pod.gpu_devices.through.objects.filter(pod_id=pod_id).delete()
        Pod.gpu_devices.through.objects.bulk_create(
            Pod.gpu_devices.through(pod_id=pod_id, gpudevice_id=d) for d in device_ids
        )
    return bool(changed)


def bind_pods(binds: Sequence[tuple[int, int, Sequence[int], str]], now: datetime) -> set[int]:
    """:func:`bind_pod` for many pods (pod id, node id, device ids, reason) in a few queries; the
    ids of the pods bound. Call inside a transaction: the pods still pending (in an active job)
    are locked first, so none changes between that check and the update, as in ``bind_pod``."""
    through = Pod.gpu_devices.through
    bound: set[int] = set()
    for part in bulk.id_slices([b[0] for b in binds]):
        pending = Pod.objects.select_for_update(of=("self",)).filter(
            bulk.AnyOf(F("pk"), part), state=PodState.PENDING, job__state__in=JobState.active()
        )
        bound |= set(pending.values_list("pk", flat=True))
    if not bound:
        return bound
    ok = [b for b in binds if b[0] in bound]
    rows = [(pod_id, node_id, reason) for pod_id, node_id, _devices, reason in ok]
    constants = {"state": PodState.BOUND, "reason_at": now, "updated_at": now, "releasing_since": None}
    bulk.update_rows(Pod, ["node", "reason"], rows, constants)
    for part in bulk.id_slices(sorted(bound)):
        through.objects.filter(bulk.AnyOf(F("pod_id"), part)).delete()
    bulk.insert_rows(
        through,
        ["pod_id", "gpudevice_id"],
        [(pod_id, d) for pod_id, _node, devices, _r in ok for d in devices],
    )
    return bound


def start_pods(pod_ids: Iterable[int], now: datetime) -> int:
    """Bound pods began running on their nodes."""
    return Pod.objects.filter(pk__in=list(pod_ids), state=PodState.BOUND).update(
        state=PodState.RUNNING, started_at=now, updated_at=now
    )


def succeed_pods(pod_ids: Iterable[int], now: datetime) -> int:
    """Running pods finished their work; they free their node and GPUs."""
    ids = list(pod_ids)
    changed = Pod.objects.filter(pk__in=ids, state=PodState.RUNNING).update(
        state=PodState.SUCCEEDED, finished_at=now, updated_at=now, node=None, reason="Completed.",
        reason_at=now,
    )  # fmt: skip
    Pod.gpu_devices.through.objects.filter(pod_id__in=ids).delete()
    return changed


def evict_pod(pod_id: int, message: str, now: datetime) -> bool:
    """A cycle evicted a bound or running pod: it releases its resources, then returns or fails."""
    changed = Pod.objects.filter(pk=pod_id, state__in=HOLDING).update(
        state=PodState.RELEASING, reason=message, reason_at=now, releasing_since=now, updated_at=now
    )
    if changed:
        Job.objects.filter(pods__pk=pod_id).update(last_evicted_at=now, updated_at=now)
    return bool(changed)


def release_pod(pod: Pod, now: datetime, reason: str | None = None) -> str:
    """A releasing (or drained) pod let go of its node. Returns the pod's new state.

    Its job decides what comes next: an ended job's pod ends as failed; a live
    job with restart policy ``OnFailure`` gets the pod back as pending (it is
    recreated); with ``Never`` the whole job fails.
    """
    job = pod.job
    text = reason or pod.reason
    if job.state in JobState.active() and job.restart_policy == RestartPolicy.ON_FAILURE:
        new_state = PodState.PENDING
        fields: dict[str, Any] = {"finished_at": None, "started_at": None}
    else:
        new_state = PodState.FAILED
        fields = {"finished_at": now}
    changed = Pod.objects.filter(pk=pod.pk, state__in=[PodState.RELEASING, *HOLDING]).update(
        state=new_state, node=None, releasing_since=None, reason=text, reason_at=now, updated_at=now, **fields
    )
    if not changed:
        return pod.state
    Pod.gpu_devices.through.objects.filter(pod_id=pod.pk).delete()
    if new_state == PodState.FAILED and job.state in JobState.active():
        fail_job(job, f"Pod {pod.name} was evicted and the job's restart policy is Never.", now)
    return new_state


@transaction.atomic
def fail_job(job: Job, message: str, now: datetime) -> bool:
    """End an active job as failed: pods on nodes release, pending pods fail."""
    changed = Job.objects.filter(pk=job.pk, state__in=JobState.active()).update(
        state=JobState.FAILED, message=message, finished_at=now, updated_at=now, stale_since=None
    )
    if not changed:
        return False
    pods = Pod.objects.filter(job_id=job.pk)
    pods.filter(state__in=HOLDING).update(
        state=PodState.RELEASING, reason=message, reason_at=now, releasing_since=now, updated_at=now
    )
    pods.filter(state=PodState.PENDING).update(
        state=PodState.FAILED, reason=message, reason_at=now, finished_at=now, updated_at=now
    )
    job.state = JobState.FAILED
    return True


def unhandled_message(problem: str) -> str:
    """The job message of a job the scheduling loop could not handle and therefore failed."""
    return (
        f"The scheduler could not handle this job and failed it so that scheduling goes on for "
        f"everyone else: {problem}. Submit it again with valid values."
    )


def refresh_job_states(job_ids: Iterable[int], now: datetime) -> None:
    """Derive each active job's state from its pods (conditional on the state read).

    * succeeded: every pod succeeded;
    * failed: some pod failed and none is alive any more;
    * running: at least the gang minimum of pods is bound or running
      (``started_at`` is set on entering running: the last start, for min-runtimes);
    * pending otherwise.

    Also keeps ``stale_since``: set when a gang first has some but fewer than
    its minimum pods on nodes (and none succeeded), cleared when that ends.
    """

    # Counts per job and pod state from one grouped query (not 50,000 pod rows at scale).
    def count(*states: str) -> Count:
        return Count("pods", filter=Q(pods__state__in=states))

    jobs: list[tuple[Any, ...]] = []
    for part in bulk.id_slices(set(job_ids)):
        jobs += (
            Job.objects.filter(bulk.AnyOf(F("pk"), part), state__in=JobState.active())
            .annotate(
                total=Count("pods"), holding=count(*HOLDING), releasing=count(PodState.RELEASING),
                pending=count(PodState.PENDING), succeeded=count(PodState.SUCCEEDED),
                failed=count(PodState.FAILED),
            )
            .values_list(
                "pk", "state", "min_member", "stale_since",
                "total", "holding", "releasing", "pending", "succeeded", "failed",
            )
        )  # fmt: skip
    groups: dict[tuple[str, tuple[tuple[str, Any], ...]], list[int]] = {}
    for (
        job_pk,
        job_state,
        min_member,
        stale_since,
        total,
        holding,
        releasing,
        pending,
        succeeded,
        failed,
    ) in jobs:
        gang = max(min_member, 1)
        used = holding + releasing
        alive = used + pending
        if total and succeeded == total:
            new = JobState.SUCCEEDED
        elif failed and alive == 0:
            new = JobState.FAILED
        elif holding >= gang or (succeeded and holding > 0):
            new = JobState.RUNNING
        else:
            new = JobState.PENDING
        stale = 0 < used < gang and not succeeded
        updates: dict[str, Any] = {}
        if new != job_state:
            updates["state"] = new
            if new == JobState.RUNNING:
                updates["started_at"] = now
            if new in (JobState.SUCCEEDED, JobState.FAILED):
                updates["finished_at"] = now
        if stale and stale_since is None:
            updates["stale_since"] = now
        elif not stale and stale_since is not None:
            updates["stale_since"] = None
        if updates:
            groups.setdefault((job_state, tuple(sorted(updates.items()))), []).append(job_pk)
    # One UPDATE per distinct change (a cycle starting 8,000 jobs makes one, not 8,000), still
    # conditional on the state read.
    for (job_state, changes), pks in groups.items():
        for part in bulk.id_slices(pks):
            Job.objects.filter(bulk.AnyOf(F("pk"), part), state=job_state).update(
                updated_at=now, **dict(changes)
            )
