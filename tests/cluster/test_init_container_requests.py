"""Pods read from the real API server ask what Kubernetes counts (issue 26): an init container's
GPUs, a sidecar's, and a limit the API server defaulted into the request."""

from __future__ import annotations

from typing import Any

from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import Cluster, Nodes, pod_body


def _container(name: str, sidecar: bool = False, **resources: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def test_init_containers_and_sidecars_count_as_kubernetes_counts_them(
    cluster: Cluster, namespace: str, nodes: Nodes, scheduler_name: str, backend: KubernetesBackend
) -> None:
    core = cluster.core
    # The pod: 8 GPUs in an init container, none in the containers.
    core.create_namespaced_pod(namespace, pod_body(
        "init-gpus", scheduler_name, requests={"cpu": "500m"},
        initContainers=[_container("fetch", limits={"nvidia.com/gpu": "8"})],
    ))  # fmt: skip
    # A sidecar (runs with the containers) started before a plain init container (adds to its peak).
    core.create_namespaced_pod(namespace, pod_body(
        "sidecar", scheduler_name, gpus=1, requests={"cpu": "2"},
        initContainers=[
            _container("mesh", sidecar=True, requests={"cpu": "1"}, limits={"nvidia.com/gpu": "1"}),
            _container("warm", requests={"cpu": "2500m"}),
        ],
    ))  # fmt: skip

    pods = backend.observe().pods

    init_gpus = pods[namespace, "init-gpus"]
    assert (init_gpus.gpu.whole, init_gpus.cpu_millis) == (8, 500)
    sidecar = pods[namespace, "sidecar"]
    assert (sidecar.gpu.whole, sidecar.cpu_millis) == (2, 3500)
