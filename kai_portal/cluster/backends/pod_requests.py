"""A pod's effective request per resource, counted as Kubernetes counts it.

One rule for every path that turns a pod spec into a request: a manifest submitted in the
portal (YAML page, API, CLI) and a pod read from the cluster. It is Kubernetes'
``PodRequests`` (``k8s.io/component-helpers/resource``, the scheduler's and the kubelet's
reading; KEP-753 for sidecars):

* regular containers run together: their requests add up;
* a sidecar (an init container with ``restartPolicy: Always``) starts before the regular
  containers and keeps running: it adds to them, and to every init container after it;
* a plain init container runs alone, after the sidecars declared before it have started: while
  it runs the pod holds its request plus theirs;
* the pod's request is the larger of the two (running and the peak of any init step), per
  resource, plus ``spec.overhead`` (the RuntimeClass's cost of running the pod).

So an init container that asks for 8 GPUs makes a pod of 8 GPUs even when its regular
containers ask for none: the kubelet hands those devices to the pod.

A container's request for a resource is its ``requests`` entry, else its ``limits`` entry: the
API server defaults a missing request to the limit (for extended resources such as
``nvidia.com/gpu`` the two must be equal, and a limit alone is the usual way to ask).
Pod-level ``spec.resources`` (a beta feature) is not read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

Json = Mapping[str, Any]


@dataclass(frozen=True)
class Where:
    """Where a quantity sits in the pod spec, so a caller can name it in an error."""

    containers: str  # "containers", "initContainers" or "overhead"
    index: int  # the container's index (-1 for overhead)
    kind: str  # "requests", "limits" or "" (overhead)
    resource: str


# Reads one quantity; a caller that validates raises with the ``Where`` in its message.
Reader = Callable[[Any, Where], Decimal]


def pod_requests(spec: Json, resources: Iterable[str], read: Reader) -> dict[str, Decimal]:
    """The pod's effective request for each of ``resources`` (0 when nothing asks for it)."""
    names = tuple(resources)
    total = dict.fromkeys(names, Decimal(0))
    for i, container in enumerate(_list(spec.get("containers"))):
        _add(total, container_requests(container, names, read, Where("containers", i, "", "")))
    sidecars = dict.fromkeys(names, Decimal(0))  # sidecars started so far
    init_peak = dict.fromkeys(names, Decimal(0))
    for i, container in enumerate(_list(spec.get("initContainers"))):
        asked = container_requests(container, names, read, Where("initContainers", i, "", ""))
        if isinstance(container, Mapping) and container.get("restartPolicy") == "Always":
            _add(total, asked)
            _add(sidecars, asked)
            step = sidecars
        else:
            step = {name: asked[name] + sidecars[name] for name in names}
        for name in names:
            init_peak[name] = max(init_peak[name], step[name])
    overhead = spec.get("overhead")
    overhead = overhead if isinstance(overhead, Mapping) else {}
    for name in names:
        total[name] = max(total[name], init_peak[name])
        if name in overhead:
            total[name] += read(overhead[name], Where("overhead", -1, "", name))
    return total


def container_requests(
    container: Any, resources: Iterable[str], read: Reader, where: Where
) -> dict[str, Decimal]:
    """One container's request per resource: ``requests``, else ``limits`` (Kubernetes' defaulting)."""
    box = container.get("resources") if isinstance(container, Mapping) else None
    box = box if isinstance(box, Mapping) else {}
    requests, limits = box.get("requests"), box.get("limits")
    requests = requests if isinstance(requests, Mapping) else {}
    limits = limits if isinstance(limits, Mapping) else {}
    result: dict[str, Decimal] = {}
    for name in resources:
        kind, source = ("requests", requests) if name in requests else ("limits", limits)
        found = name in source
        result[name] = (
            read(source[name], Where(where.containers, where.index, kind, name)) if found else Decimal(0)
        )
    return result


def _add(into: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, amount in more.items():
        into[name] += amount


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
