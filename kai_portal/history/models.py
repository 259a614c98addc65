"""Records of the scheduling loop: cycles, per-pod decisions, usage history.

The scheduling loop writes these; they are history and are never rewritten,
only pruned after ``REASON_RETENTION_DAYS`` / ``USAGE_RETENTION_DAYS``.
"""

from __future__ import annotations

from django.db import models


class SchedulingCycle(models.Model):
    """One run of the scheduler over a snapshot of the cluster."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        SKIPPED = "skipped", "Skipped (another cycle held the lock)"
        # Lost the cycle lock while it ran (Redis restarted, the lock expired) and a newer cycle
        # may have taken over: it applied and persisted nothing (scheduling/fencing.py).
        ABORTED = "aborted", "Aborted (lost the cycle lock)"

    started_at = models.DateTimeField(db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    allocated_count = models.PositiveIntegerField(default=0)
    pipelined_count = models.PositiveIntegerField(default=0)
    evicted_count = models.PositiveIntegerField(default=0)
    unschedulable_count = models.PositiveIntegerField(default=0)
    counters = models.JSONField(default=dict, blank=True, help_text="Engine counters for this cycle.")
    error = models.TextField(blank=True)
    # The node pool this cycle scheduled (its shard, SCHEDULING_SHARDS); empty: the whole cluster.
    pool = models.CharField(max_length=253, blank=True, default="")

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["pool", "-started_at"], name="cycle_pool_started")]

    def __str__(self) -> str:
        return f"cycle {self.pk} at {self.started_at:%Y-%m-%d %H:%M:%S}"


class CycleFence(models.Model):
    """The fencing token of one cycle lock: raised by every cycle that takes the lock.

    One row per lock name. A cycle applies and persists its result only while the stored token
    is still the one it took (scheduling/fencing.py): the Redis lock can be lost under a running
    cycle, this row cannot, so two cycles that both believe they hold the lock never both commit.
    """

    name = models.CharField(max_length=64, unique=True)
    token = models.PositiveBigIntegerField(default=0)
    holder = models.PositiveBigIntegerField(null=True, blank=True, help_text="The cycle that took it.")
    taken_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name}: token {self.token} (cycle {self.holder})"


class Decision(models.Model):
    """What one cycle decided about one pod, and why.

    One row per pod per cycle per kind. ``allocated``/``pipelined`` name the
    node; ``evicted`` names the action and the job and queue that caused it;
    ``unschedulable`` carries KAI's reason text for the pod.
    """

    class Kind(models.TextChoices):
        ALLOCATED = "allocated", "Allocated"
        PIPELINED = "pipelined", "Pipelined"
        EVICTED = "evicted", "Evicted"
        UNSCHEDULABLE = "unschedulable", "Unschedulable"

    class Action(models.TextChoices):
        NONE = "", "-"
        ALLOCATE = "allocate", "Allocate"
        CONSOLIDATION = "consolidation", "Consolidation"
        RECLAIM = "reclaim", "Reclaim"
        PREEMPT = "preempt", "Preempt"
        STALE_GANG = "stale_gang", "Stale gang eviction"

    cycle = models.ForeignKey(SchedulingCycle, on_delete=models.CASCADE, related_name="decisions")
    # History outlives the pod: a deleted pod leaves its name here (retention.py prunes old rows).
    pod = models.ForeignKey(
        "workloads.Pod", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    pod_name = models.CharField(max_length=253, blank=True, help_text="The pod's name when decided.")
    job = models.ForeignKey("workloads.Job", on_delete=models.CASCADE, related_name="decisions")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    action = models.CharField(max_length=16, choices=Action.choices, blank=True, default=Action.NONE)
    node = models.ForeignKey(
        "cluster.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    evictor_job = models.ForeignKey(
        "workloads.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="evictions_caused"
    )
    evictor_queue = models.ForeignKey(
        "queues.Queue", null=True, blank=True, on_delete=models.SET_NULL, related_name="evictions_caused"
    )
    reason = models.CharField(max_length=64, blank=True, help_text="KAI reason code, e.g. OverLimit.")
    message = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-cycle_id", "pod_id"]
        constraints = [
            models.UniqueConstraint(fields=["cycle", "pod", "kind"], name="decision_one_per_pod_cycle_kind")
        ]
        indexes = [
            models.Index(fields=["pod", "cycle"], name="decision_pod_cycle"),
            models.Index(fields=["job", "cycle"], name="decision_job_cycle"),
        ]

    def __str__(self) -> str:
        return f"{self.pod_name or self.pod} {self.kind} in cycle {self.cycle_id}"


class JobMessage(models.Model):
    """The job-level (pod group) message of one cycle, e.g. why the gang waits."""

    cycle = models.ForeignKey(SchedulingCycle, on_delete=models.CASCADE, related_name="job_messages")
    job = models.ForeignKey("workloads.Job", on_delete=models.CASCADE, related_name="messages")
    reason = models.CharField(max_length=64, blank=True)
    message = models.TextField()

    class Meta:
        ordering = ["-cycle_id"]
        constraints = [models.UniqueConstraint(fields=["cycle", "job"], name="job_message_one_per_cycle")]
        indexes = [models.Index(fields=["job", "cycle"], name="job_message_job_cycle")]

    def __str__(self) -> str:
        return f"{self.job}: {self.message[:60]}"


class UsageSample(models.Model):
    """A queue's use of one resource at one moment (source of historical usage and charts).

    Units: GPU devices, CPU millicores, memory MiB.
    """

    class Resource(models.TextChoices):
        GPU = "gpu", "GPU"
        CPU = "cpu", "CPU"
        MEMORY = "memory", "Memory"

    queue = models.ForeignKey("queues.Queue", on_delete=models.CASCADE, related_name="usage_samples")
    resource = models.CharField(max_length=8, choices=Resource.choices)
    sampled_at = models.DateTimeField()
    cycle = models.ForeignKey(
        SchedulingCycle, null=True, blank=True, on_delete=models.SET_NULL, related_name="usage_samples"
    )
    allocated = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    allocated_non_preemptible = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    requested = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    deserved = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    fair_share = models.DecimalField(max_digits=16, decimal_places=2, default=0)

    class Meta:
        ordering = ["-sampled_at"]
        indexes = [models.Index(fields=["queue", "resource", "sampled_at"], name="usage_queue_resource_time")]

    def __str__(self) -> str:
        return f"{self.queue} {self.resource} at {self.sampled_at:%Y-%m-%d %H:%M:%S}"


class QueueStatus(models.Model):
    """The latest fair-share numbers of one queue and resource, as of the last cycle.

    One row per (queue, resource), overwritten by every cycle in the same
    transaction that writes its decisions, so pages and the API read a queue's
    current deserved / fair share / allocated / requested with one cheap query
    (``queue.statuses.all()``) instead of searching the usage history.
    Units: GPU devices, CPU millicores, memory MiB; ``-1`` = unlimited.
    """

    queue = models.ForeignKey("queues.Queue", on_delete=models.CASCADE, related_name="statuses")
    resource = models.CharField(max_length=8, choices=UsageSample.Resource.choices)
    cycle = models.ForeignKey(
        SchedulingCycle, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    deserved = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    fair_share = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    allocated = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    allocated_non_preemptible = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    requested = models.DecimalField(max_digits=16, decimal_places=2, default=0)
    limit = models.DecimalField(max_digits=16, decimal_places=2, default=-1)
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["queue_id", "resource"]
        verbose_name_plural = "queue statuses"
        constraints = [
            models.UniqueConstraint(fields=["queue", "resource"], name="queue_status_one_per_resource")
        ]

    def __str__(self) -> str:
        return f"{self.queue} {self.resource}: fair share {self.fair_share}, allocated {self.allocated}"


class JobForecast(models.Model):
    """A pending job's queue position and estimated start, as the scheduling worker last computed them.

    Written after every cycle by ``forecast_store.refresh`` (all rows replaced in one
    transaction); pages and the API only read it. Positions are from the cycle at
    ``computed_at`` (exact every cycle); the estimate is from ``estimated_at``, which may be
    older (the simulation runs within a time budget), and null when none was made yet.
    """

    job = models.OneToOneField(
        "workloads.Job", on_delete=models.CASCADE, primary_key=True, related_name="stored_forecast"
    )
    pool = models.CharField(max_length=253)
    queue_position = models.PositiveIntegerField()
    queue_pending = models.PositiveIntegerField()
    cluster_position = models.PositiveIntegerField()
    cluster_pending = models.PositiveIntegerField()
    computed_at = models.DateTimeField(help_text="The cycle the positions are from.")
    estimated_start = models.DateTimeField(null=True, blank=True)
    unknown = models.CharField(max_length=32, blank=True, help_text="Why there is no estimated start.")
    reason = models.CharField(max_length=300, blank=True)
    estimated_at = models.DateTimeField(null=True, blank=True, help_text="Null: not estimated yet.")
    not_before = models.DateTimeField(
        null=True, blank=True, help_text="How far the simulation got without starting it."
    )
    fit_checked_at = models.DateTimeField(
        null=True, blank=True, help_text='When "does it fit on an empty cluster" was last checked.'
    )

    class Meta:
        ordering = ["pool", "cluster_position"]
        indexes = [models.Index(fields=["pool", "cluster_position"], name="forecast_pool_position")]

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.cluster_position} of {self.cluster_pending} in {self.pool}"
