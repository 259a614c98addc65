"""Jobs on the simulated cluster get scheduled, run, finish and free their GPUs over several cycles."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from kai_portal.history.models import Decision, QueueStatus, SchedulingCycle, UsageSample
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


def _state(job: Job) -> tuple[str, list[str]]:
    job.refresh_from_db()
    return job.state, [p.state for p in job.pods.order_by("index")]


def test_a_job_is_bound_runs_succeeds_and_frees_its_gpus(loop, leaf):
    node = factories.node("n1", gpus=2)
    job = factories.job(leaf, "train", gpu_count=2, duration=timedelta(seconds=60))

    cycle = loop.run()
    assert cycle.status == "succeeded" and cycle.allocated_count == 1
    assert _state(job) == ("running", ["bound"])
    pod = job.pods.get()
    assert pod.node == node and sorted(d.index for d in pod.gpu_devices.all()) == [0, 1]
    assert pod.reason == "Successfully assigned pod leaf/train-0 to node n1 at node-pool default"
    decision = Decision.objects.get(pod=pod)
    assert (decision.kind, decision.action, decision.node) == ("allocated", "allocate", node)

    loop.run(5)
    assert _state(job) == ("running", ["running"])
    loop.run(30)
    assert _state(job) == ("running", ["running"])
    loop.run(30)
    assert _state(job) == ("succeeded", ["succeeded"])
    pod.refresh_from_db()
    assert pod.node is None and not pod.gpu_devices.exists() and pod.finished_at is not None
    assert job.finished_at is not None


def test_a_waiting_job_says_why_and_runs_once_gpus_are_free(loop, leaf):
    factories.node("n1", gpus=2)
    first = factories.job(leaf, "first", gpu_count=2, duration=timedelta(seconds=20))
    second = factories.job(leaf, "second", gpu_count=2, duration=timedelta(seconds=20))

    loop.run()
    assert _state(first)[0] == "running"
    assert _state(second) == ("pending", ["pending"])
    waiting = second.pods.get()
    assert "didn't have enough resources: GPUs" in waiting.reason
    unschedulable = Decision.objects.filter(pod=waiting, kind="unschedulable")
    assert unschedulable.count() == 1

    loop.run(5)
    loop.run(5)
    # The same reason is not stored again every cycle.
    assert unschedulable.count() == 1

    for _ in range(6):
        loop.run(5)
    assert _state(first) == ("succeeded", ["succeeded"])
    assert _state(second)[0] in ("running", "succeeded")
    assert Decision.objects.filter(pod=waiting, kind="allocated").count() == 1


def test_each_cycle_records_counts_usage_and_queue_status(loop, leaf):
    factories.node("n1", gpus=4)
    factories.job(leaf, "a", gpu_count=1, task_count=3, min_member=3)

    cycle = loop.run()

    assert SchedulingCycle.objects.get() == cycle
    assert cycle.allocated_count == 3 and cycle.duration_ms > 0
    # It ends when it ended on the cycle's clock, not when it started (issue 14).
    assert cycle.finished_at == loop.now + timedelta(milliseconds=cycle.duration_ms)
    assert cycle.counters["allocated"] == 3
    assert UsageSample.objects.filter(cycle=cycle).count() == 2 * 3  # dept and leaf, three resources
    status = QueueStatus.objects.get(queue=leaf, resource="gpu")
    assert (status.allocated, status.requested, status.deserved) == (3, 3, 4)
    assert status.fair_share >= 3
    loop.run(5)
    assert QueueStatus.objects.filter(queue=leaf).count() == 3  # overwritten, not appended


def test_a_cancelled_job_releases_its_gpus_after_the_grace_period(loop, leaf, settings):
    from kai_portal.workloads.lifecycle import cancel_job

    settings.SIMULATED_EVICTION_GRACE_SECONDS = 5
    factories.node("n1", gpus=1)
    job = factories.job(leaf, "a")
    loop.run()
    loop.run(5)
    cancel_job(job)
    loop.now = timezone.now()  # cancel_job stamps the wall clock
    assert _state(job) == ("cancelled", ["releasing"])
    loop.run(1)
    assert Pod.objects.get(job=job).state == "releasing"
    loop.run(5)
    pod = Pod.objects.get(job=job)
    assert pod.state == "failed" and pod.node is None and not pod.gpu_devices.exists()


def test_a_multi_device_fraction_is_bound_to_that_many_devices(loop, leaf):
    # gpu-fraction-num-devices reaches the engine: 2 x 0.5 takes half of two devices of one node.
    factories.node("n1", gpus=1)
    node = factories.node("n2", gpus=2)
    job = factories.job(leaf, "pair", gpu_count=0, gpu_fraction="0.5", gpu_fraction_devices=2)

    cycle = loop.run()
    assert cycle.allocated_count == 1
    pod = job.pods.get()
    assert pod.node == node and sorted(d.index for d in pod.gpu_devices.all()) == [0, 1]
    status = QueueStatus.objects.get(queue=leaf, resource="gpu")
    assert float(status.allocated) == 1.0
