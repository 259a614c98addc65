"""Resource sums printed as KAI's controllers print them (resource_sums.py)."""

from __future__ import annotations

import pytest

from kai_portal.cluster.backends.kubernetes.pod_groups import PodGroupPlan, desired_status
from kai_portal.cluster.backends.kubernetes.resource_sums import memory_quantity

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
