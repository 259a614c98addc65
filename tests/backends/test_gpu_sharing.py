"""GPU-sharing pieces that need no cluster: names, group labels, and an unreachable API."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes.gpu_sharing import (
    GpuSharing,
    fraction_container,
    group_labels,
    reservation_pod_name,
)
from kai_portal.cluster.backends.kubernetes.reservation import visible_gpu


def test_reservation_pod_names_are_fixed_per_node_and_group_and_valid() -> None:
    name = reservation_pod_name("node-1", "3f0c")
    assert name == reservation_pod_name("node-1", "3f0c") != reservation_pod_name("node-2", "3f0c")
    assert name.startswith("gpu-reservation-") and len(name) <= 63


def test_group_labels_single_and_multi_device() -> None:
    assert group_labels({"runai-gpu-group": "a", "x": "y"}) == {"a"}
    assert group_labels({"runai-gpu-group/a": "a", "runai-gpu-group/b": "b"}) == {"a", "b"}
    assert group_labels({}) == set()


def test_fraction_container_is_named_or_first() -> None:
    spec = {"initContainers": [{"name": "init"}], "containers": [{"name": "a"}, {"name": "b"}]}
    assert fraction_container(spec, {}).index == 0
    ref = fraction_container(spec, {"gpu-fraction-container-name": "init"})
    assert (ref.init, ref.index, ref.suffix) == (True, 0, "i0")
    with pytest.raises(ValueError, match="'c'"):
        fraction_container(spec, {"gpu-fraction-container-name": "c"})


@pytest.mark.parametrize("value", ["", "all", "GPU-a,GPU-b", "none"])
def test_the_entrypoint_wants_exactly_one_gpu(value: str) -> None:
    with pytest.raises(SystemExit, match="expected exactly one GPU"):
        visible_gpu({"NVIDIA_VISIBLE_DEVICES": value})


def test_an_unreachable_api_server_is_a_reported_failure_not_an_exception() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    configuration = client.Configuration(host=f"http://127.0.0.1:{port}")
    configuration.retries = 0
    with client.ApiClient(configuration) as api:
        [result] = GpuSharing(client.CoreV1Api(api)).start_cycle([])
    assert (result.operation, result.ok) == ("reservation-gc", False)
    assert result.error
