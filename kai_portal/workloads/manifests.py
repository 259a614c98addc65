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
"""

from __future__ import annotations

import json
import math
import secrets
import string
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction
from kubernetes.utils import parse_quantity

from kai_portal.cluster.backends import PodTemplate
from kai_portal.cluster.backends.kubernetes_objects import (
    MATCH_OPERATORS,
    TAINT_EFFECTS,
    node_affinity_of,
    tolerations_of,
)
from kai_portal.cluster.backends.pod_requests import Where, pod_requests
from kai_portal.core import safe_yaml
from kai_portal.nodes.models import NodePool
from kai_portal.queues.durations import parse_go_duration
from kai_portal.queues.models import Queue
from kai_portal.workloads import cluster_jobs, pod_security, submission
from kai_portal.workloads import limits as bounds
from kai_portal.workloads.choices import Preemptibility, PriorityClass, RestartPolicy
from kai_portal.workloads.models import Job

QUEUE_LABEL = "kai.scheduler/queue"
LEGACY_QUEUE_LABEL = "runai/queue"
NODE_POOL_LABEL = "kai.scheduler/node-pool"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
PRIORITY_LABEL = "priorityClassName"
GPU_FRACTION = "gpu-fraction"
GPU_MEMORY = "gpu-memory"
GPU_DEVICES = "gpu-fraction-num-devices"
MIN_MEMBER = "kai.scheduler/batch-min-member"
DURATION = "kai.portal/duration"
GPU_RESOURCE = "nvidia.com/gpu"
MAX_TASKS = bounds.MAX_TASKS
# Quantities beyond this are refused before any arithmetic (a 1e999999999 overflows Decimal).
_MAX_QUANTITY = Decimal(2**63)


class ManifestError(Exception):
    """A manifest that cannot become a job: ``path`` says where, ``message`` what is wrong."""

    def __init__(self, path: str, message: str, problems: list[tuple[str, str]] | None = None) -> None:
        # Both may quote the user's input: never echo it back unbounded.
        self.path, self.message = safe_yaml.shorten(path, 200), safe_yaml.shorten(message)
        # Every (path, message) when there is more than one thing wrong (the pod policy's).
        self.problems = [(safe_yaml.shorten(p, 200), safe_yaml.shorten(m)) for p, m in problems or []] or [
            (self.path, self.message)
        ]
        super().__init__(f"{path}: {message}")


class ManifestTooLarge(ManifestError):
    """A manifest over ``MANIFEST_MAX_BYTES`` (the API answers 413)."""


@dataclass
class _Source:
    """Where each job field came from, so model-level errors name a manifest path."""

    paths: dict[str, str]

    def path(self, field: str) -> str:
        return self.paths.get(field, "(manifest)")


def _key(prefix: str, key: str) -> str:
    return f'{prefix}["{key}"]'


def _load(text: str | bytes | dict[str, Any]) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise ManifestError("(body)", "is not UTF-8 text") from None
    if not text.strip():
        raise ManifestError("(body)", "is empty; send a Pod or batch/v1 Job manifest as YAML or JSON")
    try:
        docs = [d for d in safe_yaml.load_all(text, safe_yaml.manifest_bounds()) if d is not None]
    except yaml.YAMLError as exc:
        raise ManifestError("(body)", f"is not valid YAML or JSON: {exc}") from None
    except safe_yaml.TooLargeYamlError as exc:
        raise ManifestTooLarge("(body)", f"{exc} (MANIFEST_MAX_BYTES)") from None
    except safe_yaml.UnsafeYamlError as exc:
        raise ManifestError("(body)", str(exc)) from None
    if len(docs) != 1:
        raise ManifestError("(body)", f"must hold exactly one manifest (found {len(docs)})")
    if not isinstance(docs[0], dict):
        raise ManifestError("(body)", f"must be a mapping (got {type(docs[0]).__name__})")
    return docs[0]


def _mapping(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ManifestError(path, f"must be a mapping (got {type(value).__name__})")
    return value


def _string_map(value: Any, path: str) -> dict[str, str]:
    mapping = _mapping(value, path)
    for key, item in mapping.items():
        if not isinstance(item, str):
            shown = json.dumps(item, default=str)
            raise ManifestError(_key(path, str(key)), f"must be a string (got {shown})")
    return mapping


def _whole(value: Any, path: str, minimum: int) -> int:
    if isinstance(value, bool):
        raise ManifestError(path, f"must be a whole number (got {value!r})")
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ManifestError(path, f"must be a whole number (got {_short(value)})") from None
    if not number.is_finite() or number != number.to_integral_value():
        raise ManifestError(path, f"must be a whole number (got {_short(value)})")
    if number < minimum:
        raise ManifestError(path, f"must be at least {minimum} (got {_short(value)})")
    if number > MAX_TASKS * 1000:
        raise ManifestError(path, f"is too large (got {_short(value)})")
    return int(number)


def _quantity(value: Any, path: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ManifestError(path, f"must be a quantity such as 500m or 8Gi (got {value!r})")
    try:
        number = Decimal(parse_quantity(value))
    except (ValueError, TypeError, InvalidOperation):
        raise ManifestError(path, f"must be a quantity such as 500m or 8Gi (got {value!r})") from None
    if not number.is_finite() or number < 0:
        raise ManifestError(path, f"must be a non-negative quantity (got {_short(value)})")
    if number > _MAX_QUANTITY:
        raise ManifestError(path, f"is larger than any node (got {_short(value)})")
    return number


def _short(value: Any, limit: int = 80) -> str:
    """``repr`` of user input, cut short: an error never echoes a huge value back."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def parse_manifest(text: str | bytes | dict[str, Any], user: Any = None) -> Job:
    """An unsaved ``Job`` from a Pod or batch/v1 Job manifest, or ``ManifestError``.

    With ``user`` the queue must be one they may submit to (``submittable_by``),
    and the job's submitter is set to them; without it any leaf queue is accepted.
    """
    job, _, _ = _parse(_load(text), user)
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
    job, source, manifest = _parse(_load(text), user)
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
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if kind == "Pod":
        if api_version != "v1":
            raise ManifestError("apiVersion", f"a Pod must have apiVersion v1 (got {api_version!r})")
    elif kind == "Job":
        if api_version != "batch/v1":
            raise ManifestError("apiVersion", f"a Job must have apiVersion batch/v1 (got {api_version!r})")
    else:
        raise ManifestError("kind", f"must be Pod (v1) or Job (batch/v1) (got {kind!r})")

    metadata = _mapping(doc.get("metadata"), "metadata")
    spec = _mapping(doc.get("spec"), "spec")
    owner_labels = _string_map(metadata.get("labels"), "metadata.labels")
    owner_annotations = _string_map(metadata.get("annotations"), "metadata.annotations")
    if kind == "Pod":
        pod_path, pod_meta, pod_spec = "", metadata, spec
        label_sources = [("metadata.labels", owner_labels)]
        annotation_sources = [("metadata.annotations", owner_annotations)]
    else:
        template = _mapping(spec.get("template"), "spec.template")
        pod_path = "spec.template."
        pod_meta = _mapping(template.get("metadata"), "spec.template.metadata")
        pod_spec = _mapping(template.get("spec"), "spec.template.spec")
        # Owner labels win over the pod template's (kai-semantics §1.7); pod annotations
        # (GPU sharing) are looked up on the template first.
        label_sources = [
            ("metadata.labels", owner_labels),
            (
                "spec.template.metadata.labels",
                _string_map(pod_meta.get("labels"), "spec.template.metadata.labels"),
            ),
        ]
        annotation_sources = [
            (
                "spec.template.metadata.annotations",
                _string_map(pod_meta.get("annotations"), "spec.template.metadata.annotations"),
            ),
            ("metadata.annotations", owner_annotations),
        ]

    def label(key: str) -> tuple[str, str] | None:
        for prefix, labels in label_sources:
            if key in labels:
                return _key(prefix, key), labels[key]
        return None

    def annotation(key: str) -> tuple[str, str] | None:
        for prefix, values in annotation_sources:
            if key in values:
                return _key(prefix, key), values[key]
        return None

    paths: dict[str, str] = {}
    job = Job(submitter=user if getattr(user, "is_authenticated", False) else None)
    job.name = _name(metadata)
    paths["name"] = "metadata.name"
    namespace = metadata.get("namespace", "")
    if not isinstance(namespace, str) or len(namespace) > 253:
        raise ManifestError("metadata.namespace", "must be a Kubernetes namespace name")
    job.namespace = namespace
    restart = pod_spec.get("restartPolicy")
    if restart in RestartPolicy.values:
        job.restart_policy = restart
    elif restart not in (None, "Always"):
        raise ManifestError(
            f"{pod_path}spec.restartPolicy", f"must be OnFailure, Never or Always (got {restart!r})"
        )

    found = label(QUEUE_LABEL) or label(LEGACY_QUEUE_LABEL)
    if found is None:
        raise ManifestError(
            _key("metadata.labels", QUEUE_LABEL), f"is required (or the legacy label {LEGACY_QUEUE_LABEL})"
        )
    paths["queue"], queue_name = found
    job.queue = _queue(queue_name, paths["queue"], user)

    found = label(NODE_POOL_LABEL)
    if found is not None:
        paths["node_pool"], pool_name = found
        pool = NodePool.objects.filter(name=pool_name).first()
        if pool is None:
            raise ManifestError(paths["node_pool"], f'node pool "{pool_name}" does not exist')
        # A pool other than the queue's is refused by the model (Job._take_queue_pool), at this path.
        job.node_pool = pool

    _priority(job, pod_spec, pod_path, label, paths)
    found = label(PREEMPTIBILITY_LABEL)
    if found is not None:
        paths["preemptibility"], value = found
        allowed = [c for c in Preemptibility.values if c]
        if value not in allowed:
            raise ManifestError(
                paths["preemptibility"], f"must be one of {', '.join(allowed)} (got {value!r})"
            )
        job.preemptibility = value

    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ManifestError(f"{pod_path}spec.containers", "must list at least one container")
    _resources(job, pod_spec, pod_path, paths)
    _gpu_sharing(job, annotation, paths)
    _gang(job, kind, spec, annotation, paths)
    _placement(job, pod_spec, pod_path)

    found = annotation(DURATION)
    if found is not None:
        paths["duration"], value = found
        try:
            job.duration = parse_go_duration(value)
        except ValueError as exc:
            raise ManifestError(paths["duration"], str(exc)) from None
        problem = bounds.duration_error(job.duration)
        if problem:
            raise ManifestError(paths["duration"], problem)
    pod = PodTemplate(
        spec=pod_spec,
        labels=_string_map(pod_meta.get("labels"), f"{pod_path}metadata.labels"),
        annotations=_string_map(pod_meta.get("annotations"), f"{pod_path}metadata.annotations"),
    )
    return job, _Source(paths), cluster_jobs.Manifest(pod, pod_path)


def _placement(job: Job, pod_spec: dict[str, Any], pod_path: str) -> None:
    """nodeSelector, tolerations and node affinity, kept in Kubernetes' shape (as the cluster sync
    keeps them): the engine places the job's pods by them on any backend."""
    path = f"{pod_path}spec"
    job.node_selector = _string_map(pod_spec.get("nodeSelector"), f"{path}.nodeSelector")
    tolerations = pod_spec.get("tolerations") or []
    if not isinstance(tolerations, list):
        raise ManifestError(f"{path}.tolerations", "must be a list")
    for i, t in enumerate(tolerations):
        where = f"{path}.tolerations[{i}]"
        t = _mapping(t, where)
        operator = t.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            raise ManifestError(f"{where}.operator", f"must be Equal or Exists (got {_short(operator)})")
        if t.get("effect") and t.get("effect") not in TAINT_EFFECTS:
            raise ManifestError(f"{where}.effect", f"must be one of {', '.join(TAINT_EFFECTS)}")
        if operator == "Equal" and not t.get("key"):
            raise ManifestError(f"{where}.key", "is required with operator Equal")
    job.tolerations = list(tolerations_of({"tolerations": tolerations}))
    affinity = _mapping(pod_spec.get("affinity"), f"{path}.affinity")
    node_affinity = _mapping(affinity.get("nodeAffinity"), f"{path}.affinity.nodeAffinity")
    required = _mapping(
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
                    f"each expression needs a key and one of {', '.join(MATCH_OPERATORS)} (got {_short(e)})",
                )
    job.node_affinity = node_affinity_of(pod_spec)


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


def _priority(job: Job, pod_spec: dict[str, Any], pod_path: str, label: Any, paths: dict[str, str]) -> None:
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


def _resources(job: Job, pod_spec: dict[str, Any], pod_path: str, paths: dict[str, str]) -> None:
    """Image and command from the first container; GPUs, CPU and memory per task as Kubernetes
    counts the pod's request (``pod_requests``: init containers, sidecars and overhead included)."""
    spec_path = f"{pod_path}spec"
    for list_name in ("containers", "initContainers"):
        items = pod_spec.get(list_name) or []
        if not isinstance(items, list):
            raise ManifestError(f"{spec_path}.{list_name}", "must be a list of containers")
        for i, container in enumerate(items):
            here = f"{spec_path}.{list_name}[{i}]"
            resources = _mapping(_mapping(container, here).get("resources"), f"{here}.resources")
            limits = _mapping(resources.get("limits"), f"{here}.resources.limits")
            requests = _mapping(resources.get("requests"), f"{here}.resources.requests")
            if GPU_RESOURCE in limits and GPU_RESOURCE in requests:
                request_path = _key(f"{here}.resources.requests", GPU_RESOURCE)
                limit = _whole(limits[GPU_RESOURCE], _key(f"{here}.resources.limits", GPU_RESOURCE), 0)
                if _whole(requests[GPU_RESOURCE], request_path, 0) != limit:
                    raise ManifestError(
                        request_path, f"must equal the limit ({limit}): Kubernetes does not overcommit GPUs"
                    )
    _mapping(pod_spec.get("overhead"), f"{spec_path}.overhead")
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
            path = _key(f"{spec_path}.overhead", where.resource)
        else:
            container = f"{spec_path}.{where.containers}[{where.index}]"
            path = _key(f"{container}.resources.{where.kind}", where.resource)
        paths.setdefault(fields[where.resource], path)
        if where.resource == GPU_RESOURCE:
            return Decimal(_whole(value, path, 0))
        return _quantity(value, path)

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


def _gpu_sharing(job: Job, annotation: Any, paths: dict[str, str]) -> None:
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
        count = _whole(devices[1], devices[0], 1)
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
        job.gpu_memory_mib = _whole(text, path, 1)
        job.gpu_fraction_devices = count


def _gang(job: Job, kind: str, spec: dict[str, Any], annotation: Any, paths: dict[str, str]) -> None:
    tasks = 1
    if kind == "Job":
        parallelism = spec.get("parallelism")
        completions = spec.get("completions")
        if parallelism is not None:
            tasks = _whole(parallelism, "spec.parallelism", 1)
            paths["task_count"] = "spec.parallelism"
        if completions is not None:
            done = _whole(completions, "spec.completions", 1)
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
    minimum = _whole(value, path, 0)
    if minimum > tasks:
        raise ManifestError(
            path, f"gang minimum ({minimum}) cannot be more than the number of tasks ({tasks})"
        )
    job.min_member = minimum


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
