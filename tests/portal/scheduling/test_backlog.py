"""A queue's large backlog is not expanded task by task, and the decisions stay KAI's (issue 26).

The same rows are read twice: with the backlog bounds raised past everything (every pod given to
the engine, as before) and at small bounds (``scheduling/backlog.py`` cuts jobs and leaves
jobs out). The engine's decisions on what both list must be the same, and the queues' requests
and fair shares too (the unlisted work still counts).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

import scheduler
from kai_portal.history.models import Decision, JobMessage
from kai_portal.previews import forecast_store
from kai_portal.scheduling.backlog import NOT_CONSIDERED
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories
from tests.portal.scheduling.conftest import T0

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_teams(department):  # type: ignore[no-untyped-def]
    big = factories.queue("big", parent=department, team=factories.team("big"), gpu_quota=4)
    other = factories.queue("other", parent=department, team=factories.team("other"), gpu_quota=4)
    factories.node("n1", gpus=8)
    return big, other


def _both(settings):  # type: ignore[no-untyped-def]
    """The engine's input and result with every pod listed, then with the backlog bounded."""
    settings.CYCLE_QUEUE_DEPTH, settings.CYCLE_QUEUE_TASKS = 10**9, 10**9
    whole = build_snapshot(T0)
    whole_result = scheduler.run_cycle(whole.snapshot, whole.config)
    settings.CYCLE_QUEUE_DEPTH, settings.CYCLE_QUEUE_TASKS = 3, 50
    bounded = build_snapshot(T0)
    return whole, whole_result, bounded, scheduler.run_cycle(bounded.snapshot, bounded.config)


def _placed(result: scheduler.CycleResult) -> dict[str, tuple[str | None, tuple[int, ...]]]:
    return {a.key: (a.node, a.gpu_devices) for a in result.allocations}


def test_a_job_of_many_tasks_is_listed_up_to_what_the_pool_could_hold_and_decides_the_same(
    settings, two_teams
) -> None:  # type: ignore[no-untyped-def]
    big, other = two_teams
    factories.job(big, "flood", task_count=2_000, min_member=1)
    factories.job(other, "theirs", task_count=2)

    whole, whole_result, bounded, result = _both(settings)

    flood = next(j for j in bounded.snapshot.jobs if j.name == "flood")
    assert len(flood.tasks) == 9 and flood.more_pending == 1_991  # 8 GPUs in the pool, plus one
    assert len(next(j for j in whole.snapshot.jobs if j.name == "flood").tasks) == 2_000
    assert _placed(result) == _placed(whole_result) and len(_placed(result)) == 8
    assert result.job_messages == whole_result.job_messages
    for queue in ("big", "other"):
        assert result.queues[queue].requested == whole_result.queues[queue].requested
        assert result.queues[queue].fair_share == whole_result.queues[queue].fair_share
    assert result.queues["big"].requested["gpu"] == 2_000
    for name, outcome in result.tasks.items():
        assert outcome.reason == whole_result.tasks[name].reason


def test_jobs_past_the_depth_that_could_not_start_are_left_out_with_their_request_counted(
    settings, two_teams
) -> None:  # type: ignore[no-untyped-def]
    big, other = two_teams
    for i in range(20):
        factories.job(big, f"one-{i:02d}")
    factories.job(other, "theirs", task_count=2)

    whole, whole_result, bounded, result = _both(settings)

    listed = sorted(j.name for j in bounded.snapshot.jobs if j.queue == "big")
    # The 8 GPUs of the pool hold 8 of them at most: the first 8 in job order (age) are considered.
    assert listed == [f"one-{i:02d}" for i in range(8)]
    assert sum(n for _task, n in next(q for q in bounded.snapshot.queues if q.name == "big").unlisted) == 12
    assert _placed(result) == _placed(whole_result)
    for queue in ("big", "other"):
        assert result.queues[queue].requested == whole_result.queues[queue].requested
        assert result.queues[queue].fair_share == whole_result.queues[queue].fair_share


def test_jobs_of_one_second_are_considered_in_podgroup_name_order_as_the_engine_takes_them(
    settings, two_teams
) -> None:  # type: ignore[no-untyped-def]
    """Twenty jobs created in one second whose PodGroup names sort against their names: the
    backlog considers the 8 the engine would take first (KAI's tie-break), not the first 8 names."""
    big, other = two_teams
    for i in range(20):
        job = factories.job(big, f"one-{i:02d}")
        one_second = T0 - timedelta(minutes=1)
        Job.objects.filter(pk=job.pk).update(created_at=one_second, pod_group_name=f"pg-{19 - i:02d}")
    factories.job(other, "theirs", task_count=2)

    whole, whole_result, bounded, result = _both(settings)

    listed = sorted(j.name for j in bounded.snapshot.jobs if j.queue == "big")
    assert listed == [f"one-{i:02d}" for i in range(12, 20)]
    assert _placed(result) == _placed(whole_result)
    assert {a.job.rsplit("/", 1)[-1] for a in result.allocations} >= {f"one-{i:02d}" for i in range(16, 20)}


def test_the_loop_writes_the_unlisted_pods_reasons_once_and_no_decision_per_pod(  # type: ignore[no-untyped-def]
    settings, loop, two_teams
) -> None:
    settings.CYCLE_QUEUE_DEPTH, settings.CYCLE_QUEUE_TASKS = 3, 50
    big, other = two_teams
    flood = factories.job(big, "flood", task_count=500, min_member=1)
    late = [factories.job(big, f"late-{i}", task_count=4, min_member=4) for i in range(5)]
    theirs = factories.job(other, "theirs", task_count=2)

    first = loop.run()

    assert first.status == "succeeded", first.error
    assert first.counters["backlog_tasks_not_listed"] == 491
    # Considered: flood, late-0 and late-1 (the depth, 3); their next steps (1 + 4 + 4 GPUs) fill
    # the pool's 8 GPUs, so late-2..4 are left out.
    assert first.counters["backlog_jobs_not_considered"] == 3
    left = late[2:]
    theirs.refresh_from_db()
    assert theirs.state == "running"  # another team's job starts in the first cycle
    flood.refresh_from_db()
    hidden = Pod.objects.filter(job=flood, state="pending", index__gte=9)
    assert hidden.count() == 491
    assert set(hidden.values_list("reason", flat=True)) == {flood.message or "Unable to schedule pod"}
    assert not Decision.objects.filter(pod__in=hidden).exists()
    for job in left:
        job.refresh_from_db()
        assert job.message.startswith(f"{NOT_CONSIDERED}: queue 'big' has more pending work ahead")
        assert set(job.pods.values_list("reason", flat=True)) == {job.message}
    assert JobMessage.objects.filter(job__in=left, reason=NOT_CONSIDERED).count() == 3
    # The forecast has no row for a job left out, and says why instead of "not looked at yet".
    assert "more pending work ahead of it" in forecast_store.stored_or_not_yet(left[-1]).reason

    # Once the pods bound in the first cycle run (the second), nothing changes: nothing is written.
    assert loop.run(5).status == "succeeded"
    pending = Pod.objects.filter(job__queue=big, state="pending")
    stamps = dict(pending.values_list("pk", "reason_at"))
    messages = JobMessage.objects.count()

    third = loop.run(5)

    assert third.status == "succeeded", third.error
    assert dict(Pod.objects.filter(pk__in=stamps).values_list("pk", "reason_at")) == stamps
    assert JobMessage.objects.count() == messages
    assert not Decision.objects.filter(cycle=third).exists()
