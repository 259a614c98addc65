from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from kai_portal.core.fields import WholeNumberField
from kai_portal.core.validation import ValidatedModel
from kai_portal.queues.models import queue_name_validator
from kai_portal.workloads import limits
from kai_portal.workloads.choices import (
    PRIORITY_VALUES,
    JobState,
    PodState,
    Preemptibility,
    PriorityClass,
    RestartPolicy,
)
from kai_portal.workloads.querysets import JobQuerySet, PodQuerySet

JOB_NAME_MAX = 63


def live_name_taken_condition() -> Q:
    """The jobs the name rule covers: a queue's pending and running jobs submitted in the portal
    (their pods are named after the job). Jobs the sync found in the cluster (a cluster key and no
    submitter, ``cluster_jobs.found_in_cluster``) keep the names they have there."""
    return Q(state__in=JobState.active()) & (Q(cluster_key="") | Q(submitter__isnull=False))


def job_name_problems(name: str) -> list[str]:
    """Why ``name`` is not a Kubernetes name (DNS-1123 label, as queue names are), or nothing."""
    problems: list[str] = []
    if len(name) > JOB_NAME_MAX:
        problems.append(f"Job names are at most {JOB_NAME_MAX} characters (got {len(name)}).")
    try:
        queue_name_validator(name)
    except ValidationError:
        problems.append(
            "Job names are Kubernetes names: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit."
        )
    return problems


class Job(ValidatedModel):
    """A workload submitted to a leaf queue: a KAI pod group of identical tasks.

    Each of its ``task_count`` pods requests the same resources: either whole
    GPUs, or a GPU fraction, or an amount of GPU memory (on
    ``gpu_fraction_devices`` devices), or no GPU at all; plus CPU and memory.
    ``min_member`` is the gang minimum: that many pods start together or none
    do (0 = fully elastic). ``duration`` is how long a pod runs on the
    simulated cluster.
    """

    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=253)
    queue = models.ForeignKey("queues.Queue", on_delete=models.PROTECT, related_name="jobs")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    node_pool = models.ForeignKey(
        "cluster.NodePool", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )
    priority_class = models.CharField(
        max_length=32, choices=PriorityClass.choices, default=PriorityClass.TRAIN
    )
    priority = models.IntegerField(blank=True, help_text="Numeric priority; empty = from the priority class.")
    preemptibility = models.CharField(
        max_length=16, choices=Preemptibility.choices, default=Preemptibility.DEFAULT, blank=True
    )

    task_count = WholeNumberField(
        default=1,
        validators=[
            MinValueValidator(1, "A job needs at least 1 task (got %(show_value)s)."),
            limits.at_most(limits.MAX_TASKS, "A job may have at most %(limit_value)s tasks"),
        ],
    )
    min_member = WholeNumberField(
        default=1,
        validators=[limits.at_most(limits.MAX_TASKS, "Gang minimum must be at most %(limit_value)s")],
        help_text="Gang minimum: pods that must start together; 0 = elastic.",
    )
    gpu_count = WholeNumberField(
        default=0,
        validators=[limits.at_most(limits.MAX_GPUS_PER_TASK, "At most %(limit_value)s whole GPUs per task")],
        help_text="Whole GPUs per task.",
    )
    gpu_fraction = models.DecimalField(
        max_digits=3, decimal_places=2, null=True, blank=True, help_text="Fraction of one GPU per task."
    )
    gpu_memory_mib = WholeNumberField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(1, "GPU memory must be at least 1 MiB (got %(show_value)s)."),
            limits.at_most(limits.MAX_GPU_MEMORY_MIB, "GPU memory must be at most %(limit_value)s MiB"),
        ],
        help_text="MiB of one GPU's memory per task.",
    )
    gpu_fraction_devices = WholeNumberField(
        default=1,
        validators=[
            MinValueValidator(1, "Fractional devices must be at least 1 (got %(show_value)s)."),
            limits.at_most(limits.MAX_FRACTION_DEVICES, "Fractional devices must be at most %(limit_value)s"),
        ],
        help_text="Devices that each receive the fraction or memory (gpu-fraction-num-devices).",
    )
    cpu_millicores = WholeNumberField(
        default=0,
        validators=[
            limits.at_most(
                limits.MAX_CPU_MILLICORES, "CPU must be at most %(limit_value)s millicores per task"
            )
        ],
        help_text="CPU per task in millicores.",
    )
    memory_mib = WholeNumberField(
        default=0,
        validators=[
            limits.at_most(limits.MAX_MEMORY_MIB, "Memory must be at most %(limit_value)s MiB per task")
        ],
        help_text="Memory per task in MiB.",
    )

    image = models.CharField(max_length=500, blank=True)
    command = models.TextField(blank=True)
    duration = models.DurationField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(limits.MIN_DURATION, "Duration must be at least 1 second."),
            MaxValueValidator(
                limits.MAX_DURATION, f"Duration must be at most {limits.MAX_DURATION.days} days"
            ),
        ],
        help_text="Run time on the simulated cluster (1 second to 365 days).",
    )

    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    message = models.TextField(blank=True, help_text="Latest job-level scheduling message.")
    # What blocks a pending job, as the last cycle's engine found it (``scheduling/blockers.py``):
    # {"items": [...]}; None when nothing is recorded.
    blockers = models.JSONField(null=True, blank=True, help_text="What blocks the pending job (last cycle).")
    # When the job arrived: the submit, or for a job read from a cluster the creationTimestamp of
    # its top owner (cluster/sync.py), which KAI's job order reads. Not auto_now_add, which would
    # overwrite the cluster's time with the sync's.
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="Last start (for min-runtimes).")
    finished_at = models.DateTimeField(null=True, blank=True)
    last_evicted_at = models.DateTimeField(null=True, blank=True)
    restart_policy = models.CharField(
        max_length=16,
        choices=RestartPolicy.choices,
        default=RestartPolicy.ON_FAILURE,
        help_text="What happens to an evicted job: OnFailure = back to pending, Never = it fails.",
    )
    stale_since = models.DateTimeField(
        null=True, blank=True, help_text="When the running gang first fell below its minimum (§3.10)."
    )
    # Set for jobs the Kubernetes backend found in the cluster (not submitted in the portal).
    namespace = models.CharField(max_length=253, blank=True, help_text="Kubernetes namespace, if any.")
    cluster_key = models.CharField(
        max_length=600,
        blank=True,
        db_index=True,
        help_text="namespace/kind/name of the pod group in the cluster.",
    )
    # KAI orders jobs of one creation second by their PodGroup's name (its PodGroupInfo.UID).
    pod_group_name = models.CharField(
        max_length=253,
        blank=True,
        default="",
        help_text="The job's PodGroup in the cluster; breaks ties between jobs created in one second.",
    )

    # Placement rules of the job's pods, in Kubernetes' shape (jobs found in the cluster, or a
    # manifest that had them): nodeSelector {label: value}; tolerations [{key, operator, value,
    # effect}]; node affinity {"required": [[{key, operator, values}], ...] (terms, any one),
    # "preferred": [{weight, expressions: [...]}]}. Empty: no rule.
    node_selector = models.JSONField(default=dict, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    node_affinity = models.JSONField(default=dict, blank=True)

    # The client's Idempotency-Key of the submission: a retry with the same key (same
    # submitter) gets this job back instead of a duplicate (``submission.submit_once``).
    idempotency_key = models.CharField(max_length=255, blank=True, default="", editable=False)
    # SHA-256 of the request that created the job with that key (``submission.request_digest``):
    # the same key with another body is refused (409), not answered with this job. Empty for jobs
    # submitted before it was kept: any retry of those is a replay.
    request_digest = models.CharField(max_length=64, blank=True, default="", editable=False)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["queue", "state"], name="job_queue_state"),
            models.Index(fields=["state", "created_at"], name="job_state_created"),
            models.Index(fields=["-created_at"], name="job_created_desc"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(gpu_fraction__isnull=True) | Q(gpu_fraction__gt=0, gpu_fraction__lt=1),
                name="job_gpu_fraction_open_unit_interval",
            ),
            models.CheckConstraint(condition=Q(min_member__lte=models.F("task_count")), name="job_gang_fits"),
            # The name rule of ``_check_name``, kept by the database too: two submits that both
            # passed the check cannot both commit (``submission.submit`` words the loser's refusal).
            models.UniqueConstraint(
                fields=["queue", "name"],
                condition=live_name_taken_condition(),
                name="job_live_name_unique_in_queue",
                violation_error_message=(
                    "The queue already has a pending or running job of this name; choose another name, "
                    "or cancel that job first."
                ),
            ),
            models.UniqueConstraint(
                fields=["submitter", "idempotency_key"],
                condition=~Q(idempotency_key=""),
                name="job_idempotency_key_per_submitter",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_preemptible(self) -> bool:
        if self.preemptibility:
            return self.preemptibility == Preemptibility.PREEMPTIBLE
        return (self.priority if self.priority is not None else 50) < 100

    @property
    def is_terminal(self) -> bool:
        return self.state not in JobState.active()

    @property
    def pod_namespace(self) -> str:
        """The namespace its pods are in: the cluster's, else (simulated) its queue's name, as the
        scheduling messages name them (two jobs of one name in two namespaces told apart)."""
        return self.namespace or self.queue.name

    def clean(self) -> None:
        if self.priority is None and self.priority_class in PRIORITY_VALUES:
            self.priority = PRIORITY_VALUES[PriorityClass(self.priority_class)]
        errors: dict[str, list[str]] = {}
        self._check_name(errors)
        self._check_queue_is_leaf(errors)
        self._take_queue_pool(errors)
        self._check_gpu_request(errors)
        if (
            isinstance(self.min_member, int)
            and isinstance(self.task_count, int)
            and self.min_member > self.task_count
        ):
            errors.setdefault("min_member", []).append(
                f"Gang minimum ({self.min_member}) cannot be more than "
                f"the number of tasks ({self.task_count})."
            )
        if errors:
            raise ValidationError(errors)

    def validate_constraints(self, exclude: Any = None) -> None:
        # job_live_name_unique_in_queue is ``_check_name``'s rule, checked there with a message that
        # names the queue and the job; the database enforces it (``submission.submit`` words a refusal
        # by the same message). Leaving "name" out skips only that constraint.
        super().validate_constraints(exclude={*(exclude or ()), "name"})

    def _check_name(self, errors: dict[str, list[str]]) -> None:
        """Portal jobs become Kubernetes objects named after the job: a DNS-1123 label, unique among
        the queue's live jobs. Jobs found in the cluster (``cluster_key``) keep the name they have there,
        and a stored job is only re-checked when its name changes."""
        if self.cluster_key or not isinstance(self.name, str) or not self.name:
            return
        renamed = self._state.adding or Job.objects.filter(pk=self.pk).exclude(name=self.name).exists()
        if not renamed:
            return
        problems = job_name_problems(self.name)
        if problems:
            errors.setdefault("name", []).extend(problems)
            return
        if self.queue_id is not None and self.state in JobState.active():
            clash = Job.objects.filter(queue_id=self.queue_id, name=self.name, state__in=JobState.active())
            if clash.exclude(pk=self.pk).exists():
                errors.setdefault("name", []).append(self.name_taken_message())

    def live_name_taken(self) -> bool:
        """Another of the queue's pending or running portal jobs has this job's name (the rows
        the database's constraint compares; ``_check_name`` also counts jobs found in the cluster)."""
        clash = Job.objects.filter(live_name_taken_condition(), queue_id=self.queue_id, name=self.name)
        return clash.exclude(pk=self.pk).exists()

    def name_taken_message(self) -> str:
        return (
            f"Queue '{self.queue}' already has a pending or running job named '{self.name}'; "
            "choose another name, or cancel that job first."
        )

    def _check_queue_is_leaf(self, errors: dict[str, list[str]]) -> None:
        if self.queue_id is None:
            return
        moved = self._state.adding or Job.objects.filter(pk=self.pk).exclude(queue_id=self.queue_id).exists()
        if moved and self.queue.children.exists():
            errors.setdefault("queue", []).append(
                f"Queue '{self.queue}' has child queues; jobs may only be submitted to leaf queues."
            )

    def _take_queue_pool(self, errors: dict[str, list[str]]) -> None:
        """A job runs in its queue's node pool (KAI: the queue's scheduling shard).

        Set on submission; a job already submitted keeps the pool it ran in."""
        if self.queue_id is None or not self._state.adding:
            return
        pool = self.queue.node_pool
        if self.node_pool_id is not None and self.node_pool_id != pool.pk:
            errors.setdefault("node_pool", []).append(
                f"Queue '{self.queue}' is in node pool '{pool}', and a job runs in its queue's pool; "
                f"submit to a queue of node pool '{self.node_pool}', or leave the pool out."
            )
            return
        self.node_pool = pool

    def _check_gpu_request(self, errors: dict[str, list[str]]) -> None:
        fraction, memory, whole = self.gpu_fraction, self.gpu_memory_mib, self.gpu_count
        if fraction is not None:
            try:
                in_range = 0 < fraction < 1
            except TypeError:
                in_range = True  # not a number: the field itself reports it
            if not in_range:
                errors.setdefault("gpu_fraction", []).append(
                    f"GPU fraction must be strictly between 0 and 1 (got {fraction}); "
                    "request whole GPUs for one device or more."
                )
        forms = [
            label
            for label, used in (
                ("whole GPUs", isinstance(whole, int) and whole > 0),
                ("a GPU fraction", fraction is not None),
                ("GPU memory", memory is not None),
            )
            if used
        ]
        if len(forms) > 1:
            field = "gpu_memory_mib" if memory is not None else "gpu_fraction"
            errors.setdefault(field, []).append(
                "Request GPUs in one way per task: whole GPUs, a GPU fraction or GPU memory "
                f"(got {' and '.join(forms)})."
            )
        if self.gpu_fraction_devices not in (None, 1) and fraction is None and memory is None:
            errors.setdefault("gpu_fraction_devices", []).append(
                "Fractional devices only apply to a GPU fraction or GPU memory request."
            )
        shared = fraction is not None or memory is not None
        if shared and self.node_pool is not None and not self.node_pool.gpu_sharing:
            errors.setdefault("node_pool", []).append(
                f"Node pool '{self.node_pool}' does not allow GPU sharing; "
                "request whole GPUs or choose another pool."
            )


class Pod(models.Model):
    """One task of a job: what is bound to a node and runs there.

    ``reason`` is the latest scheduling explanation (e.g. why it is pending);
    the full history is in ``scheduling.Decision``.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="pods")
    index = WholeNumberField()
    name = models.CharField(max_length=253)
    # The cluster pod's uid (Kubernetes backend): a pod re-created under the same name is another pod.
    uid = models.CharField(max_length=64, blank=True, default="")
    state = models.CharField(max_length=16, choices=PodState.choices, default=PodState.PENDING)
    node = models.ForeignKey(
        "cluster.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="pods"
    )
    gpu_devices = models.ManyToManyField("cluster.GpuDevice", blank=True, related_name="pods")
    gpu_group = models.CharField(max_length=64, blank=True, help_text="KAI GPU group of a shared device.")
    reason = models.TextField(blank=True)
    reason_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    releasing_since = models.DateTimeField(
        null=True, blank=True, help_text="When eviction or deletion began (Kubernetes deletionTimestamp)."
    )

    objects = PodQuerySet.as_manager()

    class Meta:
        ordering = ["job_id", "index"]
        constraints = [models.UniqueConstraint(fields=["job", "index"], name="pod_unique_index_in_job")]
        indexes = [
            models.Index(fields=["job", "state"], name="pod_job_state"),
            models.Index(fields=["node", "state"], name="pod_node_state"),
            models.Index(fields=["state"], name="pod_state"),
        ]

    def __str__(self) -> str:
        return self.name
