"""Every queue rule: bad input is rejected with a message naming the field, and nothing is saved."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from kai_portal.queues.models import Queue
from tests.portal import factories

pytestmark = pytest.mark.django_db


def rejected(obj: Any, field: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        obj.save()
    assert field in info.value.message_dict, info.value.message_dict
    return info.value.message_dict[field]


@pytest.mark.parametrize(
    "field", ["gpu_quota", "gpu_limit", "cpu_quota", "cpu_limit", "memory_quota", "memory_limit"]
)
def test_quota_and_limit_must_be_unlimited_or_non_negative(field: str) -> None:
    messages = rejected(Queue(name="q", **{field: -2}), field)
    assert messages == ["Must be -1 (unlimited) or a number of at least 0 (got -2)."]
    assert not Queue.objects.exists()


def test_over_quota_weight_must_not_be_negative() -> None:
    messages = rejected(Queue(name="q", cpu_over_quota_weight=Decimal("-0.5")), "cpu_over_quota_weight")
    assert messages == ["Over-quota weight must be at least 0 (got -0.5)."]
    assert not Queue.objects.exists()


def test_gpu_quota_has_at_most_two_decimals() -> None:
    messages = rejected(Queue(name="q", gpu_quota=Decimal("0.125")), "gpu_quota")
    assert "no more than 2 decimal places" in messages[0]
    assert not Queue.objects.exists()


def test_limit_below_quota_is_rejected_on_the_limit_field() -> None:
    messages = rejected(Queue(name="q", gpu_quota=4, gpu_limit=3), "gpu_limit")
    assert messages == ["Limit (3 GPUs) must be at least the quota (4 GPUs), or -1 for unlimited."]
    assert not Queue.objects.exists()


def test_limit_message_uses_the_resource_unit() -> None:
    messages = rejected(Queue(name="q", cpu_quota=2000, cpu_limit=1000), "cpu_limit")
    assert messages == [
        "Limit (1000 millicores) must be at least the quota (2000 millicores), or -1 for unlimited."
    ]


def test_finite_limit_with_unlimited_quota_is_rejected() -> None:
    messages = rejected(Queue(name="q", memory_quota=-1, memory_limit=512), "memory_limit")
    assert messages == ["Limit (512 MiB) must be -1 (unlimited) when the quota is unlimited."]
    assert not Queue.objects.exists()


def test_limit_equal_to_quota_and_unlimited_limit_are_fine() -> None:
    factories.queue("a", gpu_quota=4, gpu_limit=4)
    factories.queue("b", gpu_quota=-1, gpu_limit=-1)
    assert Queue.objects.count() == 2


def test_update_that_breaks_a_rule_leaves_the_stored_row_alone(leaf: Queue) -> None:
    leaf.gpu_limit = Decimal(1)
    rejected(leaf, "gpu_limit")
    leaf.refresh_from_db()
    assert leaf.gpu_limit == -1


def test_queue_cannot_be_its_own_parent(department: Queue) -> None:
    department.parent = department
    assert rejected(department, "parent") == ["A queue cannot be its own parent."]
    department.refresh_from_db()
    assert department.parent_id is None


def test_parent_cannot_be_a_descendant(department: Queue, leaf: Queue) -> None:
    grandchild = factories.queue("grandchild", parent=leaf)
    department.parent = grandchild
    assert rejected(department, "parent") == [
        "Queue 'grandchild' is below 'dept' in the tree; making it the parent would create a cycle."
    ]
    department.refresh_from_db()
    assert department.parent_id is None


def test_queue_with_jobs_cannot_get_children(leaf: Queue) -> None:
    factories.job(leaf)
    messages = rejected(Queue(name="child", parent=leaf), "parent")
    assert messages == [
        "Queue 'leaf' has pending or running jobs; only leaf queues hold jobs, so it cannot get child queues."
    ]
    assert not Queue.objects.filter(name="child").exists()


def test_children_quotas_must_fit_in_the_parent(department: Queue, leaf: Queue) -> None:
    messages = rejected(Queue(name="big", parent=department, gpu_quota=7), "gpu_quota")
    assert messages == [
        "Quota (7 GPUs) does not fit in parent queue 'dept': its child queues would hold 11 GPUs in total, "
        "more than its quota of 10 GPUs."
    ]
    assert not Queue.objects.filter(name="big").exists()


def test_children_quotas_may_use_the_whole_parent_quota(department: Queue, leaf: Queue) -> None:
    factories.queue("rest", parent=department, gpu_quota=6)
    assert department.children.count() == 2


def test_child_cannot_be_unlimited_under_a_finite_parent(department: Queue) -> None:
    messages = rejected(Queue(name="greedy", parent=department, cpu_quota=-1), "cpu_quota")
    assert messages == [
        "Quota cannot be unlimited (-1): parent queue 'dept' has a quota of 10000 millicores."
    ]
    assert not Queue.objects.filter(name="greedy").exists()


def test_parent_quota_cannot_drop_below_its_children(department: Queue, leaf: Queue) -> None:
    department.gpu_quota = Decimal(3)
    assert rejected(department, "gpu_quota") == [
        "Quota (3 GPUs) is less than the 4 GPUs its child queues hold; lower their quotas first."
    ]
    department.refresh_from_db()
    assert department.gpu_quota == 10


def test_unlimited_parent_accepts_any_children() -> None:
    top = factories.queue("top", gpu_quota=-1)
    factories.queue("x", parent=top, gpu_quota=100)
    factories.queue("y", parent=top, gpu_quota=-1)
    assert top.children.count() == 2


def test_queue_name_must_be_a_kubernetes_name() -> None:
    messages = rejected(Queue(name="Bad_Name"), "name")
    assert "lowercase letters, digits and '-'" in messages[0]
    assert not Queue.objects.exists()


def test_database_constraint_backs_the_limit_rule_for_bulk_updates(leaf: Queue) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        Queue.objects.filter(pk=leaf.pk).update(gpu_limit=1)


def test_effective_min_runtime_is_inherited(department: Queue, leaf: Queue) -> None:
    from datetime import timedelta

    department.preempt_min_runtime = timedelta(minutes=10)
    department.save()
    leaf.refresh_from_db()
    assert leaf.effective_preempt_min_runtime() == timedelta(minutes=10)
