"""Fixtures: a Kubernetes API emulator on a real port and a backend talking to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .emulator import KubeApiEmulator, running_emulator


@pytest.fixture
def emulator_and_url() -> Iterator[tuple[KubeApiEmulator, str]]:
    with running_emulator() as pair:
        yield pair


@pytest.fixture
def emulator(emulator_and_url: tuple[KubeApiEmulator, str]) -> KubeApiEmulator:
    return emulator_and_url[0]


@pytest.fixture
def api_client(emulator_and_url: tuple[KubeApiEmulator, str]) -> Iterator[client.ApiClient]:
    api = client.ApiClient(client.Configuration(host=emulator_and_url[1]))
    yield api
    api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    """A second client, standing in for users and kubelets changing the cluster."""
    return client.CoreV1Api(api_client)


@pytest.fixture
def backend(api_client: client.ApiClient) -> KubernetesBackend:
    return KubernetesBackend(api_client=api_client)


def make_node(core: client.CoreV1Api, name: str, gpus: int = 8, labels: dict[str, str] | None = None,
              **status: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": status.pop("spec", {}),
        "status": {
            "allocatable": {"nvidia.com/gpu": str(gpus), "cpu": "64", "memory": "512Gi", "pods": "110"},
            "conditions": status.pop("conditions", [{"type": "Ready", "status": "True"}]),
        },
    }
    node = client.V1Node.from_dict(body)
    assert node is not None
    core.create_node(node, _preload_content=False)


def make_pod(core: client.CoreV1Api, name: str, namespace: str = "team-a", *,
             scheduler: str = "kai-scheduler", labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, gpus: int = 0,
             requests: dict[str, str] | None = None, **extra: Any) -> None:
    resources: dict[str, Any] = {"requests": requests or {}}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels or {},
                                "annotations": annotations or {}}
    metadata.update(extra.pop("metadata", {}))
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"schedulerName": scheduler,
                 "containers": [{"name": "main", "image": "busybox", "resources": resources}],
                 **extra.pop("spec", {})},
        "status": extra.pop("status", {"phase": "Pending"}),
    }
    pod = client.V1Pod.from_dict(body)
    assert pod is not None
    core.create_namespaced_pod(namespace, pod, _preload_content=False)
