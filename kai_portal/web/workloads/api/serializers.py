from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from kai_portal.nodes.models import NodePool
from kai_portal.previews import forecast_store
from kai_portal.previews.serializers import ForecastSerializer
from kai_portal.previews.warnings import request_warnings
from kai_portal.queues.models import Queue
from kai_portal.web.workloads.waiting import answer as waiting_answer
from kai_portal.workloads import limits
from kai_portal.workloads.models import Job, Pod

if TYPE_CHECKING:
    from kai_portal.accounts.models import User
    from kai_portal.nodes.models import Node
    from kai_portal.teams.models import Team


class PodCountsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    pending = serializers.IntegerField()
    running = serializers.IntegerField(help_text="Bound or running.")
    finished = serializers.IntegerField(help_text="Succeeded or failed.")


class JobSerializer(serializers.ModelSerializer):
    """A job (KAI pod group). Submit with POST; ``queue`` must be a leaf queue of your team.

    Per task: ``gpu_count`` whole GPUs, or ``gpu_fraction`` (0-1) or
    ``gpu_memory_mib`` of ``gpu_fraction_devices`` devices; ``cpu_millicores``
    and ``memory_mib``. ``min_member`` is the gang minimum.
    """

    queue = serializers.SlugRelatedField(
        slug_field="name",
        queryset=Queue.objects.none(),
        error_messages={
            "does_not_exist": 'Queue "{value}" does not exist, is not a leaf queue or is not yours; '
            "jobs go to leaf queues of your teams.",
        },
    )
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        source="queue.team", slug_field="slug", read_only=True, allow_null=True
    )
    submitter: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    node_pool = serializers.SlugRelatedField(
        slug_field="name", queryset=NodePool.objects.all(), allow_null=True, required=False
    )
    priority = serializers.IntegerField(
        required=False, allow_null=True, min_value=-1_000_000, max_value=1_000_000,
        help_text="Empty = the value of the priority class.",
    )  # fmt: skip
    namespace = serializers.CharField(
        source="pod_namespace",
        read_only=True,
        help_text="The namespace of the job's pods (in simulated mode, its queue's name, as the "
        "scheduling messages name it).",
    )
    pods = serializers.SerializerMethodField()
    warnings = serializers.SerializerMethodField(
        help_text="Things about the request that are allowed but probably not meant, e.g. GPU memory "
        "(MiB) below any GPU's size."
    )
    forecast = serializers.SerializerMethodField(
        help_text="Pending jobs: queue position and estimated start as of the latest cycle (else null)."
    )

    class Meta:
        model = Job
        fields = [
            "uid", "name", "namespace", "queue", "team", "submitter", "node_pool", "priority_class",
            "priority", "preemptibility", "task_count", "min_member", "gpu_count", "gpu_fraction",
            "gpu_memory_mib", "gpu_fraction_devices", "cpu_millicores", "memory_mib", "image", "command",
            "duration", "restart_policy", "state", "message", "pods", "created_at", "updated_at",
            "started_at", "finished_at", "forecast", "warnings",
        ]  # fmt: skip
        read_only_fields = [
            "uid", "namespace", "state", "message", "created_at", "updated_at", "started_at", "finished_at",
            "warnings",
        ]  # fmt: skip
        # Bounds come from the model's validators (workloads/limits.py), shared with the form.

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        request = self.context.get("request")
        if request is not None:
            self.fields["queue"].queryset = Queue.objects.submittable_by(request.user)  # type: ignore[attr-defined]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Left out, the run time is the form's default; an explicit null still means "no end".
        if "duration" not in getattr(self, "initial_data", {}):
            attrs["duration"] = limits.DEFAULT_DURATION
        return attrs

    @extend_schema_field(PodCountsSerializer)
    def get_pods(self, job: Job) -> dict[str, int]:
        return {
            "total": getattr(job, "pods_total", 0),
            "pending": getattr(job, "pods_pending", 0),
            "running": getattr(job, "pods_running", 0),
            "finished": getattr(job, "pods_finished", 0),
        }

    @extend_schema_field(serializers.ListField(child=serializers.CharField()))
    def get_warnings(self, job: Job) -> list[str]:
        return request_warnings(job)

    @extend_schema_field(ForecastSerializer(allow_null=True))
    def get_forecast(self, job: Job) -> dict[str, Any] | None:
        if job.state != "pending":
            return None
        # A list response computes every row's forecast up front (``forecast_data``).
        batch = self.context.get("forecast_data")
        if batch is not None and job.pk in batch:
            return batch[job.pk]  # type: ignore[no-any-return]
        return forecast_data([job])[job.pk]


def forecast_data(jobs: Iterable[Job]) -> dict[int, dict[str, Any]]:
    """The ``forecast`` field of each pending job among ``jobs``, by job id.

    One query for the stored forecasts (the scheduling worker computes them; a request never
    does) and one serializer for all of them, instead of a ``ForecastSerializer`` built per row."""
    pending = [job for job in jobs if job.state == "pending"]
    if not pending:
        return {}
    forecasts = forecast_store.stored([job.pk for job in pending])
    rows = [forecasts.get(job.pk) or forecast_store.not_yet(job) for job in pending]
    data = ForecastSerializer(rows, many=True).data
    return {job.pk: item for job, item in zip(pending, data, strict=True)}


class PodSerializer(serializers.ModelSerializer):
    job: serializers.SlugRelatedField[Job] = serializers.SlugRelatedField(slug_field="uid", read_only=True)
    node: serializers.SlugRelatedField[Node] = serializers.SlugRelatedField(
        slug_field="name", read_only=True, allow_null=True
    )
    gpu_devices = serializers.SerializerMethodField(help_text="Indexes of the node's GPUs it holds.")

    class Meta:
        model = Pod
        fields = [
            "name", "index", "job", "state", "node", "gpu_devices", "gpu_group", "reason", "reason_at",
            "created_at", "updated_at", "started_at", "finished_at",
        ]  # fmt: skip

    def get_gpu_devices(self, pod: Pod) -> list[int]:
        return sorted(device.index for device in pod.gpu_devices.all())


class ManifestErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()
    path = serializers.CharField(
        help_text='Where in the manifest, e.g. metadata.labels["kai.scheduler/queue"].'
    )
    message = serializers.CharField()
    problems = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="Every path at fault with its message (the pod policy may refuse several fields at "
        "once); the first is path and message.",
    )


class FitVictimSerializer(serializers.Serializer):
    name = serializers.CharField()
    uid = serializers.CharField()
    queue = serializers.CharField()
    action = serializers.CharField(help_text="reclaim, preempt or consolidation.")
    tasks = serializers.IntegerField()
    moved = serializers.BooleanField(help_text="Consolidation: re-placed on another node, not stopped.")
    message = serializers.CharField()


class FitVerdictSerializer(serializers.Serializer):
    """Would this job start now, wait (and for what), evict someone, or never fit? Nothing is saved.

    Computed by the scheduling engine on the cluster as it is now plus this job; ``never_fits``
    when it could not be placed even on an empty cluster of the same nodes and queues.
    """

    verdict = serializers.ChoiceField(choices=["starts_now", "waits", "needs_eviction", "never_fits"])
    summary = serializers.CharField()
    reason = serializers.CharField(help_text="The engine's job (pod group) message; empty when it starts.")
    reason_code = serializers.CharField(help_text="OverLimit, NonPreemptibleOverQuota, MaxNodePoolResources…")
    pod_reason = serializers.CharField()
    detail = serializers.CharField(help_text="The line of the reason that names the cause.")
    notes = serializers.ListField(
        child=serializers.CharField(),
        help_text="Why reclaim, preemption or consolidation could not make room for it.",
    )
    tasks = serializers.IntegerField()
    placed = serializers.IntegerField(help_text="Tasks placed in the next cycle.")
    nodes = serializers.ListField(child=serializers.CharField())
    victims = FitVictimSerializer(many=True)


class ProtectedJobSerializer(serializers.Serializer):
    job = serializers.CharField(
        allow_null=True, help_text="Its name; null when it is another team's job you may not see."
    )
    uid = serializers.CharField(allow_null=True, help_text="Its uid; null when you may not see it.")
    queue = serializers.CharField()
    action = serializers.CharField(help_text="reclaim or preempt: the action its minimum runtime holds off.")
    until = serializers.DateTimeField(help_text="When it becomes reclaimable (or preemptible).")
    surplus_only = serializers.BooleanField(help_text="Only its pods above its minimum may be taken.")


class BlockersSerializer(serializers.Serializer):
    protected = ProtectedJobSerializer(many=True)
    sources = serializers.ListField(child=serializers.CharField(), help_text="Queues reclaim may take from.")
    limits = serializers.ListField(
        child=serializers.CharField(), help_text="The limit or quota it would cross."
    )
    notes = serializers.ListField(child=serializers.CharField(), help_text="The eviction actions' own notes.")
    changes = serializers.ListField(
        child=serializers.CharField(),
        help_text="What would change it: a quota or limit, a smaller request, another pool, time.",
    )


class JobDetailSerializer(JobSerializer):
    """A job with what blocks it, when pending (as the job page shows it)."""

    blockers = serializers.SerializerMethodField(
        help_text="Pending jobs: what blocks it and what would change it, as the latest cycle found "
        "it (else null)."
    )

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "blockers"]

    @extend_schema_field(BlockersSerializer(allow_null=True))
    def get_blockers(self, job: Job) -> dict[str, Any] | None:
        request = self.context.get("request")
        if request is None:
            return None
        wait = waiting_answer(job, Job.objects.visible_to(request.user))
        if not wait:
            return None
        return {
            "protected": [
                {
                    "job": p.job or None,
                    "uid": p.uid or None,
                    "queue": p.queue,
                    "action": p.action,
                    "until": p.until.isoformat(),
                    "surplus_only": p.surplus_only,
                }
                for p in wait.protected
            ],  # fmt: skip
            "sources": wait.sources,
            "limits": wait.limits,
            "notes": wait.notes,
            "changes": wait.changes,
        }
