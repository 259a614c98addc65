"""Queue forms for portal admins: create, move (change parent) and edit quotas.

Shape only; the tree rules (limit >= quota, children within the parent's
quota, no cycles) are ``Queue.clean()`` and arrive here as field errors.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms

from kai_portal.queues.models import Queue

RESOURCE_FIELDS = {
    resource: [f"{resource}_quota", f"{resource}_limit", f"{resource}_over_quota_weight"]
    for resource in ("gpu", "cpu", "memory")
}


class QueueForm(forms.ModelForm):
    """Every field an admin sets on a queue, the parent included (moving a queue is editing its parent).

    ``seen_resource_version`` (hidden) carries the Queue object's resourceVersion the page was
    rendered from, so in kubernetes mode the write's precondition is what the admin saw: an
    object changed in the cluster since (even one a cycle has already read) refuses the edit.
    """

    seen_resource_version = forms.CharField(required=False, widget=forms.HiddenInput, max_length=64)

    class Meta:
        model = Queue
        fields = [
            "name",
            "display_name",
            "parent",
            "node_pool",
            "team",
            "priority",
            *RESOURCE_FIELDS["gpu"],
            *RESOURCE_FIELDS["cpu"],
            *RESOURCE_FIELDS["memory"],
            "preempt_min_runtime",
            "reclaim_min_runtime",
            "max_pending_tasks",
        ]
        labels = {
            "gpu_quota": "GPU quota (deserved)",
            "gpu_limit": "GPU limit",
            "gpu_over_quota_weight": "GPU over-quota weight",
            "cpu_quota": "CPU quota (millicores)",
            "cpu_limit": "CPU limit (millicores)",
            "cpu_over_quota_weight": "CPU over-quota weight",
            "memory_quota": "Memory quota (MiB)",
            "memory_limit": "Memory limit (MiB)",
            "memory_over_quota_weight": "Memory over-quota weight",
        }
        help_texts = {
            "gpu_limit": "-1 = unlimited; 0 = no GPUs beyond the quota.",
            "preempt_min_runtime": "e.g. 00:10:00; empty inherits from the parent.",
            "reclaim_min_runtime": "e.g. 01:00:00; empty inherits from the parent.",
            "max_pending_tasks": "Submissions past this many pending tasks in the queue are refused; "
            "empty = the deployment's default.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        parents = Queue.objects.select_related("parent").order_by("name")
        if self.instance.pk is not None:
            parents = parents.exclude(pk=self.instance.pk)
        parent_field = cast("forms.ModelChoiceField[Queue]", self.fields["parent"])
        parent_field.queryset = parents
        parent_field.empty_label = "(top level: a department)"
        cast("forms.ModelChoiceField[Any]", self.fields["team"]).empty_label = "(none: run by portal admins)"
        pool_field = cast("forms.ModelChoiceField[Any]", self.fields["node_pool"])
        pool_field.empty_label = "(the parent's pool; the default pool for a department)"
        self.fields["seen_resource_version"].initial = self.instance.cluster_resource_version

    def seen_version(self) -> str | None:
        """The resourceVersion the page showed (None when the post carried none)."""
        return self.cleaned_data.get("seen_resource_version") or None

    def resource_rows(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The quota grid: one row per resource with its quota, limit and weight fields."""
        names = {"gpu": "GPU (devices)", "cpu": "CPU (millicores)", "memory": "Memory (MiB)"}
        return [(names[r], [self[f] for f in fields]) for r, fields in RESOURCE_FIELDS.items()]
