"""A Kubernetes manifest (a ``v1`` Pod or a ``batch/v1`` Job) with KAI's labels and
annotations, turned into a portal job.

What is read (kai-semantics §1.7):

* queue: label ``kai.scheduler/queue``, then the legacy ``runai/queue``; the
  owner's (Job) label wins over the pod template's. Required.
* GPUs, CPU and memory: the pod's request as Kubernetes counts it
  (``cluster/backends/pod_requests.py``: regular containers and sidecars add up, a plain init
  container's peak counts when larger, ``spec.overhead`` on top), from each container's
  requests (limits when no request). GPUs: ``nvidia.com/gpu``, whole devices (request and
  limit must agree); or pod annotation ``gpu-fraction`` (``0 < f <= 1``; 1 means a
  whole device) or ``gpu-memory`` (MiB of one device), with
  ``gpu-fraction-num-devices``.
* CPU and memory as Kubernetes quantities (``500m``, ``2``, ``8Gi``), stored as
  millicores and MiB, rounded up.
* priority: ``priorityClassName`` as a label or in the pod spec (one of KAI's
  built-in classes); ``kai.scheduler/preemptibility`` label.
* gang: a Pod is one task. A Job runs ``parallelism`` tasks (default 1, at
  most ``completions``); the gang minimum is annotation
  ``kai.scheduler/batch-min-member`` and defaults to 1, as KAI's pod grouper
  does for standard Jobs (each pod may start on its own).
* node pool: label ``kai.scheduler/node-pool``.
* ``restartPolicy`` (OnFailure or Never; Always counts as the default) and
  ``metadata.namespace`` are kept on the job.
* ``kai.portal/duration`` annotation: run time on the simulated cluster (Go
  duration such as ``30m``).

Every error is a ``ManifestError`` naming the manifest path that is wrong;
nothing is written until the job is valid as a whole (``submit_manifest``).

In kubernetes mode the job's pods are the manifest's own pod (template): its spec
(containers, env, tolerations, nodeSelector...), labels and annotations, with the
portal's scheduler name and labels added (``workloads/cluster_jobs.py``);
``metadata.namespace`` must be the queue's namespace. What the pod spec may ask for is the team's
pod policy (``pod_security``: Kubernetes' baseline standard by default, ``nodeName`` never).

Here: the kind, the pod (template), name, queue, pool, priority and duration, and the submit.
``manifest_values`` holds the vocabulary and the value readers; ``manifest_requests`` the
request, GPU sharing, gang and placement steps.
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from kai_portal.cluster.backends import PodTemplate
from kai_portal.nodes.models import NodePool
from kai_portal.queues.durations import parse_go_duration
from kai_portal.queues.models import Queue
from kai_portal.workloads import cluster_jobs, pod_security, submission
from kai_portal.workloads import limits as bounds
from kai_portal.workloads.choices import Preemptibility, PriorityClass, RestartPolicy
from kai_portal.workloads.manifest_requests import read_gang, read_gpu_sharing, read_placement, read_resources
from kai_portal.workloads.manifest_values import (
    DURATION,
    LEGACY_QUEUE_LABEL,
    NODE_POOL_LABEL,
    PREEMPTIBILITY_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    Lookup,
    ManifestError,
    key_path,
    load_document,
    mapping_at,
    string_map_at,
)
from kai_portal.workloads.models import Job


@dataclass
class _Source:
    """Where each job field came from, so model-level errors name a manifest path."""

    paths: dict[str, str]

    def path(self, field: str) -> str:
        return self.paths.get(field, "(manifest)")


def parse_manifest(text: str | bytes | dict[str, Any], user: Any = None) -> Job:
    """An unsaved ``Job`` from a Pod or batch/v1 Job manifest, or ``ManifestError``.

    With ``user`` the queue must be one they may submit to (``submittable_by``),
    and the job's submitter is set to them; without it any leaf queue is accepted.
    """
    job, _, _ = _parse(load_document(text), user)
    return job


def submit_manifest(
    text: str | bytes | dict[str, Any], user: Any, idempotency_key: str = ""
) -> tuple[Job, bool]:
    """Parse, validate and submit in one transaction; errors name the manifest path.

    Returns the job and whether it was created (False: the user's earlier submission
    with the same ``idempotency_key``; ``submission.KeyReused`` when that came from another
    manifest). In kubernetes mode the pods are the manifest's own pod
    spec (``cluster_jobs``); what the cluster refuses is a ``ManifestError`` when the manifest is
    at fault (400), else ``cluster_jobs.ClusterRefused`` (a clash, or the cluster unreachable)."""
    job, source, manifest = _parse(load_document(text), user)
    digest = ""
    if idempotency_key:
        digest = submission.request_digest(text if isinstance(text, str | bytes) else dict(text))
    try:
        with transaction.atomic():
            return submission.submit_once(job, idempotency_key, manifest, digest)
    except pod_security.PodPolicyRefused as exc:
        first, more = exc.violations[0], len(exc.violations) - 1
        also = f" ({more} more field{'s' * (more > 1)} refused: see problems.)" if more else ""
        message = first.rule + also
        raise ManifestError(first.path, message, [(v.path, v.rule) for v in exc.violations]) from None
    except ValidationError as exc:
        field, messages = next(iter(exc.message_dict.items()))
        raise ManifestError(source.path(field), " ".join(messages)) from None
    except cluster_jobs.ClusterRefused as exc:
        if exc.status != 400:
            raise
        path = source.path(exc.path) if exc.path in ("queue", "image") else exc.path
        raise ManifestError(path, exc.message) from None


def _parse(doc: dict[str, Any], user: Any) -> tuple[Job, _Source, cluster_jobs.Manifest]:
    """The job in ``doc``, its fields' manifest paths and its pod (template), read in the order
    the manifest is written (an error names the first wrong thing a reader meets)."""
    kind = _kind(doc)
    metadata = mapping_at(doc.get("metadata"), "metadata")
    spec = mapping_at(doc.get("spec"), "spec")
    pod = _pod_of(kind, metadata, spec)
    paths: dict[str, str] = {}
    job = Job(submitter=user if getattr(user, "is_authenticated", False) else None)
    _identity(job, metadata, pod, paths)
    _queue_and_pool(job, pod, user, paths)
    _priority(job, pod.spec, pod.path, pod.label, paths)
    _preemptibility(job, pod, paths)
    containers = pod.spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ManifestError(f"{pod.path}spec.containers", "must list at least one container")
    read_resources(job, pod.spec, pod.path, paths)
    read_gpu_sharing(job, pod.annotation, paths)
    read_gang(job, kind, spec, pod.annotation, paths)
    read_placement(job, pod.spec, pod.path)
    _duration(job, pod, paths)
    template = PodTemplate(
        spec=pod.spec,
        labels=string_map_at(pod.meta.get("labels"), f"{pod.path}metadata.labels"),
        annotations=string_map_at(pod.meta.get("annotations"), f"{pod.path}metadata.annotations"),
    )
    return job, _Source(paths), cluster_jobs.Manifest(template, pod.path)


def _kind(doc: dict[str, Any]) -> str:
    """``Pod`` (v1) or ``Job`` (batch/v1): the two kinds a manifest may be."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind == "Pod":
        if api_version != "v1":
            raise ManifestError("apiVersion", f"a Pod must have apiVersion v1 (got {api_version!r})")
    elif kind == "Job":
        if api_version != "batch/v1":
            raise ManifestError("apiVersion", f"a Job must have apiVersion batch/v1 (got {api_version!r})")
    else:
        raise ManifestError("kind", f"must be Pod (v1) or Job (batch/v1) (got {kind!r})")
    return kind


@dataclass
class _Pod:
    """The manifest's pod (a Pod itself, or a Job's template) and where its labels and
    annotations are looked up, in the order that decides which wins."""

    path: str  # "" for a Pod, "spec.template." for a Job
    meta: dict[str, Any]
    spec: dict[str, Any]
    label_sources: list[tuple[str, dict[str, str]]]
    annotation_sources: list[tuple[str, dict[str, str]]]

    def label(self, key: str) -> tuple[str, str] | None:
        return _first(self.label_sources, key)

    def annotation(self, key: str) -> tuple[str, str] | None:
        return _first(self.annotation_sources, key)


def _first(sources: list[tuple[str, dict[str, str]]], key: str) -> tuple[str, str] | None:
    for prefix, values in sources:
        if key in values:
            return key_path(prefix, key), values[key]
    return None


def _pod_of(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> _Pod:
    owner_labels = string_map_at(metadata.get("labels"), "metadata.labels")
    owner_annotations = string_map_at(metadata.get("annotations"), "metadata.annotations")
    if kind == "Pod":
        return _Pod(
            "",
            metadata,
            spec,
            [("metadata.labels", owner_labels)],
            [("metadata.annotations", owner_annotations)],
        )
    template = mapping_at(spec.get("template"), "spec.template")
    pod_meta = mapping_at(template.get("metadata"), "spec.template.metadata")
    pod_spec = mapping_at(template.get("spec"), "spec.template.spec")
    # Owner labels win over the pod template's (kai-semantics §1.7); pod annotations
    # (GPU sharing) are looked up on the template first.
    label_sources = [
        ("metadata.labels", owner_labels),
        (
            "spec.template.metadata.labels",
            string_map_at(pod_meta.get("labels"), "spec.template.metadata.labels"),
        ),
    ]
    annotation_sources = [
        (
            "spec.template.metadata.annotations",
            string_map_at(pod_meta.get("annotations"), "spec.template.metadata.annotations"),
        ),
        ("metadata.annotations", owner_annotations),
    ]
    return _Pod("spec.template.", pod_meta, pod_spec, label_sources, annotation_sources)


def _identity(job: Job, metadata: dict[str, Any], pod: _Pod, paths: dict[str, str]) -> None:
    """Name, namespace and restart policy."""
    job.name = _name(metadata)
    paths["name"] = "metadata.name"
    namespace = metadata.get("namespace", "")
    if not isinstance(namespace, str) or len(namespace) > 253:
        raise ManifestError("metadata.namespace", "must be a Kubernetes namespace name")
    job.namespace = namespace
    restart = pod.spec.get("restartPolicy")
    if restart in RestartPolicy.values:
        job.restart_policy = restart
    elif restart not in (None, "Always"):
        raise ManifestError(
            f"{pod.path}spec.restartPolicy", f"must be OnFailure, Never or Always (got {restart!r})"
        )


def _queue_and_pool(job: Job, pod: _Pod, user: Any, paths: dict[str, str]) -> None:
    found = pod.label(QUEUE_LABEL) or pod.label(LEGACY_QUEUE_LABEL)
    if found is None:
        raise ManifestError(
            key_path("metadata.labels", QUEUE_LABEL),
            f"is required (or the legacy label {LEGACY_QUEUE_LABEL})",
        )
    paths["queue"], queue_name = found
    job.queue = _queue(queue_name, paths["queue"], user)

    found = pod.label(NODE_POOL_LABEL)
    if found is not None:
        paths["node_pool"], pool_name = found
        pool = NodePool.objects.filter(name=pool_name).first()
        if pool is None:
            raise ManifestError(paths["node_pool"], f'node pool "{pool_name}" does not exist')
        # A pool other than the queue's is refused by the model (Job._take_queue_pool), at this path.
        job.node_pool = pool


def _preemptibility(job: Job, pod: _Pod, paths: dict[str, str]) -> None:
    found = pod.label(PREEMPTIBILITY_LABEL)
    if found is None:
        return
    paths["preemptibility"], value = found
    allowed = [c for c in Preemptibility.values if c]
    if value not in allowed:
        raise ManifestError(paths["preemptibility"], f"must be one of {', '.join(allowed)} (got {value!r})")
    job.preemptibility = value


def _duration(job: Job, pod: _Pod, paths: dict[str, str]) -> None:
    """``kai.portal/duration``: how long the job runs on the simulated cluster."""
    found = pod.annotation(DURATION)
    if found is None:
        return
    paths["duration"], value = found
    try:
        job.duration = parse_go_duration(value)
    except ValueError as exc:
        raise ManifestError(paths["duration"], str(exc)) from None
    problem = bounds.duration_error(job.duration)
    if problem:
        raise ManifestError(paths["duration"], problem)


def _name(metadata: dict[str, Any]) -> str:
    name, generate = metadata.get("name"), metadata.get("generateName")
    if name is None and isinstance(generate, str) and generate:
        suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        name = generate + suffix
    if not isinstance(name, str) or not name.strip():
        raise ManifestError("metadata.name", "is required (or metadata.generateName)")
    if len(name) > 253:
        raise ManifestError("metadata.name", f"must be at most 253 characters (got {len(name)})")
    return name


def _queue(name: str, path: str, user: Any) -> Queue:
    queues = Queue.objects.submittable_by(user) if user is not None else Queue.objects.leaves()
    queue = queues.filter(name=name).first()
    if queue is not None:
        return queue
    if Queue.objects.visible_to(user).filter(name=name).exists() if user is not None else False:
        raise ManifestError(path, f'queue "{name}" is not a leaf queue of your team; jobs go to leaf queues')
    raise ManifestError(path, f'queue "{name}" does not exist or is not yours')


def _priority(
    job: Job, pod_spec: dict[str, Any], pod_path: str, label: Lookup, paths: dict[str, str]
) -> None:
    found = label(PRIORITY_LABEL)
    if found is None and "priorityClassName" in pod_spec:
        found = (f"{pod_path}spec.priorityClassName", pod_spec["priorityClassName"])
    if found is None:
        return
    path, value = found
    if value not in PriorityClass.values:
        raise ManifestError(path, f"must be one of {', '.join(PriorityClass.values)} (got {value!r})")
    job.priority_class = value
    paths["priority_class"] = paths["priority"] = path


# A batch Job as a user would write it: shown on the YAML submit page and in the API schema.
EXAMPLE_MANIFEST = """apiVersion: batch/v1
kind: Job
metadata:
  name: resnet-train
  labels:
    kai.scheduler/queue: ml-train
  annotations:
    kai.scheduler/batch-min-member: "2"
spec:
  parallelism: 2
  template:
    metadata:
      annotations:
        gpu-fraction: "0.5"
    spec:
      schedulerName: kai-scheduler
      priorityClassName: train
      containers:
        - name: main
          image: nvcr.io/nvidia/pytorch:24.05-py3
          resources:
            requests: {cpu: "2", memory: 8Gi}
"""
