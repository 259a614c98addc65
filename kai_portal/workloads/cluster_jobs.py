"""Portal jobs as real pods in a Kubernetes cluster (``CLUSTER_BACKEND=kubernetes``).

A job submitted in the portal (form, YAML, API) becomes its pods *in the request*: one pod
per task, named ``<job>-<index>`` like its pod rows, in one pod group (KAI's
``pod-group-name`` annotation = the job's name, ``kai.scheduler/batch-min-member`` = its gang
minimum), in the namespace of the queue's team (``JOB_NAMESPACE_MODE``). The job row gets
``namespace`` and ``cluster_key = "<namespace>/PodGroup/<name>"``: the key the sync groups
those pods under, so the pods come back to this row and never become a second job.

In the request rather than from an outbox, so that what the cluster refuses (a missing
namespace, a pod name taken, an admission webhook's denial, the API unreachable) is the
user's error at once and nothing is saved: ``submission.submit`` runs this inside its
transaction, and a refusal deletes the pods already created and rolls the rows back.
Should the commit itself fail after the pods exist, the sync adopts them as a cluster job
after ``UNCLAIMED_GRACE`` (the pods carry the job's uid; until then it waits for the row).

Cancel deletes the job's pods (by its uid label) in the same way: a failure leaves the job
as it was and says why. In simulated mode (the default) none of this runs.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings

from kai_portal.cluster.backends import NamespaceManager, OperationResult, PodSpecRequest, PodTemplate
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Team
from kai_portal.workloads import pod_policy, pod_security
from kai_portal.workloads.configured_backend import get_backend
from kai_portal.workloads.models import Job

POD_GROUP_KIND = "PodGroup"
# The Pod Security admission labels of a namespace the portal creates: the API server enforces the
# team's level itself, whatever creates a pod there (defence in depth behind the portal's check).
ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
# How long the sync leaves a portal pod whose job row it cannot see (the request's
# transaction has not committed yet) before adopting it as a job found in the cluster.
UNCLAIMED_GRACE = timedelta(minutes=2)


class ClusterRefused(Exception):
    """The cluster did not take the job (or the cancel); nothing was changed.

    ``status`` is the HTTP status to answer with (400 the request is wrong for this cluster,
    409 a clash with what is there, 503 the cluster could not be reached); ``path`` the
    manifest path at fault, when there is one.
    """

    def __init__(self, message: str, status: int = 400, path: str = "(cluster)") -> None:
        self.message, self.status, self.path = message, status, path
        super().__init__(message)


@dataclass(frozen=True)
class Manifest:
    """The pod part of a user's manifest, and where it sits in the manifest (for errors)."""

    template: PodTemplate
    path: str  # "" for a Pod, "spec.template." for a batch/v1 Job


def enabled() -> bool:
    return bool(settings.CLUSTER_BACKEND == "kubernetes")


def cluster_key(namespace: str, name: str) -> str:
    """The sync's key for the pods of a portal job (``JobRef.key`` of a pod group)."""
    return f"{namespace}/{POD_GROUP_KIND}/{name}"


def namespace_for(queue: Queue) -> str:
    """The namespace a queue's jobs run in, by ``JOB_NAMESPACE_MODE``."""
    mode = settings.JOB_NAMESPACE_MODE
    if mode == "fixed":
        return str(settings.JOB_NAMESPACE)
    if mode == "queue":
        base = queue.name
    else:
        team = pod_security.team_of(queue)
        if team is None:
            raise ClusterRefused(
                f"Queue '{queue.name}' belongs to no team, and jobs run in their team's namespace "
                "(JOB_NAMESPACE_MODE=team); give the queue a team, or submit to a team's queue.",
                path="queue",
            )
        base = _namespace_base(team)
    return f"{settings.JOB_NAMESPACE_PREFIX}{base}"


def _namespace_base(team: Team) -> str:
    # Team slugs may hold '_' or capitals; namespaces are DNS-1123 labels.
    return team.slug.lower().replace("_", "-")


def teams_in(namespace: str) -> list[Team]:
    """The teams whose jobs run in ``namespace`` (by ``JOB_NAMESPACE_MODE``): one, or in
    ``fixed`` mode every team (they share it)."""
    mode, prefix = settings.JOB_NAMESPACE_MODE, settings.JOB_NAMESPACE_PREFIX
    if mode == "fixed":
        return list(Team.objects.all()) if namespace == settings.JOB_NAMESPACE else []
    if not namespace.startswith(prefix):
        return []
    base = namespace[len(prefix) :]
    if mode == "queue":
        team = pod_security.team_of(Queue.objects.filter(name=base).first())
        return [team] if team is not None else []
    return [team for team in Team.objects.all() if _namespace_base(team) == base]


def namespace_labels(namespace: str) -> dict[str, str]:
    """The Pod Security labels of a job namespace: enforce its team's level (a namespace shared by
    several teams, ``fixed`` mode, the least strict of theirs, or no pod of some team could run)."""
    levels = [team.pod_security for team in teams_in(namespace)] or [pod_policy.BASELINE]
    level = min(levels, key=pod_policy.STRICTNESS.__getitem__)
    return {ENFORCE_LABEL: level, ENFORCE_VERSION_LABEL: "latest"}


def team_namespaces(team: Team) -> set[str]:
    """The namespaces a team's jobs run in (by ``JOB_NAMESPACE_MODE``)."""
    mode, prefix = settings.JOB_NAMESPACE_MODE, settings.JOB_NAMESPACE_PREFIX
    if mode == "fixed":
        return {str(settings.JOB_NAMESPACE)}
    if mode == "team":
        return {f"{prefix}{_namespace_base(team)}"}
    queues = Queue.objects.select_related("parent", "team")
    return {f"{prefix}{queue.name}" for queue in queues if pod_security.team_of(queue) == team}


def relabel_namespaces(team: Team) -> None:
    """After a team's pod security level changed: set its namespaces' Pod Security labels, where
    the portal makes job namespaces (``JOB_NAMESPACE_CREATE``; elsewhere the cluster admin owns
    them). A namespace not made yet is labelled when it is; any other failure raises
    ``ClusterRefused`` so the caller keeps the old level (namespace and team never disagree)."""
    if not enabled() or not settings.JOB_NAMESPACE_CREATE:
        return
    backend = get_backend()
    if not isinstance(backend, NamespaceManager):  # a backend without namespaces has none to label
        return
    for namespace in sorted(team_namespaces(team)):
        result = backend.label_namespace(namespace, namespace_labels(namespace))
        if not result.ok and result.status_code != 404:
            raise ClusterRefused(
                f"Namespace '{namespace}' could not be given the new level, so the level was not "
                f"changed; try again. ({result.error})",
                status=_status(result),
                path="pod_security",
            )


def place(job: Job) -> None:
    """Set the job's namespace and cluster key (kubernetes mode). A manifest that names
    another namespace than its queue's is refused: a team's jobs stay in its namespace."""
    if not enabled():
        return
    if not job.image.strip():
        message = "A container image is required: the job's pods run it on the cluster."
        raise ClusterRefused(message, path="image")
    namespace = namespace_for(job.queue)
    if job.namespace and job.namespace != namespace:
        raise ClusterRefused(
            f"jobs of queue '{job.queue.name}' run in namespace '{namespace}'; leave metadata.namespace "
            f"out or set it to '{namespace}' (got '{job.namespace}')",
            path="metadata.namespace",
        )
    job.namespace = namespace
    job.cluster_key = cluster_key(namespace, job.name)


def create(job: Job, manifest: Manifest | None = None) -> None:
    """Create the job's pods (kubernetes mode); all of them or, after a refusal, none."""
    if not enabled():
        return
    backend = get_backend()
    request = _request(job, manifest)
    report = backend.submit(request)
    refusal = next(iter(report.failures), None)
    if (
        refusal is not None
        and refusal.status_code == 404
        and settings.JOB_NAMESPACE_CREATE
        and isinstance(backend, NamespaceManager)
    ):
        made = backend.create_namespace(job.namespace, namespace_labels(job.namespace))
        if not made.ok:
            raise ClusterRefused(_namespace_not_made(job.namespace, made), status=_status(made))
        report = backend.submit(request)
        refusal = next(iter(report.failures), None)
    if refusal is None:
        return
    if any(result.ok for result in report.results):
        backend.cancel(job.namespace, job.name, str(job.uid))  # best effort: the sync adopts leftovers
    raise ClusterRefused(_refusal_message(job, refusal), status=_status(refusal))


def found_in_cluster(job: Job) -> bool:
    """A job the sync made from pods applied to the cluster (kubectl, a controller): it never
    has a submitter, a portal job always has one."""
    return bool(job.cluster_key) and job.submitter_id is None


def delete(job: Job) -> None:
    """Delete the job's pods (kubernetes mode); ``ClusterRefused`` when the cluster would not.

    A job found in the cluster is not the portal's to delete: its owner (a batch Job, a
    Deployment...) would re-create the pods, so the cancel is refused and says where to act."""
    if not enabled() or not job.cluster_key:
        return
    if found_in_cluster(job):
        raise ClusterRefused(
            f"Job {job.name} was created in the cluster, not in the portal, so the portal does not "
            f"delete it; delete it (or its owner) there, in namespace '{job.namespace}'.",
            status=409,
        )
    report = get_backend().cancel(job.namespace, job.name, str(job.uid))
    failure = next(iter(report.failures), None)
    if failure is not None:
        raise ClusterRefused(
            f"The job's pods could not be deleted from the cluster, so the job was not cancelled; "
            f"try again. ({failure.namespace}/{failure.name}: {failure.error})",
            status=_status(failure),
        )


def _request(job: Job, manifest: Manifest | None) -> PodSpecRequest:
    template = manifest.template if manifest is not None else None
    return PodSpecRequest(
        namespace=job.namespace,
        job_name=job.name,
        queue=job.queue.name,
        image=job.image,
        num_tasks=job.task_count,
        command=_words(job.command),
        gpus=job.gpu_count,
        gpu_fraction=float(job.gpu_fraction) if job.gpu_fraction is not None else None,
        gpu_memory_mib=job.gpu_memory_mib,
        gpu_devices_per_pod=job.gpu_fraction_devices,
        cpu_millis=job.cpu_millicores,
        memory_mib=job.memory_mib,
        # A manifest keeps its own priority and preemptibility (its labels / spec); a form job's
        # go as KAI's labels.
        priority_class=None if template else job.priority_class,
        preemptibility=None if template else (job.preemptibility or None),
        job_uid=str(job.uid),
        min_member=job.min_member,
        pod_template=template,
        pod_security=pod_security.level_of(job.queue),
    )


def _words(command: str) -> list[str]:
    """A form job's command as the container's argv (shell quoting honoured, as typed)."""
    try:
        return shlex.split(command)
    except ValueError:  # an unbalanced quote: the words as they stand
        return command.split()


def _status(result: OperationResult) -> int:
    code = result.status_code
    if code is None or code >= 500:
        return 503
    return 409 if code == 409 else 400


def _namespace_not_made(namespace: str, result: OperationResult) -> str:
    return f"Namespace '{namespace}' does not exist and could not be created: {result.error}"


def _refusal_message(job: Job, refusal: OperationResult) -> str:
    where = f"namespace '{job.namespace}'"
    if refusal.status_code == 404:
        return (
            f"Namespace '{job.namespace}' does not exist in the cluster, so job {job.name} cannot run "
            f"there; ask a cluster admin to create it (or allow the portal to: JOB_NAMESPACE_CREATE)."
        )
    if refusal.status_code == 409:
        return (
            f"A pod named '{refusal.name}' already exists in {where} (an earlier job of this name may "
            "still be shutting down); choose another job name, or wait and submit again."
        )
    if refusal.status_code is None or refusal.status_code >= 500:
        return f"The cluster could not be reached, so nothing was submitted; try again. ({refusal.error})"
    return f"The cluster refused pod '{refusal.name}' in {where}: {refusal.error}"
