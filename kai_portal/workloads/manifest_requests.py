"""What each task of a manifest's job asks for and where it may run.

The pod's request (image, command, GPUs, CPU and memory as Kubernetes counts them), KAI's GPU
sharing annotations, the gang (tasks and minimum) and the placement rules (nodeSelector,
tolerations, node affinity). Each step sets its job fields and records the manifest path each came
from in ``paths``, so a later model-level error names the manifest path, not the field.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from typing import Any

from kai_portal.cluster.backends.kubernetes import (
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    node_affinity_of,
    tolerations_of,
)
from kai_portal.cluster.backends.pod_requests import Where, pod_requests
from kai_portal.workloads import limits as bounds
from kai_portal.workloads.manifest_values import (
    GPU_DEVICES,
    GPU_FRACTION,
    GPU_MEMORY,
    GPU_RESOURCE,
    MAX_TASKS,
    MIN_MEMBER,
    Lookup,
    ManifestError,
    key_path,
    mapping_at,
    quantity_at,
    shorten_value,
    string_map_at,
    whole_at,
)
from kai_portal.workloads.models import Job


def read_resources(job: Job, pod_spec: dict[str, Any], pod_path: str, paths: dict[str, str]) -> None:
    """Image and command from the first container; GPUs, CPU and memory per task as Kubernetes
    counts the pod's request (``pod_requests``: init containers, sidecars and overhead included)."""
    spec_path = f"{pod_path}spec"
    for list_name in ("containers", "initContainers"):
        items = pod_spec.get(list_name) or []
        if not isinstance(items, list):
            raise ManifestError(f"{spec_path}.{list_name}", "must be a list of containers")
        for i, container in enumerate(items):
            here = f"{spec_path}.{list_name}[{i}]"
            resources = mapping_at(mapping_at(container, here).get("resources"), f"{here}.resources")
            limits = mapping_at(resources.get("limits"), f"{here}.resources.limits")
            requests = mapping_at(resources.get("requests"), f"{here}.resources.requests")
            if GPU_RESOURCE in limits and GPU_RESOURCE in requests:
                request_path = key_path(f"{here}.resources.requests", GPU_RESOURCE)
                limit = whole_at(limits[GPU_RESOURCE], key_path(f"{here}.resources.limits", GPU_RESOURCE), 0)
                if whole_at(requests[GPU_RESOURCE], request_path, 0) != limit:
                    raise ManifestError(
                        request_path, f"must equal the limit ({limit}): Kubernetes does not overcommit GPUs"
                    )
    mapping_at(pod_spec.get("overhead"), f"{spec_path}.overhead")
    first = pod_spec["containers"][0]
    here = f"{spec_path}.containers[0]"
    image = first.get("image", "")
    if not isinstance(image, str):
        raise ManifestError(f"{here}.image", "must be a string")
    job.image = image[:500]
    paths["image"] = f"{here}.image"
    words = [*(first.get("command") or []), *(first.get("args") or [])]
    if not all(isinstance(w, str) for w in words):
        raise ManifestError(f"{here}.command", "must be a list of strings")
    job.command = " ".join(words)

    fields = {GPU_RESOURCE: "gpu_count", "cpu": "cpu_millicores", "memory": "memory_mib"}

    def read(value: Any, where: Where) -> Decimal:
        if where.containers == "overhead":
            path = key_path(f"{spec_path}.overhead", where.resource)
        else:
            container = f"{spec_path}.{where.containers}[{where.index}]"
            path = key_path(f"{container}.resources.{where.kind}", where.resource)
        paths.setdefault(fields[where.resource], path)
        if where.resource == GPU_RESOURCE:
            return Decimal(whole_at(value, path, 0))
        return quantity_at(value, path)

    requested = pod_requests(pod_spec, fields, read)
    gpus, cpu, memory = requested[GPU_RESOURCE], requested["cpu"], requested["memory"]
    path = f"{spec_path}.containers"
    job.gpu_count = int(gpus)
    job.cpu_millicores = math.ceil(cpu * 1000)
    job.memory_mib = math.ceil(memory / 2**20)
    # The model's bounds (limits.py) name the field; this names the manifest path first.
    if job.cpu_millicores > bounds.MAX_CPU_MILLICORES:
        raise ManifestError(
            paths.get("cpu_millicores", path),
            f"must be at most {bounds.MAX_CPU_MILLICORES // 1000} cores per task",
        )
    if job.memory_mib > bounds.MAX_MEMORY_MIB:
        raise ManifestError(
            paths.get("memory_mib", path), f"must be at most {bounds.MAX_MEMORY_MIB} MiB per task"
        )


def read_gpu_sharing(job: Job, annotation: Lookup, paths: dict[str, str]) -> None:
    fraction, memory = annotation(GPU_FRACTION), annotation(GPU_MEMORY)
    devices = annotation(GPU_DEVICES)
    if fraction is not None and memory is not None:
        raise ManifestError(memory[0], f"cannot be combined with {GPU_FRACTION}; request GPUs in one way")
    if (fraction is not None or memory is not None) and job.gpu_count:
        where = (fraction or memory)[0]  # type: ignore[index]
        raise ManifestError(where, f"cannot be combined with {GPU_RESOURCE} limits; request GPUs in one way")
    count = 1
    if devices is not None:
        paths["gpu_fraction_devices"] = devices[0]
        if fraction is None and memory is None:
            raise ManifestError(devices[0], f"only applies with {GPU_FRACTION} or {GPU_MEMORY}")
        count = whole_at(devices[1], devices[0], 1)
        if count > 64:
            raise ManifestError(devices[0], f"must be at most 64 (got {count})")
    if fraction is not None:
        path, text = fraction
        paths["gpu_fraction"] = path
        try:
            value = Decimal(text.strip())
        except InvalidOperation:
            raise ManifestError(path, f"must be a number between 0 and 1 (got {text!r})") from None
        if not value.is_finite() or not 0 < value <= 1:
            raise ManifestError(path, f"must be more than 0 and at most 1 (got {text!r})")
        if value != value.quantize(Decimal("0.01")):
            raise ManifestError(path, f"must have at most 2 decimals (got {text!r})")
        if value == 1:  # a whole device on each of the devices
            job.gpu_count = count
            paths["gpu_count"] = path
            return
        job.gpu_fraction = value
        job.gpu_fraction_devices = count
    if memory is not None:
        path, text = memory
        paths["gpu_memory_mib"] = path
        job.gpu_memory_mib = whole_at(text, path, 1)
        job.gpu_fraction_devices = count


def read_gang(job: Job, kind: str, spec: dict[str, Any], annotation: Lookup, paths: dict[str, str]) -> None:
    tasks = 1
    if kind == "Job":
        parallelism = spec.get("parallelism")
        completions = spec.get("completions")
        if parallelism is not None:
            tasks = whole_at(parallelism, "spec.parallelism", 1)
            paths["task_count"] = "spec.parallelism"
        if completions is not None:
            done = whole_at(completions, "spec.completions", 1)
            if parallelism is None or done < tasks:
                paths["task_count"] = "spec.completions"
            tasks = min(tasks, done) if parallelism is not None else done
        if tasks > MAX_TASKS:
            raise ManifestError(paths["task_count"], f"must be at most {MAX_TASKS} (got {tasks})")
    job.task_count = tasks
    found = annotation(MIN_MEMBER)
    if found is None:
        # KAI's pod grouper gives a standard batch Job minMember 1 unless the annotation says otherwise.
        job.min_member = 1
        return
    path, value = found
    paths["min_member"] = path
    minimum = whole_at(value, path, 0)
    if minimum > tasks:
        raise ManifestError(
            path, f"gang minimum ({minimum}) cannot be more than the number of tasks ({tasks})"
        )
    job.min_member = minimum


def read_placement(job: Job, pod_spec: dict[str, Any], pod_path: str) -> None:
    """nodeSelector, tolerations and node affinity, kept in Kubernetes' shape (as the cluster sync
    keeps them): the engine places the job's pods by them on any backend."""
    path = f"{pod_path}spec"
    job.node_selector = string_map_at(pod_spec.get("nodeSelector"), f"{path}.nodeSelector")
    tolerations = pod_spec.get("tolerations") or []
    if not isinstance(tolerations, list):
        raise ManifestError(f"{path}.tolerations", "must be a list")
    for i, t in enumerate(tolerations):
        where = f"{path}.tolerations[{i}]"
        t = mapping_at(t, where)
        operator = t.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise ManifestError(
                f"{where}.operator", f"must be Equal or Exists (got {shorten_value(operator)})"
            )
        if t.get("effect") and t.get("effect") not in TAINT_EFFECTS:
            raise ManifestError(f"{where}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
        if operator == "Equal" and not t.get("key"):
            raise ManifestError(f"{where}.key", "is required with operator Equal")
    job.tolerations = list(tolerations_of({"tolerations": tolerations}))
    affinity = mapping_at(pod_spec.get("affinity"), f"{path}.affinity")
    node_affinity = mapping_at(affinity.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    required = mapping_at(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{path}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    terms = [*(required.get("nodeSelectorTerms") or []), *(
        p.get("preference") if isinstance(p, dict) else None
        for p in node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    )]  # fmt: skip
    for term in terms:
        if not isinstance(term, dict):
            raise ManifestError(f"{path}.affinity.nodeAffinity", "terms must be mappings")
        for e in term.get("matchExpressions") or []:
            if not isinstance(e, dict) or e.get("operator") not in MATCH_OPERATORS or not e.get("key"):
                raise ManifestError(
                    f"{path}.affinity.nodeAffinity",
                    f"each expression needs a key and one of {', '.join(MATCH_OPERATORS)}"
                    f" (got {shorten_value(e)})",
                )
    job.node_affinity = node_affinity_of(pod_spec)
