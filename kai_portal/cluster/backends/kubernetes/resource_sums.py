"""What a pod group's pods request and hold, summed as KAI's podgroup controller sums them.

KAI's podgroup controller (pkg/podgroupcontroller) adds the pods' requests as resource.Quantity
values and its queue controller adds the groups' sums up the queue tree; both print the totals as
resource.Quantity prints them. Here the sums are plain integers (this runs for every group every
cycle) and ``quantities`` prints them in KAI's units: ``memory_quantity`` for memory, whose unit
(``250M`` or ``256Mi``) is that of the first quantity summed, as ``Quantity.Add`` keeps it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..base import ObservedPod, TaskStatus

NON_PREEMPTIBLE_PRIORITY = 100  # KAI: a group without preemptibility is non-preemptible from here up
DEFAULT_PRIORITY = 50
GPU, GPU_MEMORY = "nvidia.com/gpu", "run.ai/gpu.memory"
FINISHED = (TaskStatus.SUCCEEDED, TaskStatus.FAILED)
# Resources as whole units: cpu in millicores, memory in bytes, GPU memory in MiB, GPUs in
# thousandths (a fraction of 0.5 is 500); BINARY_MEMORY (no resource can be named so) is present
# when the memory is written in binary units, as the first quantity summed was (resource.Quantity).
Resources = dict[str, int]
BINARY_MEMORY = "memory:binary"
DECIMAL_SUFFIXES = ("", "k", "M", "G", "T", "P", "E")
BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def preemptible(pods: Sequence[ObservedPod]) -> bool:
    """KAI's podgroup controller: the explicit preemptibility, else priority below 100."""
    first = pods[0]
    if first.preemptibility:
        return first.preemptibility == "preemptible"
    priority = first.priority if first.priority is not None else DEFAULT_PRIORITY
    return priority < NON_PREEMPTIBLE_PRIORITY


def add(total: Resources, more: Mapping[str, int]) -> Resources:
    """``more`` added into ``total``; the memory's unit stays the one summed first (as
    resource.Quantity.Add keeps the receiver's format unless it is zero)."""
    first_memory = not total.get("memory")
    for name, value in more.items():
        if name == BINARY_MEMORY:
            continue
        total[name] = total.get(name, 0) + value
    if first_memory and more.get("memory"):
        if more.get(BINARY_MEMORY):
            total[BINARY_MEMORY] = 1
        else:
            total.pop(BINARY_MEMORY, None)
    return total


def memory_quantity(value: int, binary: bool) -> str:
    """Bytes as resource.Quantity prints them: binary units when the value is a whole number of
    KiB ("256Mi"), else decimal with the largest exact power-of-1000 suffix ("250M", "1500k")."""
    suffixes, base = (BINARY_SUFFIXES, 1024) if binary and value >= 1024 else (DECIMAL_SUFFIXES, 1000)
    exponent = 0
    while value and value % base == 0 and exponent < len(suffixes) - 1:
        value //= base
        exponent += 1
    return f"{value}{suffixes[exponent]}"


def quantities(resources: Mapping[str, int]) -> dict[str, str]:
    """Resources as Kubernetes quantities, zeros left out (an empty ResourceList is omitted)."""
    out = {}
    for name, value in sorted(resources.items()):
        if not value or name == BINARY_MEMORY:
            continue
        if name == "cpu":
            out[name] = str(value // 1000) if value % 1000 == 0 else f"{value}m"
        elif name == "memory":
            out[name] = memory_quantity(value, bool(resources.get(BINARY_MEMORY)))
        elif name == GPU:
            out[name] = str(value // 1000) if value % 1000 == 0 else f"{value}m"
        else:
            out[name] = str(value)
    return out


def group_usage(pods: Sequence[ObservedPod]) -> tuple[Resources, Resources, Resources]:
    """(requested, allocated, allocated non-preemptible) of a group's pods.

    Summed in plain integers (this runs for every group every cycle: 12,500 groups of 50,000 pods
    took 0.4 s through a dict per pod)."""
    cpu = memory = gpus = gpu_memory = 0  # requested
    a_cpu = a_memory = a_gpus = 0  # allocated (GPU memory is allocated as a fraction of a GPU)
    binary: bool | None = None  # the unit of the first pod's memory (KAI lists pods by name)
    a_binary: bool | None = None
    first: str | None = None
    a_first: str | None = None
    for pod in pods:
        if pod.status in FINISHED:
            continue
        gpu, app = pod.gpu, pod.app_requests
        # KAI sums the app containers' requests only (not the init containers' maximum, nor the
        # overhead that Kubernetes' effective request adds).
        if app is not None:
            pod_cpu, pod_memory, whole = app.cpu_millis, app.memory_bytes, app.gpus
        else:
            pod_cpu, pod_memory, whole = pod.cpu_millis, pod.memory_bytes, gpu.whole
        if pod_memory and (first is None or pod.name < first):
            first, binary = pod.name, pod.memory_binary
        if pod_memory and pod.node and (a_first is None or pod.name < a_first):
            a_first, a_binary = pod.name, pod.memory_binary
        devices = gpu.num_devices if gpu.num_devices > 1 else 1
        shared = round(gpu.fraction * 1000) * devices if gpu.fraction is not None else 0
        pod_gpus = whole * 1000 + shared
        cpu += pod_cpu
        memory += pod_memory
        gpus += pod_gpus
        if gpu.memory_mib:
            gpu_memory += gpu.memory_mib * devices
        if pod.node:
            a_cpu += pod_cpu
            a_memory += pod_memory
            a_gpus += pod_gpus
    sums = (("cpu", cpu), ("memory", memory), (GPU, gpus), (GPU_MEMORY, gpu_memory), (BINARY_MEMORY, binary))
    requested = {k: int(v) for k, v in sums if v}
    a_sums = (("cpu", a_cpu), ("memory", a_memory), (GPU, a_gpus), (BINARY_MEMORY, a_binary))
    allocated = {k: int(v) for k, v in a_sums if v}
    return requested, allocated, ({} if preemptible(pods) else dict(allocated))
