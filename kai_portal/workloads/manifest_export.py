"""A job as the Kubernetes manifest KAI would schedule: the inverse of ``manifests.parse_manifest``.

One task and a gang minimum of at most 1 → a ``v1`` Pod; otherwise a ``batch/v1`` Job
with ``parallelism`` = tasks and ``kai.scheduler/batch-min-member`` = the gang minimum.
Submitting the YAML back (``submit_manifest``) gives a job with the same request.
"""

from __future__ import annotations

from typing import Any

import yaml

from kai_portal.queues.durations import format_go_duration
from kai_portal.workloads.manifest_values import (
    DURATION,
    GPU_DEVICES,
    GPU_FRACTION,
    GPU_MEMORY,
    GPU_RESOURCE,
    MIN_MEMBER,
    NODE_POOL_LABEL,
    PREEMPTIBILITY_LABEL,
    PRIORITY_LABEL,
    QUEUE_LABEL,
)
from kai_portal.workloads.models import Job

SCHEDULER_NAME = "kai-scheduler"


def _container(job: Job) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": job.image or "busybox"}
    if job.command:
        container["command"] = job.command.split()
    requests: dict[str, str] = {}
    if job.cpu_millicores:
        requests["cpu"] = f"{job.cpu_millicores}m"
    if job.memory_mib:
        requests["memory"] = f"{job.memory_mib}Mi"
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if job.gpu_count:
        resources["limits"] = {GPU_RESOURCE: str(job.gpu_count)}
    if resources:
        container["resources"] = resources
    return container


def job_manifest(job: Job) -> dict[str, Any]:
    labels = {QUEUE_LABEL: job.queue.name, PRIORITY_LABEL: job.priority_class}
    if job.node_pool is not None:
        labels[NODE_POOL_LABEL] = job.node_pool.name
    if job.preemptibility:
        labels[PREEMPTIBILITY_LABEL] = job.preemptibility
    pod_annotations: dict[str, str] = {}
    if job.gpu_fraction is not None:
        pod_annotations[GPU_FRACTION] = format(job.gpu_fraction.normalize(), "f")
    if job.gpu_memory_mib is not None:
        pod_annotations[GPU_MEMORY] = str(job.gpu_memory_mib)
    if pod_annotations and job.gpu_fraction_devices != 1:
        pod_annotations[GPU_DEVICES] = str(job.gpu_fraction_devices)
    owner_annotations: dict[str, str] = {}
    if job.duration is not None:
        owner_annotations[DURATION] = format_go_duration(job.duration)
    pod_spec: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "restartPolicy": job.restart_policy,
        "containers": [_container(job)],
    }
    metadata: dict[str, Any] = {"name": job.name}
    if job.namespace:
        metadata["namespace"] = job.namespace
    metadata["labels"] = labels
    if job.task_count == 1 and job.min_member <= 1:
        annotations = {**pod_annotations, **owner_annotations}
        if annotations:
            metadata["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    owner_annotations[MIN_MEMBER] = str(job.min_member)
    metadata["annotations"] = owner_annotations
    template: dict[str, Any] = {"spec": pod_spec}
    if pod_annotations:
        template = {"metadata": {"annotations": pod_annotations}, "spec": pod_spec}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"parallelism": job.task_count, "completions": job.task_count, "template": template},
    }


def job_yaml(job: Job) -> str:
    return yaml.safe_dump(job_manifest(job), sort_keys=False)
