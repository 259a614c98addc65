"""Nodes and node pools page: per node GPUs allocated/total, each device's share and its pods,
product and memory, cordon state; per pool allocation over time from the cycle's pool samples."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from kai_portal.nodes.models import Node, PoolUsageSample
from kai_portal.scheduling.cycle import run_scheduling_cycle
from tests.portal import factories
from tests.portal.scheduling.conftest import free_cycle_lock  # noqa: F401  (fixture)


@pytest.fixture
def bound(world: dict) -> dict:
    """Two alpha jobs sharing gpu0 of gpu-node-1 (0.5 + 0.25) and beta's whole-GPU job, all bound."""
    alpha = world["queues"]["alpha"]
    half = factories.job(
        alpha, "half", gpu_count=0, gpu_fraction=Decimal("0.5"), submitter=world["users"]["member"]
    )
    quarter = factories.job(alpha, "quarter", gpu_count=0, gpu_fraction=Decimal("0.25"))
    run_scheduling_cycle(now=timezone.now())
    return {"half": half, "quarter": quarter}


def test_node_rows_show_device_shares_pods_and_totals(world: dict, bound: dict, client_for: Any) -> None:
    response = client_for("member").get("/cluster/nodes/")
    assert response.status_code == 200
    row = response.context["rows"][0]
    assert row.node.name == "gpu-node-1" and len(row.devices) == 8
    # alpha-job and beta-job hold one whole GPU each; the two fractions share a device.
    assert row.gpus_allocated == Decimal("2.75")
    shared = [d for d in row.devices if len(d.pods) == 2]
    assert len(shared) == 1 and shared[0].pct == 75
    assert sorted(p.name for p in shared[0].pods) == ["half-0", "quarter-0"]
    html = response.content.decode()
    assert "NVIDIA A100-SXM4-80GB (80 GiB)" in html and "2.75 / 8" in html
    # beta's pod is not named to an alpha member.
    names = [p.name for d in row.devices for p in d.pods]
    assert "beta-job-0" not in names and "(another team's pod)" in names
    assert "beta-job-0" in client_for("admin").get("/cluster/nodes/").content.decode()


def test_cordoned_node_and_pool_filter(world: dict, client_for: Any) -> None:
    factories.node("cpu-1", pool="cpu", gpus=0, schedulable=False)
    response = client_for("member").get("/cluster/nodes/?pool=cpu")
    assert [r.node.name for r in response.context["rows"]] == ["cpu-1"]
    assert "cordoned" in response.content.decode()


def test_each_cycle_writes_pool_samples_and_the_page_charts_them(
    world: dict, bound: dict, client_for: Any
) -> None:
    sample = PoolUsageSample.objects.get(pool__name="default")
    assert (sample.gpus_total, sample.gpus_allocated) == (Decimal("8.00"), Decimal("2.75"))
    Node.objects.filter(name="gpu-node-1").update(schedulable=False)
    run_scheduling_cycle(now=timezone.now())
    assert PoolUsageSample.objects.filter(pool__name="default").latest("sampled_at").gpus_total == 0
    response = client_for("member").get("/cluster/nodes/?window=24h")
    charts = response.context["charts"]
    assert [c["pool"] for c in charts] == ["default"]
    assert charts[0]["data"]["allocated"] == [2.75]  # both samples fall in one hour bucket (average)
    assert 'data-testid="pool-chart"' in response.content.decode()


@pytest.mark.parametrize("nodes", [1, 20])
def test_query_count_does_not_grow_with_nodes(
    world: dict, bound: dict, client_for: Any, django_assert_max_num_queries: Any, nodes: int
) -> None:
    for i in range(nodes):
        factories.node(f"extra-{i}", gpus=2)
    client = client_for("member")
    with django_assert_max_num_queries(10):
        assert client.get("/cluster/nodes/").status_code == 200


def test_a_nodes_taints_and_other_schedulers_pods_are_shown(world: dict, client_for: Any) -> None:
    """Issue 16: what another scheduler's pods hold on a node, and its taints, as the engine sees them."""
    Node.objects.filter(name="gpu-node-1").update(
        external_gpus=6, external_pods=2, external_cpu_millicores=1500, external_memory_mib=1024,
        taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
    )  # fmt: skip

    html = client_for("member").get("/cluster/nodes/").content.decode()

    assert "other schedulers' pods: 2 pods, 6 GPUs, 1500m CPU, 1024 MiB" in html
    assert "<code>dedicated=ml:NoSchedule</code>" in html
