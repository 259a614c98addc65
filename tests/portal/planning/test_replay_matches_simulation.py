"""The planner's replay of a seeded week against the engine's simulator called directly.

The direct simulation below is built from the same history by hand (the nodes, the queue tree and
each job's arrival, size and run time as the rows hold them), not through the planner's code, and
run with ``scheduler.simulate`` twice: today's quotas and the swapped ones. The planner's stored
numbers must be those numbers, and each team's wait must move the way the direct run says."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import scheduler
from kai_portal.planning.models import PlanRun
from kai_portal.planning.replay import PlanInputs, step_seconds, until_seconds
from kai_portal.planning.tasks import run_plan
from kai_portal.workloads.models import Job
from tests.portal.planning.seeded_week import seed_week

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _gpu(q: Any, quota: float) -> scheduler.QueueResource:
    return scheduler.QueueResource(
        quota=quota, limit=float(q.gpu_limit), over_quota_weight=float(q.gpu_over_quota_weight)
    )


def _direct(week: dict[str, Any], quotas: dict[str, float]) -> scheduler.SimResult:
    nodes = [scheduler.Node(name=f"plan-node-{i}", gpus=8, gpu_memory_mib=81_920, cpu_millis=64_000,
                            memory_mib=262_144, pool="default") for i in (1, 2)]  # fmt: skip
    queues = []
    for position, q in enumerate((week["dept"], week["alpha"], week["beta"])):
        resources = {
            "gpu": _gpu(q, quotas.get(q.name, float(q.gpu_quota))),
            "cpu": scheduler.QueueResource(quota=float(q.cpu_quota), limit=float(q.cpu_limit),
                                           over_quota_weight=float(q.cpu_over_quota_weight)),
            "memory": scheduler.QueueResource(quota=float(q.memory_quota), limit=float(q.memory_limit),
                                              over_quota_weight=float(q.memory_over_quota_weight)),
        }  # fmt: skip
        queues.append(scheduler.Queue(name=q.name, parent=q.parent.name if q.parent else None,
                                      priority=q.priority, resources=resources, created_index=position,
                                      pool="default"))  # fmt: skip
    arrivals = [
        scheduler.Arrival(
            submit_s=(j.created_at - week["start"]).total_seconds(),
            queue=j.queue.name,
            tasks=j.task_count,
            gpu=float(j.gpu_count),
            duration_s=(j.finished_at - j.started_at).total_seconds(),
            priority=j.priority,
            name=f"{j.queue.name}/{j.name}#{j.pk}",
            min_available=j.min_member,
        )
        for j in Job.objects.select_related("queue").order_by("created_at", "pk")
    ]
    return scheduler.simulate_over_time(
        scheduler.Snapshot(nodes=nodes, queues=queues, jobs=[]),
        arrivals,
        step_seconds(week["start"], week["end"]),
        config=scheduler.Config(now=week["start"]),
        until_s=until_seconds(week["start"], week["end"]),
    )


@pytest.mark.django_db
def test_the_replay_with_a_changed_quota_moves_each_teams_wait_as_a_direct_simulation_does() -> None:
    week = seed_week(NOW)
    assert week["jobs"] > 150
    plan = PlanRun.objects.create(inputs=PlanInputs(week["start"], week["end"], week["swap"], None).to_json())
    run_plan(plan.pk)  # the Celery task's body, as the worker runs it
    plan.refresh_from_db()
    assert plan.status == PlanRun.Status.SUCCEEDED, plan.error
    assert plan.progress == 100
    out = plan.outputs
    assert out["jobs"] == week["jobs"] and out["left_out"] == {}

    today = _direct(week, {})
    changed = _direct(week, {"alpha": 12.0, "beta": 4.0})
    for setting, direct in (("today", today), ("changed", changed)):
        waits = direct.wait_stats()
        for queue in ("alpha", "beta"):
            stored = out[setting]["queues"][queue]
            assert stored["median_wait_s"] == waits[queue]["median_s"], (setting, queue)
            assert stored["p95_wait_s"] == waits[queue]["p95_s"], (setting, queue)
            assert stored["jobs"] == waits[queue]["jobs"] and stored["started"] == waits[queue]["started"]
            served = sum(j.gpu_seconds for j in direct.jobs.values() if j.queue == queue) / 3600
            assert stored["gpu_hours"] == round(served, 2)
            assert stored["evictions"] == sum(1 for e in direct.evictions if e.queue == queue)
        assert out[setting]["cluster"]["utilisation"] == round(direct.utilisation(), 4)

    # The direction the direct simulation predicts: alpha (quota 4 -> 12) waits less, beta more.
    d_today, d_changed = today.wait_stats(), changed.wait_stats()
    for queue, team in (("alpha", "Alpha"), ("beta", "Beta")):
        direct_move = d_changed[queue]["median_s"] - d_today[queue]["median_s"]  # type: ignore[operator]
        planned_move = (
            out["changed"]["teams"][team]["median_wait_s"] - out["today"]["teams"][team]["median_wait_s"]
        )
        assert direct_move != 0 and (planned_move > 0) == (direct_move > 0), (team, direct_move, planned_move)
    assert out["changed"]["teams"]["Alpha"]["median_wait_s"] < out["today"]["teams"]["Alpha"]["median_wait_s"]
    assert out["changed"]["teams"]["Beta"]["median_wait_s"] > out["today"]["teams"]["Beta"]["median_wait_s"]


@pytest.mark.django_db
def test_extra_nodes_join_the_changed_replay_only() -> None:
    from kai_portal.planning.replay import ExtraNodes, setup

    week = seed_week(NOW)
    extra = ExtraNodes(count=2, gpus_per_node=8, gpu_model="NVIDIA A100-SXM4-80GB", gpu_memory_mib=81_920,
                       pool="default")  # fmt: skip
    s = setup(PlanInputs(week["start"], week["end"], {}, extra), NOW)
    assert sum(n.gpus for n in s.today.nodes) == 16
    assert sum(n.gpus for n in s.changed.nodes) == 32
    assert {n.pool for n in s.changed.nodes} == {"default"}
