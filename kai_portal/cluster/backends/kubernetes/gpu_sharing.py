"""Shared GPUs on a real cluster: KAI's reservation-pod protocol, our code.

A pod that asks for part of a GPU (``gpu-fraction`` / ``gpu-memory``) gets no
``nvidia.com/gpu`` from the device plugin itself. So, as KAI's binder does:

- every shared device is a *GPU group* (a fresh id when the first fractional
  pod lands on it); one *reservation pod* per group, in namespace
  ``kai-resource-reservation``, requests ``nvidia.com/gpu: 1`` and is bound to
  the node, so the device plugin hands it one physical GPU; a bind waits a few
  seconds for it, then the pod stays pending (reason: waiting for the
  reservation pod) and the next cycle retries with the same group, so a slow
  device plugin never holds the cycle up; after the allocation timeout the
  reservation is deleted and the reason names the device plugin;
- the reservation pod's entrypoint (``python -m kai_portal.cluster.reservation``, reservation.py) writes
  the GPU it got into its annotation ``run.ai/reserve_for_gpu_index``;
- before a sharing pod is bound, it is labelled with its group
  (``runai-gpu-group``, or ``runai-gpu-group/<group>`` per device for a
  multi-device fraction) and its ConfigMaps, which the admission webhook
  (``kai_portal.cluster.webhook``) referenced when the pod was created, are
  filled: ``NVIDIA_VISIBLE_DEVICES`` (the reservation pods' GPUs),
  ``GPU_PORTION`` and, for a ``gpu-memory`` pod, ``CUDA_DEVICE_MEMORY_LIMIT``;
- a reservation pod is deleted once no live pod carries its group.

Names on the wire are KAI's (checked against KAI's ``pkg/binder`` and
``pkg/common/constants``), so KAI users' manifests and tools work unchanged.
Nothing here falls back silently: where the webhook did not mutate the pod or
the reservation namespace is missing, :class:`GpuSharingUnavailable` says so
and the pod is not bound.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..base import Bind, ObservedNode, ObservedPod, OperationResult
from .client import release

RESERVATION_NAMESPACE = "kai-resource-reservation"
RESERVATION_APP_LABEL = "app"
RESERVATION_APP = "kai-resource-reservation"
RESERVATION_POD_PREFIX = "gpu-reservation"
RESERVATION_CONTAINER = "resource-reservation"
RESERVATION_SERVICE_ACCOUNT = "kai-resource-reservation"
# Ours, not KAI's: which scheduler made a reservation pod, so two schedulers sharing a cluster
# (KAI and the portal, or two portals) never delete each other's reservations.
RESERVED_BY_LABEL = "kai.scheduler/reserved-by"
GPU_INDEX_ANNOTATION = "run.ai/reserve_for_gpu_index"
GPU_GROUP_LABEL = "runai-gpu-group"
MULTI_GPU_GROUP_PREFIX = GPU_GROUP_LABEL + "/"
CONFIGMAP_ANNOTATION = "runai/shared-gpu-configmap"
CONTAINER_NAME_ANNOTATION = "gpu-fraction-container-name"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
GPU_PORTION = "GPU_PORTION"
NUM_OF_GPUS = "RUNAI_NUM_OF_GPUS"  # KAI keeps it for older workloads
MEMORY_LIMIT = "CUDA_DEVICE_MEMORY_LIMIT"
GPU_RESOURCE = "nvidia.com/gpu"
# Failures of one call that are not the API's answer (connection refused, a broken body).
OTHER_CALL_ERRORS = (urllib3.exceptions.HTTPError, OSError, ValueError)


class GpuSharingUnavailable(Exception):
    """The cluster cannot run this shared-GPU pod as it is; the message says what is missing."""


@dataclass(frozen=True)
class ContainerRef:
    """The container that receives the shared GPU: KAI's fraction container."""

    init: bool
    index: int
    name: str

    @property
    def suffix(self) -> str:
        return f"i{self.index}" if self.init else str(self.index)


def fraction_container(spec: dict[str, Any], annotations: dict[str, str]) -> ContainerRef:
    """``gpu-fraction-container-name`` (init containers first, as KAI looks), else the first."""
    wanted = annotations.get(CONTAINER_NAME_ANNOTATION)
    containers = spec.get("containers") or []
    if wanted is None:
        if not containers:
            raise ValueError("the pod has no containers")
        return ContainerRef(False, 0, str(containers[0].get("name", "")))
    for init, key in ((True, "initContainers"), (False, "containers")):
        for index, container in enumerate(spec.get(key) or []):
            if container.get("name") == wanted:
                return ContainerRef(init, index, wanted)
    raise ValueError(f"container {wanted!r} named by {CONTAINER_NAME_ANNOTATION} is not in the pod")


def capabilities_configmap(prefix: str, ref: ContainerRef) -> str:
    return f"{prefix}-{ref.suffix}"


def env_configmap(prefix: str, ref: ContainerRef) -> str:
    return f"{capabilities_configmap(prefix, ref)}-evar"


def group_labels(pod_labels: dict[str, str]) -> set[str]:
    """GPU groups a pod is labelled with (one, or one per device of a multi-device fraction)."""
    groups = {v for k, v in pod_labels.items() if k.startswith(MULTI_GPU_GROUP_PREFIX)}
    if GPU_GROUP_LABEL in pod_labels:
        groups.add(pod_labels[GPU_GROUP_LABEL])
    return groups


def reservation_pod_name(node: str, group: str) -> str:
    """One name per (node, group), so two creates for a group collide instead of taking two GPUs."""
    digest = hashlib.sha256(f"{node}/{group}".encode()).hexdigest()[:16]
    return f"{RESERVATION_POD_PREFIX}-{digest}"


def _alive(pod: ObservedPod) -> bool:
    return pod.deletion_timestamp is None and pod.phase not in ("Succeeded", "Failed")


class GpuSharing:
    """The binder's shared-GPU steps for one Kubernetes backend."""

    def __init__(
        self,
        core: client.CoreV1Api,
        *,
        scheduler_name: str = "kai-scheduler",
        namespace: str = RESERVATION_NAMESPACE,
        image: str = "kai-portal:latest",
        command: tuple[str, ...] = ("python", "-m", "kai_portal.cluster.reservation"),
        allocation_timeout_seconds: float = 60.0,
        bind_wait_seconds: float = 5.0,
        runtime_class: str | None = None,
    ) -> None:
        self.core = core
        self.scheduler_name = scheduler_name
        self.namespace = namespace
        self.image = image
        self.command = list(command)
        self.allocation_timeout_seconds = allocation_timeout_seconds
        # A bind waits this long for a new reservation pod, then the pod stays pending (with the
        # reason) and the next cycle tries again with the same group: the cycle is not held up
        # for the device plugin. After allocation_timeout_seconds the reservation is given up.
        self.bind_wait_seconds = bind_wait_seconds
        self.runtime_class = runtime_class
        # Groups whose reservation pod has not reported its GPU yet: (node, device) -> (group,
        # monotonic time it was made). Kept across cycles so a retry reuses the reservation.
        self._pending: dict[tuple[str, int], tuple[str, float]] = {}
        # (node, device index) -> group, from the observed pods and this cycle's binds.
        self._groups: dict[tuple[str, int], str] = {}
        # Groups given to pods in the current and previous apply: their labels may not have
        # reached the watch yet, so garbage collection must not take their reservation pods.
        self._recent: set[str] = set()
        self._previous: set[str] = set()

    # ----- per cycle ---------------------------------------------------------

    def start_cycle(
        self, pods: Iterable[ObservedPod], on_nodes: Callable[[str], bool] | None = None
    ) -> list[OperationResult]:
        """Learn the groups of bound pods; delete reservation pods no live pod uses.

        ``on_nodes``: only reservation pods on the nodes it accepts are collected (a pool's
        scheduler, shards: another pool's scheduler may have made one a moment ago for a bind
        this one does not know of)."""
        self._previous, self._recent = self._recent, set()
        self._groups = {}
        alive: set[str] = set()
        for pod in pods:
            groups = group_labels(pod.labels)
            if not groups or not _alive(pod):
                continue
            alive |= groups
            if pod.node is None:
                continue
            ordered = self._ordered_groups(pod)
            for device, group in zip(pod.gpu_devices, ordered, strict=False):
                self._groups[(pod.node, device)] = group
        now = time.monotonic()
        for key, (group, since) in list(self._pending.items()):
            # Taken by a bound pod since, or abandoned (no bind came back to give it up itself).
            if key in self._groups or now - since > 2 * self.allocation_timeout_seconds:
                del self._pending[key]
                continue
            self._groups[key] = group
            alive.add(group)
        return self._collect_garbage(alive | self._previous, on_nodes)

    @staticmethod
    def _ordered_groups(pod: ObservedPod) -> list[str]:
        """A pod's groups in the order of its devices: the group label order we wrote them in."""
        if GPU_GROUP_LABEL in pod.labels:
            return [pod.labels[GPU_GROUP_LABEL]]
        order = pod.annotations.get("kai.scheduler/gpu-groups", "")
        listed = [g for g in order.split(",") if g]
        return listed or sorted(group_labels(pod.labels))

    def _collect_garbage(
        self, alive: set[str], on_nodes: Callable[[str], bool] | None = None
    ) -> list[OperationResult]:
        try:
            selector = f"{RESERVATION_APP_LABEL}={RESERVATION_APP},{RESERVED_BY_LABEL}={self.scheduler_name}"
            listed: Any = self.core.list_namespaced_pod(
                self.namespace, label_selector=selector, _preload_content=False
            )
            reservations: list[dict[str, Any]] = json.loads(listed.data).get("items") or []
        except ApiException as error:
            if error.status == 404:
                return []
            failed = OperationResult(
                "reservation-gc", self.namespace, "*", False, str(error.reason), error.status
            )
            return [failed]
        except OTHER_CALL_ERRORS as error:  # the cycle goes on; collection is retried next time
            return [OperationResult("reservation-gc", self.namespace, "*", False, str(error))]
        results = []
        for pod in reservations:
            meta = pod.get("metadata") or {}
            name = str(meta.get("name"))
            group = (meta.get("labels") or {}).get(GPU_GROUP_LABEL)
            if group in alive or meta.get("deletionTimestamp") is not None:
                continue
            if on_nodes is not None and not on_nodes(str((pod.get("spec") or {}).get("nodeName") or "")):
                continue
            try:
                self._delete(name)
                results.append(OperationResult("reservation-delete", self.namespace, name, True))
            except OTHER_CALL_ERRORS as error:
                results.append(OperationResult("reservation-delete", self.namespace, name, False, str(error)))
            except ApiException as error:
                if error.status != 404:
                    results.append(
                        OperationResult(
                            "reservation-delete", self.namespace, name, False, str(error.reason),
                            error.status,
                        )
                    )  # fmt: skip
        return results

    # ----- per bind ----------------------------------------------------------

    def prepare(self, bind: Bind, observed: ObservedPod, node: ObservedNode | None = None) -> dict[str, str]:
        """Reserve the bind's devices and fill the pod's ConfigMaps; return the annotations to
        carry on the Binding. Raises GpuSharingUnavailable or ApiException."""
        pod = self._read(bind.pod, bind.namespace)
        if pod is None:
            raise GpuSharingUnavailable(f"pod {bind.namespace}/{bind.pod} no longer exists")
        meta = pod.get("metadata") or {}
        annotations: dict[str, str] = meta.get("annotations") or {}
        prefix = annotations.get(CONFIGMAP_ANNOTATION)
        if not prefix:
            raise GpuSharingUnavailable(
                f"GPU sharing is not set up: pod {bind.namespace}/{bind.pod} was not mutated by the "
                f"GPU-sharing admission webhook (no {CONFIGMAP_ANNOTATION} annotation); register "
                "the portal's MutatingWebhookConfiguration (kai-portal-gpu-sharing) and re-create the pod"
            )
        self._require_namespace()
        try:
            ref = fraction_container(pod.get("spec") or {}, annotations)
        except ValueError as error:
            raise GpuSharingUnavailable(str(error)) from None
        if not bind.gpu_devices:
            raise GpuSharingUnavailable("no GPU device was chosen for a shared-GPU pod")
        groups = [self._group(bind.node, device) for device in bind.gpu_devices]
        gpu_ids = [
            self._reserve(bind.node, device, group, pod)
            for device, group in zip(bind.gpu_devices, groups, strict=True)
        ]
        for device in bind.gpu_devices:
            self._pending.pop((bind.node, device), None)
        self._label(bind, groups)
        device_memory = node.gpu_memory_mib if node is not None else None
        self._fill_configmaps(bind, pod, prefix, ref, gpu_ids, observed, device_memory)
        return {"kai.scheduler/gpu-groups": ",".join(groups)}

    def _require_namespace(self) -> None:
        try:
            self.core.read_namespace(self.namespace)
        except ApiException as error:
            if error.status == 404:
                raise GpuSharingUnavailable(
                    f"GPU sharing is not set up: the reservation namespace {self.namespace} does not exist "
                    "(apply deploy/rbac/kai-resource-reservation.yaml or install the Helm chart)"
                ) from None
            raise

    def _group(self, node: str, device: int) -> str:
        group = self._groups.get((node, device))
        if group is None:
            group = str(uuid.uuid4())
            self._groups[(node, device)] = group
            self._pending[(node, device)] = (group, time.monotonic())
        self._recent.add(group)
        return group

    def _reserve(self, node: str, device: int, group: str, source: dict[str, Any]) -> str:
        """The physical GPU of a group: its reservation pod's, creating the pod when missing."""
        name = reservation_pod_name(node, group)
        existing = self._read(name, self.namespace)
        meta = (existing or {}).get("metadata") or {}
        if existing is None or meta.get("deletionTimestamp") is not None:
            if existing is not None:  # an old one of this name is going away: wait for it
                self._wait_gone(name)
            self._create_reservation(name, node, group, source)
        elif (meta.get("annotations") or {}).get(GPU_INDEX_ANNOTATION):
            return str(meta["annotations"][GPU_INDEX_ANNOTATION])
        since = self._pending.get((node, device), (group, time.monotonic()))[1]
        return self._wait_for_gpu(name, node, device, since)

    def _read(self, name: str, namespace: str) -> dict[str, Any] | None:
        """A pod as plain JSON, or None when it does not exist."""
        try:
            response: Any = self.core.read_namespaced_pod(name, namespace, _preload_content=False)
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        pod: dict[str, Any] = json.loads(response.data)
        return pod

    def _delete(self, name: str) -> None:
        release(
            self.core.delete_namespaced_pod(
                name, self.namespace, grace_period_seconds=0, _preload_content=False
            )
        )

    def _create_reservation(self, name: str, node: str, group: str, source: dict[str, Any]) -> None:
        field_env = [
            {"name": var, "valueFrom": {"fieldRef": {"fieldPath": path}}}
            for var, path in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"))
        ]
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {
                    RESERVATION_APP_LABEL: RESERVATION_APP,
                    GPU_GROUP_LABEL: group,
                    RESERVED_BY_LABEL: self.scheduler_name,
                },
                # Cluster autoscalers must not drain a node from under a shared GPU.
                "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            },
            "spec": {
                "nodeName": node,
                "serviceAccountName": RESERVATION_SERVICE_ACCOUNT,
                # The sharing pod's tolerations, so a tainted GPU node takes the reservation too.
                "tolerations": (source.get("spec") or {}).get("tolerations") or [],
                "containers": [
                    {
                        "name": RESERVATION_CONTAINER,
                        "image": self.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": self.command,
                        "env": field_env,
                        "resources": {"limits": {GPU_RESOURCE: "1"}, "requests": {GPU_RESOURCE: "1"}},
                    }
                ],
            },
        }
        if self.runtime_class:
            body["spec"]["runtimeClassName"] = self.runtime_class
        try:
            release(
                self.core.create_namespaced_pod(
                    self.namespace, _model(client.V1Pod, body), _preload_content=False
                )
            )
        except ApiException as error:
            if error.status != 409:  # 409: a concurrent bind made it first; use that one
                raise

    def _wait_gone(self, name: str) -> None:
        deadline = time.monotonic() + self.bind_wait_seconds
        while time.monotonic() < deadline:
            if self._read(name, self.namespace) is None:
                return
            time.sleep(0.2)
        raise GpuSharingUnavailable(
            f"reservation pod {self.namespace}/{name} is still terminating; the bind is retried next cycle"
        )

    def _wait_for_gpu(self, name: str, node: str, device: int, since: float) -> str:
        """Wait a little for the reservation pod to report its GPU; give up on it after the
        allocation timeout (counted from its creation)."""
        deadline = min(time.monotonic() + self.bind_wait_seconds, since + self.allocation_timeout_seconds)
        while True:
            pod = self._read(name, self.namespace)
            if pod is None:
                raise GpuSharingUnavailable(f"reservation pod {self.namespace}/{name} was deleted")
            gpu = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_INDEX_ANNOTATION)
            if gpu:
                return str(gpu)
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            waited = time.monotonic() - since
            if waited < self.allocation_timeout_seconds:
                raise GpuSharingUnavailable(
                    f"waiting for reservation pod {self.namespace}/{name} on node {node} to report its GPU "
                    f"({waited:.0f}s so far); the bind is retried next cycle"
                )
            self._pending.pop((node, device), None)
            with contextlib.suppress(ApiException):
                self._delete(name)
            raise GpuSharingUnavailable(
                f"reservation pod {self.namespace}/{name} on node {node} did not report its GPU "
                f"({GPU_INDEX_ANNOTATION}) within {self.allocation_timeout_seconds:g}s: is the NVIDIA "
                "device plugin running there?"
            )

    def _label(self, bind: Bind, groups: list[str]) -> None:
        if len(groups) == 1:
            labels = {GPU_GROUP_LABEL: groups[0]}
        else:
            labels = {MULTI_GPU_GROUP_PREFIX + g: g for g in groups}
        self.core.patch_namespaced_pod(bind.pod, bind.namespace, {"metadata": {"labels": labels}})

    def _fill_configmaps(
        self,
        bind: Bind,
        pod: dict[str, Any],
        prefix: str,
        ref: ContainerRef,
        gpu_ids: list[str],
        observed: ObservedPod,
        device_memory: int | None,
    ) -> None:
        meta = pod.get("metadata") or {}
        owner = [{"apiVersion": "v1", "kind": "Pod", "name": meta.get("name"), "uid": meta.get("uid")}]
        data = {VISIBLE_DEVICES: ",".join(gpu_ids)}
        portion = bind.gpu_fraction
        if portion is None and observed.gpu.fraction is not None:
            portion = observed.gpu.fraction
        if portion is None and observed.gpu.memory_mib and device_memory:
            # A gpu-memory pod's portion of the device, as KAI reports it (two decimals, rounded up).
            portion = -(-observed.gpu.memory_mib * 100 // device_memory) / 100
        if portion is not None:
            data[GPU_PORTION] = f"{portion:g}"
            data[NUM_OF_GPUS] = f"{portion:g}"
        if observed.gpu.memory_mib is not None and observed.gpu.fraction is None:
            # KAI writes the limit as "<MiB>m" (its HAMi plugin); the request is per device.
            data[MEMORY_LIMIT] = f"{observed.gpu.memory_mib}m"
        self._upsert_configmap(bind.namespace, capabilities_configmap(prefix, ref), data, owner)
        self._upsert_configmap(bind.namespace, env_configmap(prefix, ref), {}, owner)

    def _upsert_configmap(
        self, namespace: str, name: str, data: dict[str, str], owner: list[dict[str, Any]]
    ) -> None:
        body = {"metadata": {"name": name, "namespace": namespace, "ownerReferences": owner}, "data": data}
        try:
            release(
                self.core.create_namespaced_config_map(
                    namespace, _model(client.V1ConfigMap, body), _preload_content=False
                )
            )
        except ApiException as error:
            if error.status != 409:
                raise
            self.core.patch_namespaced_config_map(name, namespace, body)


def _model(kind: Any, body: dict[str, Any]) -> Any:
    """The client's model of a plain body (its create calls are typed for models)."""
    model = kind.from_dict(body)
    if model is None:
        raise ValueError(f"empty {kind.__name__} body")
    return model
