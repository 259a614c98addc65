from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from kai_portal.core.units import RESOURCES
from kai_portal.history.models import SchedulingCycle, UsageSample
from kai_portal.history.queue_status import empty_status
from kai_portal.nodes.models import NodePool
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Team

QUOTA_FIELDS = [f"{r}_{kind}" for r in RESOURCES for kind in ("quota", "limit", "over_quota_weight")]


class ResourceStatusSerializer(serializers.Serializer):
    """Numbers computed by the scheduling loop; null until the first cycle sampled the queue."""

    deserved = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    fair_share = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    allocated = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    allocated_non_preemptible = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    requested = serializers.DecimalField(max_digits=16, decimal_places=2, allow_null=True)
    sampled_at = serializers.DateTimeField(allow_null=True)


class QueueStatusSerializer(serializers.Serializer):
    gpu = ResourceStatusSerializer(help_text="GPU devices.")
    cpu = ResourceStatusSerializer(help_text="CPU millicores.")
    memory = ResourceStatusSerializer(help_text="Memory MiB.")


class QueueSerializer(serializers.ModelSerializer):
    """A queue with its quotas (-1 = unlimited) and its computed status.

    Units: GPU devices (2 decimals), CPU millicores, memory MiB (3 decimals).
    Send the ``updated_at`` you read (or an ``If-Match`` header with the ETag)
    when you change it: a stale one is answered with 409.
    """

    # A declared field, popped into _declared_fields by the metaclass; the stubs see Field.parent.
    parent = serializers.SlugRelatedField(  # type: ignore[assignment]
        slug_field="name", queryset=Queue.objects.all(), allow_null=True, required=False
    )
    team = serializers.SlugRelatedField(
        slug_field="slug", queryset=Team.objects.all(), allow_null=True, required=False
    )
    node_pool = serializers.SlugRelatedField(
        slug_field="name",
        queryset=NodePool.objects.all(),
        required=False,
        help_text="The node pool (KAI scheduling shard) the queue's quota applies in; "
        "default: the parent's pool, or the default pool for a top-level queue.",
    )
    is_leaf = serializers.SerializerMethodField()
    children = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()

    class Meta:
        model = Queue
        fields = [
            "name", "display_name", "parent", "node_pool", "team", "priority", *QUOTA_FIELDS,
            "preempt_min_runtime", "reclaim_min_runtime", "max_pending_tasks", "is_leaf", "children",
            "status", "cluster_resource_version", "cluster_message", "created_at", "updated_at",
        ]  # fmt: skip
        read_only_fields = ["created_at", "updated_at", "cluster_resource_version", "cluster_message"]
        extra_kwargs = {
            "cluster_resource_version": {
                "help_text": "Kubernetes mode: the resourceVersion of the queue's Queue object the portal "
                "last read or wrote (empty: the queue is not an object in the cluster)."
            },
        }

    def get_is_leaf(self, queue: Queue) -> bool:
        return not self._children(queue)

    def get_children(self, queue: Queue) -> list[str]:
        return self._children(queue)

    def _children(self, queue: Queue) -> list[str]:
        if queue.pk is None:
            return []
        return sorted(child.name for child in queue.children.all())

    @extend_schema_field(QueueStatusSerializer)
    def get_status(self, queue: Queue) -> dict[str, Any]:
        status = self.context.get("status", {}).get(queue.pk) or {r: empty_status() for r in RESOURCES}
        return QueueStatusSerializer(status).data  # type: ignore[return-value]


class QueueImportResultSerializer(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())
    warnings = serializers.ListField(child=serializers.CharField())


class UsageSampleSerializer(serializers.ModelSerializer):
    cycle: serializers.PrimaryKeyRelatedField[SchedulingCycle] = serializers.PrimaryKeyRelatedField(
        read_only=True
    )

    class Meta:
        model = UsageSample
        fields = [
            "resource", "sampled_at", "cycle", "allocated", "allocated_non_preemptible", "requested",
            "deserved", "fair_share",
        ]  # fmt: skip


class ShareChangeSerializer(serializers.Serializer):
    """One resource of one queue: deserved (quota) and fair share before -> after, and what it uses now."""

    resource = serializers.ChoiceField(choices=UsageSample.Resource.choices)
    deserved_before = serializers.FloatField()
    deserved_after = serializers.FloatField()
    fair_share_before = serializers.FloatField()
    fair_share_after = serializers.FloatField()
    allocated = serializers.FloatField()


class QueueImpactSerializer(serializers.Serializer):
    queue = serializers.CharField()
    relation = serializers.ChoiceField(choices=["changed", "ancestor", "sibling", "descendant", "other"])
    changed = serializers.BooleanField(help_text="Some deserved or fair share of this queue changes.")
    shares = ShareChangeSerializer(many=True)


class JobImpactSerializer(serializers.Serializer):
    name = serializers.CharField()
    uid = serializers.CharField()
    queue = serializers.CharField()
    tasks = serializers.IntegerField(help_text="Pods that start, are evicted or are reclaimable.")
    gpus = serializers.FloatField()
    how = serializers.CharField(
        help_text="Start: allocated (binds now) or pipelined (after the evictions). Eviction: reclaim, "
        "preempt, consolidation, stalegangeviction. Reclaimable: reclaimable or 'evicted next cycle'."
    )
    message = serializers.CharField()
    evictor_job = serializers.CharField(allow_null=True)
    evictor_queue = serializers.CharField(allow_null=True)
    without_change = serializers.BooleanField(help_text="The next cycle does this even without the change.")


class UsageWarningSerializer(serializers.Serializer):
    resource = serializers.ChoiceField(choices=UsageSample.Resource.choices)
    kind = serializers.ChoiceField(choices=["quota", "limit"])
    value = serializers.FloatField()
    allocated = serializers.FloatField()
    text = serializers.CharField()


class QueueChangeSerializer(serializers.Serializer):
    field = serializers.CharField()
    old = serializers.CharField()
    new = serializers.CharField()


class QueuePreviewSerializer(serializers.Serializer):
    """What the next scheduling cycle would do with the change saved, computed now; nothing is saved.

    Units: GPU devices, CPU millicores, memory MiB. ``reclaimable``: preemptible running
    jobs above their leaf queue's allocatable share max(deserved, fair share) after the
    change, in victim order (lowest priority, most recently started first), as many as it
    takes to bring the queue down to that share.
    """

    queue = serializers.CharField()
    now = serializers.DateTimeField()
    changes = serializers.SerializerMethodField()
    queues = QueueImpactSerializer(many=True)
    would_start = JobImpactSerializer(many=True)
    would_be_evicted = JobImpactSerializer(many=True)
    reclaimable = JobImpactSerializer(many=True)
    warnings = UsageWarningSerializer(many=True)

    @extend_schema_field(QueueChangeSerializer(many=True))
    def get_changes(self, preview: Any) -> list[dict[str, str]]:
        return [{"field": f, "old": old, "new": new} for f, old, new in preview.changes]
