from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import IntegrityError, models, transaction
from django.db.models import Q

from kai_portal.core.units import RESOURCES, UNLIMITED
from kai_portal.core.validation import ValidatedModel
from kai_portal.queues import tree_rules
from kai_portal.queues.querysets import QueueQuerySet


def validate_quota_or_unlimited(value: Decimal | int) -> None:
    """Quotas and limits are -1 (unlimited) or non-negative."""
    if value != UNLIMITED and value < 0:
        raise ValidationError(
            "Must be -1 (unlimited) or a number of at least 0 (got %(value)s).",
            code="negative",
            params={"value": value},
        )


queue_name_validator = RegexValidator(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
    "Queue names are Kubernetes names: lowercase letters, digits and '-', "
    "starting and ending with a letter or digit.",
)


def _gpu_amount(default: int) -> models.DecimalField:
    return models.DecimalField(
        max_digits=10, decimal_places=2, default=default, validators=[validate_quota_or_unlimited]
    )


def _whole_amount(default: int) -> models.BigIntegerField:
    return models.BigIntegerField(default=default, validators=[validate_quota_or_unlimited])


def _memory_amount(default: int) -> models.DecimalField:
    return models.DecimalField(
        max_digits=16, decimal_places=3, default=default, validators=[validate_quota_or_unlimited]
    )


def _weight() -> models.DecimalField:
    return models.DecimalField(
        max_digits=8,
        decimal_places=2,
        default=1,
        validators=[MinValueValidator(0, "Over-quota weight must be at least 0 (got %(show_value)s).")],
    )


def _resource_constraints() -> list[models.BaseConstraint]:
    constraints: list[models.BaseConstraint] = []
    for r in RESOURCES:
        quota, limit = f"{r}_quota", f"{r}_limit"
        constraints += [
            models.CheckConstraint(
                condition=Q(**{f"{quota}__gte": 0}) | Q(**{quota: UNLIMITED}), name=f"queue_{quota}_valid"
            ),
            models.CheckConstraint(
                condition=Q(**{limit: UNLIMITED})
                | (Q(**{f"{limit}__gte": models.F(quota)}) & ~Q(**{quota: UNLIMITED})),
                name=f"queue_{limit}_at_least_quota",
            ),
            models.CheckConstraint(
                condition=Q(**{f"{r}_over_quota_weight__gte": 0}), name=f"queue_{r}_weight_non_negative"
            ),
        ]
    return constraints


class Queue(ValidatedModel):
    """A KAI queue: a node of the capacity tree that jobs are charged to.

    Top-level queues are departments; only leaf queues receive jobs. For each
    resource (GPU devices, CPU millicores, memory MiB with 3 decimals) the queue has a quota
    (deserved, guaranteed share), a limit (hard cap) and an over-quota weight
    (share of the surplus among siblings of the same priority). ``-1`` means
    unlimited. Min-runtimes left empty are inherited from the nearest ancestor
    that sets one (kai-semantics §5.3).
    """

    name = models.CharField(max_length=63, unique=True, validators=[queue_name_validator])
    display_name = models.CharField(max_length=200, blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    team = models.ForeignKey(
        "teams.Team",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="queues",
        help_text="The team that owns this queue; empty for department queues run by portal admins.",
    )
    priority = models.IntegerField(
        default=100, help_text="Over-quota precedence among siblings; higher first."
    )
    node_pool = models.ForeignKey(
        "cluster.NodePool",
        on_delete=models.PROTECT,
        related_name="queues",
        blank=True,
        help_text="The node pool whose nodes this queue's quota applies to (a KAI scheduling shard); "
        "its jobs run there. Empty: the parent's pool, or the default pool for a department.",
    )

    gpu_quota = _gpu_amount(0)
    gpu_limit = _gpu_amount(UNLIMITED)
    gpu_over_quota_weight = _weight()
    cpu_quota = _whole_amount(0)
    cpu_limit = _whole_amount(UNLIMITED)
    cpu_over_quota_weight = _weight()
    memory_quota = _memory_amount(0)
    memory_limit = _memory_amount(UNLIMITED)
    memory_over_quota_weight = _weight()

    preempt_min_runtime = models.DurationField(
        null=True, blank=True, help_text="Minimum runtime before in-queue preemption; empty = inherit."
    )
    reclaim_min_runtime = models.DurationField(
        null=True, blank=True, help_text="Minimum runtime before cross-queue reclaim; empty = inherit."
    )
    max_pending_tasks = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1, "A bound of pending tasks is at least 1 (got %(show_value)s).")],
        help_text="Most pending tasks in this queue; empty = the default (MAX_PENDING_TASKS_PER_QUEUE).",
    )
    # Kubernetes mode (issue 16): the `scheduling.run.ai/v2` Queue object this row mirrors. The
    # uid is set once the row was read from or written to the cluster (empty: a portal-only row);
    # the resourceVersion is the one the portal last read or wrote, the precondition of its writes.
    cluster_uid = models.CharField(max_length=64, blank=True, editable=False)
    cluster_resource_version = models.CharField(max_length=64, blank=True, editable=False)
    cluster_message = models.CharField(
        max_length=1000,
        blank=True,
        editable=False,
        help_text="Why the cluster's Queue object is not (fully) reflected here; empty when it is.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = QueueQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = _resource_constraints()

    def __str__(self) -> str:
        return self.name

    # --- tree ------------------------------------------------------------
    def ancestors(self) -> Iterator[Queue]:
        """Parent, grandparent, ... up to the department (stops on a cycle)."""
        seen: set[int | None] = {self.pk}
        node = self.parent
        while node is not None and node.pk not in seen:
            seen.add(node.pk)
            yield node
            node = node.parent

    @property
    def is_leaf(self) -> bool:
        return self.pk is None or not self.children.exists()

    def effective_preempt_min_runtime(self) -> timedelta | None:
        """The first preempt min-runtime set on this queue or an ancestor."""
        for queue in (self, *self.ancestors()):
            if queue.preempt_min_runtime is not None:
                return queue.preempt_min_runtime
        return None

    def quota(self, resource: str) -> Decimal | int:
        return getattr(self, f"{resource}_quota")  # type: ignore[no-any-return]

    def limit(self, resource: str) -> Decimal | int:
        return getattr(self, f"{resource}_limit")  # type: ignore[no-any-return]

    def clean(self) -> None:
        if self.node_pool_id is None:
            # Unset: the parent's pool, else the default shard (KAI: an unlabelled queue).
            from kai_portal.nodes.models import NodePool

            self.node_pool = self.parent.node_pool if self.parent is not None else NodePool.default_pool()
        tree_rules.validate_queue(self)

    def save(self, *args: Any, validate: bool = True, **kwargs: Any) -> None:
        """Validate and save with the tree locked, so concurrent writes cannot break its rules.

        The quota split (children within the parent) is checked against rows other
        requests may be writing at the same moment: two sibling creates could each see the
        other's quota missing and both pass. Locking the parent row (then this row) before
        validating serialises every write below one parent; under READ COMMITTED the
        checks after the lock see what the previous writer committed. Locks go top-down
        (parent, then child) everywhere, so they cannot deadlock with each other.

        A name taken by a concurrent create (the unique index, past ``validate_unique``)
        is reported as a validation error on ``name``, not a database error.
        """
        try:
            with transaction.atomic():
                self._lock_tree()
                super().save(*args, validate=validate, **kwargs)
        except IntegrityError:
            if Queue.objects.filter(name=self.name).exclude(pk=self.pk).exists():
                raise ValidationError(
                    {"name": [f"Queue with this name '{self.name}' already exists."]}
                ) from None
            raise

    def _lock_tree(self) -> None:
        if self.parent_id is not None:
            # Re-read the parent under the lock: the rules use its current quota.
            parent = Queue.objects.select_for_update().filter(pk=self.parent_id).first()
            if parent is not None:
                self.parent = parent
        if self.pk is not None:
            list(Queue.objects.select_for_update().filter(pk=self.pk).values_list("pk"))
