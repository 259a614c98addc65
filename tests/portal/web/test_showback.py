"""Showback: GPU-hours per team and queue over a window (page and CSV), idle allocated GPUs."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from kai_portal.history.models import UsageSample
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Pod
from tests.portal import factories


@pytest.fixture
def usage(world: dict) -> Any:
    """One hour of samples a minute apart, 3 hours ago: alpha holds 2 GPUs, beta 1, research (the
    parent) 3; and one sample 10 days ago that a 7-day window leaves out."""
    start = timezone.now() - timedelta(hours=3)
    q = world["queues"]
    rows = []
    for minute in range(60):
        at = start + timedelta(minutes=minute)
        for queue, gpus in ((q["alpha"], 2), (q["beta"], 1), (q["research"], 3)):
            rows.append(UsageSample(queue=queue, resource="gpu", sampled_at=at, allocated=gpus))
    rows.append(UsageSample(queue=q["alpha"], resource="gpu", sampled_at=timezone.now() - timedelta(days=10),
                            allocated=8))  # fmt: skip
    UsageSample.objects.bulk_create(rows)
    return start


def test_gpu_hours_per_team_and_queue(world: dict, usage: Any, client_for: Any) -> None:
    response = client_for("admin").get("/showback/?preset=7d")
    report = response.context["report"]
    assert report.seconds_per_sample == 60.0  # measured from the samples, not assumed
    assert {q.queue: q.gpu_hours for q in report.queues} == {"alpha-train": 2.0, "beta-train": 1.0}
    assert dict(report.teams) == {"Alpha": 2.0, "Beta": 1.0}  # the parent queue is not counted again
    assert report.total == 3.0
    assert 'data-chart="stacked"' in response.content.decode()


def test_custom_dates_and_visibility(world: dict, usage: Any, client_for: Any) -> None:
    old_day = (timezone.localtime() - timedelta(days=10)).date()
    report = (
        client_for("admin").get(f"/showback/?preset=custom&since={old_day}&until={old_day}").context["report"]
    )
    assert [q.queue for q in report.queues] == ["alpha-train"]
    member = client_for("member").get("/showback/?preset=7d").context["report"]
    assert [q.queue for q in member.queues] == ["alpha-train"]


def test_csv_per_queue_and_period_adds_up_to_the_page(world: dict, usage: Any, client_for: Any) -> None:
    response = client_for("admin").get("/showback/showback.csv?preset=24h")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    totals: dict[str, float] = {}
    for r in rows:
        totals[r["queue"]] = totals.get(r["queue"], 0) + float(r["gpu_hours"])
    assert {k: round(v, 2) for k, v in totals.items()} == {"alpha-train": 2.0, "beta-train": 1.0}
    assert {r["team"] for r in rows} == {"Alpha", "Beta"}


def test_idle_allocated_gpus_are_bound_or_releasing_pods(world: dict, client_for: Any) -> None:
    node = factories.node("gpu-node-2", gpus=8)
    job = factories.job(world["queues"]["alpha"], "starting", gpu_count=2, task_count=2, min_member=1)
    Pod.objects.filter(job=job).update(node=node, state=PodState.BOUND)
    idle = client_for("admin").get("/showback/").context["idle"]
    assert [(r.queue, r.pods, str(r.gpus), r.states) for r in idle] == [("alpha-train", 2, "4", ["bound"])]
    Pod.objects.filter(job=job).update(state=PodState.RUNNING)
    assert client_for("admin").get("/showback/").context["idle"] == []


def test_query_count_is_fixed(
    world: dict, usage: Any, client_for: Any, django_assert_max_num_queries: Any
) -> None:
    for i in range(10):
        factories.queue(f"extra-{i}", parent=world["queues"]["research"], gpu_quota=0)
    client = client_for("admin")
    with django_assert_max_num_queries(10):
        assert client.get("/showback/?preset=30d").status_code == 200
