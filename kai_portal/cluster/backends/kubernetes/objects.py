"""Turn raw Kubernetes Node and Pod JSON into the backend's data classes.

The backend reads the API's JSON directly (not the client's models): it is
cheaper on large lists and the labels and annotations we need are plain
dicts anyway. Quantities go through `kubernetes.utils.parse_quantity`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from kubernetes.utils import parse_quantity

from ..base import (
    AppRequests,
    ForeignPod,
    GpuRequest,
    JobRef,
    NodeTaint,
    ObservedNode,
    ObservedPod,
    TaskStatus,
)
from ..pod_requests import Where, pod_requests

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
POD_GROUP_ANNOTATION = "pod-group-name"
BATCH_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"  # gang minimum, on the pod or its owner
GPU_FRACTION_ANNOTATION = "gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpu-memory"
GPU_NUM_DEVICES_ANNOTATION = "gpu-fraction-num-devices"
PRIORITY_CLASS_LABEL = "priorityClassName"
PREEMPTIBILITY_LABEL = "kai.scheduler/preemptibility"
# Set on every pod the portal creates: the job's name, and its uid (cancel() finds a job's pods
# by the uid; the sync knows a portal pod whose job row is not committed yet by it).
PORTAL_JOB_LABEL = "kai.scheduler/portal-job"
PORTAL_JOB_UID_LABEL = "kai.scheduler/portal-job-uid"
# Written by this backend at bind time (see kubernetes.py): the devices chosen.
GPU_DEVICES_ANNOTATION = "kai.scheduler/gpu-devices"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MATCH_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
HOSTNAME_LABEL = "kubernetes.io/hostname"
# A required term that matches no node: Kubernetes' reading of a term with no requirements.
MATCHES_NOTHING = [{"key": HOSTNAME_LABEL, "operator": "In", "values": []}]
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
MIB = 2**20
Json = Mapping[str, Any]


def parse_node(raw: Json, pool_label: str) -> ObservedNode:
    """Parse a Node object."""
    meta = raw.get("metadata") or {}
    labels: dict[str, str] = dict(meta.get("labels") or {})
    allocatable = (raw.get("status") or {}).get("allocatable") or {}
    conditions = {c.get("type"): c.get("status") for c in (raw.get("status") or {}).get("conditions") or []}
    return ObservedNode(
        name=meta.get("name", ""),
        pool=labels.get(pool_label),
        labels=labels,
        unschedulable=bool((raw.get("spec") or {}).get("unschedulable")),
        ready=conditions.get("Ready") == "True",
        pressure_conditions=tuple(c for c in PRESSURE_CONDITIONS if conditions.get(c) == "True"),
        gpu_count=int(_quantity(allocatable.get(GPU_RESOURCE))),
        gpu_product=labels.get(GPU_PRODUCT_LABEL),
        gpu_memory_mib=gpu_memory_from_label(labels.get(GPU_MEMORY_LABEL)),
        cpu_millis=int(_quantity(allocatable.get("cpu")) * 1000),
        memory_mib=int(_quantity(allocatable.get("memory")) // MIB),
        max_pods=int(_quantity(allocatable.get("pods"))),
        resource_version=meta.get("resourceVersion"),
        taints=tuple(
            NodeTaint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect")))
            for t in (raw.get("spec") or {}).get("taints") or []
            if t.get("key") and t.get("effect") in TAINT_EFFECTS
        ),
    )


def gpu_memory_from_label(value: str | None) -> int | None:
    """MiB per device from nvidia.com/gpu.memory (§1.4).

    Values of 2^20 or more are bytes; the result is rounded down to a multiple
    of 100 MiB. Missing or malformed means "not synced" (None).
    """
    if not value:
        return None
    try:
        amount = int(value)
    except ValueError:
        return None
    if amount >= MIB:
        amount //= MIB
    rounded = amount - amount % 100
    return rounded if rounded > 0 else None


def parse_pod(raw: Json, queue_label_keys: Sequence[str], pool_label: str | None = None) -> ObservedPod:
    """Parse a Pod object.

    KAI's node-pool label on the pod (``pool_label``) names the shard the pod asks for; the
    engine reads that as a node selector on the pool label, so it is added to the selector."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels: dict[str, str] = dict(meta.get("labels") or {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    namespace = meta.get("namespace", "")
    phase = status.get("phase") or "Pending"
    requested = requests_of(spec)
    return ObservedPod(
        namespace=namespace,
        name=meta.get("name", ""),
        uid=meta.get("uid", ""),
        node=spec.get("nodeName") or None,
        phase=phase,
        status=task_status(phase, spec, meta),
        queue=next((labels[key] for key in queue_label_keys if labels.get(key)), None),
        job=job_of(namespace, meta, annotations),
        # The pod's own class; the backend then applies KAI's grouping and defaults (owners.py).
        priority_class=labels.get(PRIORITY_CLASS_LABEL) or spec.get("priorityClassName"),
        preemptibility=_preemptibility(labels.get(PREEMPTIBILITY_LABEL)),
        gpu=gpu_request(spec, annotations, requested),
        cpu_millis=math.ceil(requested["cpu"] * 1000),
        memory_mib=math.ceil(requested["memory"] / MIB),
        memory_bytes=math.ceil(requested["memory"]),
        memory_binary=memory_is_binary(spec),
        app_requests=app_requests_of(spec),
        created_at=parse_time(meta.get("creationTimestamp")),
        deletion_timestamp=parse_time(meta.get("deletionTimestamp")),
        gpu_devices=parse_devices(annotations.get(GPU_DEVICES_ANNOTATION)),
        labels=labels,
        annotations=annotations,
        resource_version=meta.get("resourceVersion"),
        node_selector=_node_selector(spec, labels, pool_label),
        tolerations=tuple(tolerations_of(spec)),
        node_affinity=node_affinity_of(spec),
    )


def parse_foreign_pod(raw: Json, ignore: Mapping[str, str] | None = None) -> ForeignPod | None:
    """What a pod of another scheduler holds on its node; None when it holds nothing.

    A pod holds its requests from binding until it finishes (Succeeded / Failed) or is gone;
    a terminating pod still holds them. Pods carrying every label of ``ignore`` are left out
    (our own reservation pods, whose room the engine models itself)."""
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    node = spec.get("nodeName")
    phase = (raw.get("status") or {}).get("phase")
    if not node or phase in ("Succeeded", "Failed"):
        return None
    labels = meta.get("labels") or {}
    if ignore and all(labels.get(k) == v for k, v in ignore.items()):
        return None
    requested = requests_of(spec)
    return ForeignPod(
        namespace=meta.get("namespace", ""),
        name=meta.get("name", ""),
        node=str(node),
        gpus=int(requested[GPU_RESOURCE]),
        cpu_millis=math.ceil(requested["cpu"] * 1000),
        memory_mib=math.ceil(requested["memory"] / MIB),
    )


def _node_selector(spec: Json, labels: Mapping[str, str], pool_label: str | None) -> dict[str, str]:
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    if pool_label and labels.get(pool_label) and pool_label not in selector:
        selector[pool_label] = str(labels[pool_label])
    return selector


def tolerations_of(spec: Json) -> Iterable[dict[str, str]]:
    for t in spec.get("tolerations") or []:
        operator = t.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            continue  # the API server refuses others; never guess what one would mean
        yield {
            "key": str(t.get("key") or ""),
            "operator": operator,
            "value": str(t.get("value") or "") if operator == "Equal" else "",
            "effect": str(t.get("effect") or ""),
        }


def node_affinity_of(spec: Json) -> dict[str, list[Any]]:
    """spec.affinity.nodeAffinity as the portal stores it: {"required": [term, ...],
    "preferred": [{"weight", "expressions"}]}, each term a list of {key, operator, values}.

    A node matches the required part when it matches every expression of one term. ``matchFields``
    (only ``metadata.name`` exists) reads as the hostname label, which names the node."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    out: dict[str, list[Any]] = {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = [_term(term) for term in required.get("nodeSelectorTerms") or []]
        # An empty term matches nothing, and so does a required part with no terms.
        out["required"] = [term or MATCHES_NOTHING for term in terms] or [MATCHES_NOTHING]
    preferred: list[dict[str, Any]] = []
    for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
        weight = _positive_int(str(p.get("weight") or ""))  # 1..100 on a real API server
        expressions = _term(p.get("preference") or {})
        if weight and expressions:
            preferred.append({"weight": min(weight, 100), "expressions": expressions})
    if preferred:
        out["preferred"] = preferred
    return out


def _term(term: Json) -> list[dict[str, Any]]:
    def listed(key: str) -> list[Json]:
        value = term.get(key) if isinstance(term, Mapping) else None
        return [e for e in value if isinstance(e, Mapping)] if isinstance(value, list) else []

    expressions = listed("matchExpressions")
    expressions += [
        {**e, "key": HOSTNAME_LABEL} for e in listed("matchFields") if e.get("key") == "metadata.name"
    ]
    return [
        {
            "key": str(e.get("key")),
            "operator": e.get("operator"),
            "values": [str(v) for v in e.get("values") or []] if isinstance(e.get("values"), list) else [],
        }
        for e in expressions
        if e.get("key") and e.get("operator") in MATCH_OPERATORS
    ]


def task_status(phase: str, spec: Json, meta: Json) -> TaskStatus:
    """KAI's task status from the pod (§1.3); deletion wins over the phase."""
    if phase in ("Succeeded", "Failed"):
        return TaskStatus(phase)
    if meta.get("deletionTimestamp"):
        return TaskStatus.RELEASING
    if phase == "Running":
        return TaskStatus.RUNNING
    if phase == "Pending":
        if spec.get("nodeName"):
            return TaskStatus.BOUND
        if spec.get("schedulingGates"):
            return TaskStatus.GATED
        return TaskStatus.PENDING
    return TaskStatus.UNKNOWN


def job_of(namespace: str, meta: Json, annotations: Mapping[str, str]) -> JobRef:
    """Group by pod-group annotation, else the controlling owner, else the pod itself.

    This is what the pod alone tells; the Kubernetes backend replaces it with the
    top owner's pod group (owners.py), which needs reads of the owners.
    """
    pod_group = annotations.get(POD_GROUP_ANNOTATION)
    if pod_group:
        return JobRef(namespace, "PodGroup", pod_group)
    owners = meta.get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    if owner and owner.get("name"):
        return JobRef(namespace, owner.get("kind", "Owner"), owner["name"])
    return JobRef(namespace, "Pod", meta.get("name", ""))


def gpu_request(
    spec: Json, annotations: Mapping[str, str], requested: Mapping[str, Decimal] | None = None
) -> GpuRequest:
    """The pod's GPU request: whole devices as Kubernetes counts them (``requests_of``, init
    containers included), a fraction or GPU memory from KAI's annotations."""
    whole = (requested if requested is not None else requests_of(spec))[GPU_RESOURCE]
    return GpuRequest(
        whole=int(whole),
        fraction=_fraction(annotations.get(GPU_FRACTION_ANNOTATION)),
        memory_mib=_positive_int(annotations.get(GPU_MEMORY_ANNOTATION)),
        num_devices=_positive_int(annotations.get(GPU_NUM_DEVICES_ANNOTATION)) or 1,
    )


def parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def requests_of(spec: Json) -> dict[str, Decimal]:
    """Whole GPUs, CPU (cores) and memory (bytes) the pod requests, as Kubernetes counts them
    (``pod_requests``: init containers, sidecars and overhead included). A malformed quantity
    counts as 0: the API server has validated every pod it serves."""
    return pod_requests(spec, (GPU_RESOURCE, "cpu", "memory"), _read)


def app_requests_of(spec: Json) -> AppRequests:
    """The app containers' requests summed, as KAI's podgroup controller sums them
    (metadata/pod.go: ``spec.containers`` only, not Kubernetes' effective request)."""
    sums = dict.fromkeys((GPU_RESOURCE, "cpu", "memory"), Decimal(0))
    for container in spec.get("containers") or ():
        requests = (container.get("resources") or {}).get("requests") or {}
        for name in sums:
            sums[name] += _quantity(requests.get(name))
    return AppRequests(math.ceil(sums["cpu"] * 1000), math.ceil(sums["memory"]), int(sums[GPU_RESOURCE]))


def memory_is_binary(spec: Json) -> bool:
    """Whether the first container's memory request is in binary units ("256Mi", "1Gi"): KAI's
    podgroup controller sums the containers' requests as resource.Quantity, which keeps the unit
    of the first quantity summed."""
    for container in spec.get("containers") or ():
        value = ((container.get("resources") or {}).get("requests") or {}).get("memory")
        if value not in (None, ""):
            return str(value).endswith("i")
    return False


def _read(value: Any, where: Where) -> Decimal:
    return _quantity(value)


def quantity(value: str | int | float) -> Decimal:
    """A resource quantity as Kubernetes reads it ("500m", "8Gi", 2); ValueError (or TypeError,
    decimal.InvalidOperation) when it is not one."""
    return Decimal(parse_quantity(value))


def _quantity(value: Any) -> Decimal:
    if value is None or value == "":
        return Decimal(0)
    try:
        return Decimal(parse_quantity(value))
    except ValueError:
        return Decimal(0)


def _fraction(value: str | None) -> float | None:
    # Outside 0 < f <= 1 the annotation is ignored (§6).
    try:
        fraction = float(value) if value else None
    except ValueError:
        return None
    return fraction if fraction is not None and 0 < fraction <= 1 else None


def _positive_int(value: str | None) -> int | None:
    try:
        number = int(value) if value else None
    except ValueError:
        return None
    return number if number is not None and number > 0 else None


def _preemptibility(value: str | None) -> str | None:
    return value if value in ("preemptible", "non-preemptible") else None


def parse_devices(value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        return tuple(int(part) for part in value.split(",") if part.strip())
    except ValueError:
        return ()
