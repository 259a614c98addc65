"""Resource sums printed as KAI's controllers print them (resource_sums.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kai_portal.cluster.backends.kubernetes.objects import parse_pod
from kai_portal.cluster.backends.kubernetes.pod_groups import PodGroupPlan, desired_status
from kai_portal.cluster.backends.kubernetes.resource_sums import GPU, group_usage, memory_quantity, quantities

from .owner_json import NS
from .test_pod_groups import NOW, POOL, observed


@pytest.mark.parametrize(
    ("bytes_", "binary", "printed"),
    [
        (250_000_000, False, "250M"),  # cpu-only-pod.yaml's 250M, which the portal once wrote as 239Mi
        (262_144_000, True, "250Mi"),
        (262_144_000, False, "262144k"),
        (250_000_000, True, "250000000"),  # binary, but no whole KiB: digits, as Quantity prints it
        (1000, True, "1k"),  # under 1Ki a binary quantity prints in decimal
        (1_500_000, False, "1500k"),
        (2**30, True, "1Gi"),
    ],
)
def test_memory_is_printed_as_resource_quantity_prints_it(bytes_: int, binary: bool, printed: str) -> None:
    assert memory_quantity(bytes_, binary) == printed


def test_memory_sums_keep_the_unit_of_the_first_pod_by_name() -> None:
    """KAI sums a group's pods in the order it lists them (by name): "250M" then "256Mi" prints in
    decimal units; the group's name-first pod decides, whatever order the cache holds them in."""
    pods = [
        observed("b", memory_bytes=256 * 2**20, memory_binary=True),
        observed("a", memory_bytes=250_000_000, memory_binary=False),
    ]
    status = desired_status(PodGroupPlan(NS, "g", pods), None, None, POOL, NOW)
    assert status["resourcesStatus"]["requested"] == {"memory": str(250_000_000 + 256 * 2**20)}
    alone = desired_status(PodGroupPlan(NS, "g", pods[:1]), None, None, POOL, NOW)
    assert alone["resourcesStatus"]["requested"] == {"memory": "256Mi"}


def test_a_groups_sums_count_the_app_containers_only_as_kais_podgroup_controller_does() -> None:
    """metadata/pod.go sums ``spec.containers``' requests: an init container asking more, a
    sidecar (init, restartPolicy Always) and the pod's overhead are left out, though Kubernetes'
    effective request (which the engine schedules by) counts them."""
    raw = {
        "metadata": {"namespace": NS, "name": "train-0", "uid": "u1"},
        "spec": {
            "schedulerName": "kai-scheduler",
            "nodeName": "n1",
            "overhead": {"cpu": "250m", "memory": "64Mi"},
            "initContainers": [
                {
                    "name": "fetch",
                    "resources": {"requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}},
                },
                {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            ],
            "containers": [
                {
                    "name": "main",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}},
                },
                {"name": "log", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}},
            ],
        },
        "status": {"phase": "Running"},
    }
    pod = replace(parse_pod(raw, ("kai.scheduler/queue",)), priority=50)
    # The effective request, which the engine schedules by: max(init 4, app 1.5 + sidecar 0.1) + 0.25.
    assert (pod.cpu_millis, pod.gpu.whole) == (4250, 2)
    requested, allocated, _ = group_usage([pod])
    app = {"cpu": "1500m", "memory": "1280Mi", GPU: "1"}
    assert quantities(requested) == quantities(allocated) == app
    status = desired_status(PodGroupPlan(NS, "g", [pod]), None, None, POOL, NOW)
    assert status["resourcesStatus"]["requested"] == app
