"""Every job rule: bad input is rejected with a message naming the field, and nothing is saved."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from kai_portal.nodes.models import NodePool
from kai_portal.queues.models import Queue
from kai_portal.workloads import submission
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


def rejected(job: Job, field: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        submission.submit(job)
    assert field in info.value.message_dict, info.value.message_dict
    assert not Job.objects.exists() and not Pod.objects.exists()
    return info.value.message_dict[field]


def test_submit_creates_one_pending_pod_per_task(leaf: Queue) -> None:
    job = factories.job(leaf, task_count=3, min_member=2)
    assert [p.name for p in job.pods.order_by("index")] == ["train-0", "train-1", "train-2"]
    assert job.priority == 50 and job.is_preemptible


def test_jobs_only_go_to_leaf_queues(department: Queue, leaf: Queue) -> None:
    messages = rejected(Job(queue=department, name="j", gpu_count=1), "queue")
    assert messages == ["Queue 'dept' has child queues; jobs may only be submitted to leaf queues."]


@pytest.mark.parametrize("fraction", ["0", "1", "1.5", "-0.25"])
def test_gpu_fraction_must_be_strictly_between_0_and_1(leaf: Queue, fraction: str) -> None:
    messages = rejected(Job(queue=leaf, name="j", gpu_fraction=Decimal(fraction)), "gpu_fraction")
    assert messages == [
        f"GPU fraction must be strictly between 0 and 1 (got {Decimal(fraction)}); "
        "request whole GPUs for one device or more."
    ]


@pytest.mark.parametrize("value", [1.5, "2.5", Decimal("0.5")])
def test_whole_gpus_must_be_integral(leaf: Queue, value: Any) -> None:
    messages = rejected(Job(queue=leaf, name="j", gpu_count=value), "gpu_count")
    assert messages == [f"Must be a whole number (got {value})."]


def test_whole_gpus_must_not_be_negative(leaf: Queue) -> None:
    messages = rejected(Job(queue=leaf, name="j", gpu_count=-1), "gpu_count")
    assert messages == ["Ensure this value is greater than or equal to 0."]


def test_only_one_way_of_requesting_gpus(leaf: Queue) -> None:
    messages = rejected(Job(queue=leaf, name="j", gpu_count=1, gpu_fraction=Decimal("0.5")), "gpu_fraction")
    assert messages == [
        "Request GPUs in one way per task: whole GPUs, a GPU fraction or GPU memory "
        "(got whole GPUs and a GPU fraction)."
    ]


def test_fraction_and_memory_together_are_rejected(leaf: Queue) -> None:
    job = Job(queue=leaf, name="j", gpu_fraction=Decimal("0.5"), gpu_memory_mib=4096)
    assert "(got a GPU fraction and GPU memory)." in rejected(job, "gpu_memory_mib")[0]


def test_gang_minimum_cannot_exceed_task_count(leaf: Queue) -> None:
    messages = rejected(Job(queue=leaf, name="j", gpu_count=1, task_count=4, min_member=5), "min_member")
    assert messages == ["Gang minimum (5) cannot be more than the number of tasks (4)."]


def test_elastic_gang_minimum_zero_is_allowed(leaf: Queue) -> None:
    assert factories.job(leaf, task_count=4, min_member=0).pods.count() == 4


def test_a_job_needs_at_least_one_task(leaf: Queue) -> None:
    messages = rejected(Job(queue=leaf, name="j", task_count=0, min_member=0), "task_count")
    assert messages == ["A job needs at least 1 task (got 0)."]


@pytest.mark.parametrize("field", ["cpu_millicores", "memory_mib"])
def test_cpu_and_memory_must_not_be_negative(leaf: Queue, field: str) -> None:
    messages = rejected(Job(queue=leaf, name="j", **{field: -100}), field)
    assert messages == ["Ensure this value is greater than or equal to 0."]


def test_fractional_request_needs_a_pool_that_shares_gpus() -> None:
    pool = NodePool.objects.create(name="h100", gpu_sharing=False)
    queue = Queue(name="h100-team", node_pool=pool)
    queue.save()
    job = Job(queue=queue, name="j", gpu_fraction=Decimal("0.5"))
    assert rejected(job, "node_pool") == [
        "Node pool 'h100' does not allow GPU sharing; request whole GPUs or choose another pool."
    ]


def test_a_job_runs_in_its_queues_pool(leaf: Queue) -> None:
    """KAI: a job is scheduled by its queue's shard; naming another pool is refused, not ignored."""
    job = Job(queue=leaf, name="j", gpu_count=1)
    job.full_clean()
    assert job.node_pool == leaf.node_pool
    other = NodePool.objects.create(name="h100")
    assert rejected(Job(queue=leaf, name="k", gpu_count=1, node_pool=other), "node_pool") == [
        f"Queue '{leaf}' is in node pool '{leaf.node_pool}', and a job runs in its queue's pool; "
        "submit to a queue of node pool 'h100', or leave the pool out."
    ]


def test_fraction_devices_need_a_fraction_or_memory_request(leaf: Queue) -> None:
    messages = rejected(
        Job(queue=leaf, name="j", gpu_count=1, gpu_fraction_devices=2), "gpu_fraction_devices"
    )
    assert messages == ["Fractional devices only apply to a GPU fraction or GPU memory request."]


def test_gpu_memory_must_be_positive(leaf: Queue) -> None:
    messages = rejected(Job(queue=leaf, name="j", gpu_memory_mib=0), "gpu_memory_mib")
    assert messages == ["GPU memory must be at least 1 MiB (got 0)."]


def test_existing_job_in_a_queue_that_later_became_a_parent_can_still_be_updated(leaf: Queue) -> None:
    job = factories.job(leaf)
    job.state = "succeeded"
    job.save()
    factories.queue("child", parent=leaf)
    job.message = "done"
    job.save()
    job.refresh_from_db()
    assert job.message == "done"
