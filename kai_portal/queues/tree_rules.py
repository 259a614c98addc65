"""Validation rules of the queue tree, run by ``Queue.clean()``.

Rules (each error is attached to the field it is about):

* Quotas and limits are ``-1`` (unlimited) or ``>= 0``; weights ``>= 0``
  (field validators).
* Limit: when it is not ``-1`` it must be at least the quota, and a finite
  limit with an unlimited quota is rejected.
* Parent: not the queue itself, not one of its descendants (no cycles), and
  not a queue that holds active (pending or running) jobs: only leaf queues
  hold jobs (kai-semantics §1.1).
* Node pool: a queue is in its parent's pool (a pool is a separate tree of queues, as each
  KAI shard schedules its own queues); a queue with child queues keeps its pool, and so does one
  with pending or running jobs (their pods sit on that pool's nodes).
* Quota split: when a parent's quota for a resource is finite, every child's
  quota for it is finite too and the children's quotas add up to at most the
  parent's (Run:ai's "department quota supersedes the sum of its projects",
  with over-subscription blocked). Limits are not summed: KAI checks the
  limit of every ancestor at allocation time anyway (§3.5).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError

from kai_portal.core.units import RESOURCES, UNLIMITED, format_amount

if TYPE_CHECKING:
    from kai_portal.queues.models import Queue

Errors = dict[str, list[str]]


def validate_queue(queue: Queue) -> None:
    errors: Errors = {}
    _check_parent(queue, errors)
    _check_pool(queue, errors)
    for resource in RESOURCES:
        _check_limit(queue, resource, errors)
        _check_quota_within_parent(queue, resource, errors)
        _check_children_within_quota(queue, resource, errors)
    if errors:
        raise ValidationError(errors)


def limit_errors(queue: Queue) -> Errors:
    """Only the per-queue limit rule (no tree lookups), for checks before rows exist."""
    errors: Errors = {}
    for resource in RESOURCES:
        _check_limit(queue, resource, errors)
    return errors


def _amount(value: Any) -> Decimal | None:
    """The value as a Decimal when it is a valid quota/limit, else None (the
    field validators already report it)."""
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    if number != UNLIMITED and number < 0:
        return None
    return number


def _check_parent(queue: Queue, errors: Errors) -> None:
    if queue.parent_id is None:
        return
    if queue.pk is not None and queue.parent_id == queue.pk:
        errors.setdefault("parent", []).append("A queue cannot be its own parent.")
        return
    parent = queue.parent
    assert parent is not None  # parent_id is set: the related object exists or access raised
    if queue.pk is not None:
        node: Queue | None
        node, seen = parent, set()
        while node is not None and node.pk not in seen:
            if node.parent_id == queue.pk:
                errors.setdefault("parent", []).append(
                    f"Queue '{parent}' is below '{queue.name}' in the tree; "
                    "making it the parent would create a cycle."
                )
                return
            seen.add(node.pk)
            node = node.parent
    if parent.jobs.active().exists():
        errors.setdefault("parent", []).append(
            f"Queue '{parent}' has pending or running jobs; only leaf queues hold jobs, "
            "so it cannot get child queues."
        )


def _check_pool(queue: Queue, errors: Errors) -> None:
    parent = queue.parent if queue.parent_id is not None and queue.parent_id != queue.pk else None
    if parent is not None and parent.node_pool_id != queue.node_pool_id:
        errors.setdefault("node_pool", []).append(
            f"A child queue is in its parent's node pool: '{parent}' is in '{parent.node_pool}'."
        )
    if queue.pk is None:
        return
    before = type(queue).objects.filter(pk=queue.pk).values_list("node_pool_id", flat=True).first()
    if before is None or before == queue.node_pool_id:
        return
    if queue.children.exists():
        errors.setdefault("node_pool", []).append(
            f"Queue '{queue.name}' has child queues, which are in its node pool; a queue with "
            "children keeps its pool (create the tree anew in the other pool)."
        )
    elif queue.jobs.active().exists():
        errors.setdefault("node_pool", []).append(
            f"Queue '{queue.name}' has pending or running jobs in its current node pool; "
            "change the pool once they have finished or been cancelled."
        )


def _check_limit(queue: Queue, resource: str, errors: Errors) -> None:
    quota = _amount(getattr(queue, f"{resource}_quota"))
    limit = _amount(getattr(queue, f"{resource}_limit"))
    if quota is None or limit is None or limit == UNLIMITED:
        return
    if quota == UNLIMITED:
        errors.setdefault(f"{resource}_limit", []).append(
            f"Limit ({format_amount(resource, limit)}) must be -1 (unlimited) when the quota is unlimited."
        )
    elif limit < quota:
        errors.setdefault(f"{resource}_limit", []).append(
            f"Limit ({format_amount(resource, limit)}) must be at least the quota "
            f"({format_amount(resource, quota)}), or -1 for unlimited."
        )


def _check_quota_within_parent(queue: Queue, resource: str, errors: Errors) -> None:
    if queue.parent_id is None or queue.parent_id == queue.pk:
        return
    field = f"{resource}_quota"
    quota = _amount(getattr(queue, field))
    parent_quota = _amount(getattr(queue.parent, field))
    if quota is None or parent_quota is None or parent_quota == UNLIMITED:
        return
    parent = queue.parent
    assert parent is not None  # parent_id is set: the related object exists or access raised
    if quota == UNLIMITED:
        errors.setdefault(field, []).append(
            f"Quota cannot be unlimited (-1): parent queue '{parent}' has a quota of "
            f"{format_amount(resource, parent_quota)}."
        )
        return
    siblings = parent.children.exclude(pk=queue.pk) if queue.pk else parent.children.all()
    taken = sum((Decimal(v) for v in siblings.values_list(field, flat=True) if v != UNLIMITED), Decimal(0))
    if taken + quota > parent_quota:
        errors.setdefault(field, []).append(
            f"Quota ({format_amount(resource, quota)}) does not fit in parent queue '{parent}': its child "
            f"queues would hold {format_amount(resource, taken + quota)} in total, more than its quota of "
            f"{format_amount(resource, parent_quota)}."
        )


def _check_children_within_quota(queue: Queue, resource: str, errors: Errors) -> None:
    if queue.pk is None:
        return
    field = f"{resource}_quota"
    quota = _amount(getattr(queue, field))
    if quota is None or quota == UNLIMITED:
        return
    children = list(queue.children.values_list("name", field))
    unlimited = [name for name, value in children if value == UNLIMITED]
    if unlimited:
        errors.setdefault(field, []).append(
            f"Quota cannot be {format_amount(resource, quota)} while child queue '{unlimited[0]}' "
            "has an unlimited quota."
        )
        return
    held = sum((Decimal(value) for _, value in children), Decimal(0))
    if held > quota:
        errors.setdefault(field, []).append(
            f"Quota ({format_amount(resource, quota)}) is less than the {format_amount(resource, held)} "
            "its child queues hold; lower their quotas first."
        )
