"""Kubernetes JSON in the backend's terms (backends/kubernetes/objects.py): quantities as the API server
reads them (the portal's manifest checks use the same function) and a node's scheduling view."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kai_portal.cluster.backends.kubernetes import quantity
from kai_portal.cluster.backends.kubernetes.objects import parse_node


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("8Gi", Decimal(8 * 2**30)),
        ("2", Decimal(2)),
        (3, Decimal(3)),
        ("1e3", Decimal(1000)),
    ],
)
def test_a_quantity_reads_as_kubernetes_reads_it(text: str | int, value: Decimal) -> None:
    assert quantity(text) == value


@pytest.mark.parametrize("text", ["eight", "8GB", "", "1.5.2"])
def test_what_is_no_quantity_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        quantity(text)


def test_a_node_is_its_allocatable_its_pool_label_and_whether_it_takes_pods() -> None:
    raw = {
        "metadata": {"name": "gpu-1", "resourceVersion": "7",
                     "labels": {"kai.scheduler/node-pool": "a100", "nvidia.com/gpu.product": "A100",
                                "nvidia.com/gpu.memory": "40536"}},
        "spec": {"unschedulable": True, "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "512Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }  # fmt: skip

    node = parse_node(raw, "kai.scheduler/node-pool")

    assert (node.name, node.pool, node.gpu_count, node.gpu_product) == ("gpu-1", "a100", 8, "A100")
    assert (node.cpu_millis, node.memory_mib, node.max_pods) == (96_000, 512 * 1024, 110)
    assert node.gpu_memory_mib == 40_500  # rounded down to 100 MiB
    assert node.ready and node.unschedulable and not node.schedulable
    assert [(t.key, t.effect) for t in node.taints] == [("gpu", "NoSchedule")]
