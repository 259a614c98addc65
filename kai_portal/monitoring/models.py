"""Running totals behind the Prometheus counters and the cycle-duration histogram.

Why in the database: the cycle runs in a Celery worker while ``/metrics`` is
answered by any one of several gunicorn workers (and pods). An in-process
counter would hold whatever that one process saw; a row here is incremented in
the same transaction that writes the cycle's decisions, so every web process
reports the same monotonic totals, they survive restarts, and pruning old
history (``prune_history``) never makes a counter go down.
"""

from __future__ import annotations

from django.db import models


class MetricTotal(models.Model):
    """One monotonically increasing number: a counter for one label set, or a histogram part.

    ``labels`` is the label set as canonical JSON (sorted keys, no spaces), so
    one (name, labels) pair is one row.
    """

    name = models.CharField(max_length=100)
    labels = models.CharField(max_length=400, default="{}")
    value = models.FloatField(default=0.0)

    class Meta:
        ordering = ["name", "labels"]
        constraints = [models.UniqueConstraint(fields=["name", "labels"], name="metric_total_one_per_labels")]

    def __str__(self) -> str:
        return f"{self.name}{self.labels} = {self.value}"


class JobGpuUse(models.Model):
    """A job's GPU use as NVIDIA's DCGM exporter measured it, averaged over the last read's window.

    Written by the worker (``monitoring/gpu_use.py: read_gpu_use``), never in a request. ``gpus_seen``
    is how many (pod, GPU) series the read found for the job's pods: 0 means Prometheus had no DCGM
    series for them (the means are then empty), which pages say rather than showing 0 %.
    """

    job = models.OneToOneField("workloads.Job", on_delete=models.CASCADE, related_name="gpu_use")
    read_at = models.DateTimeField()
    window_seconds = models.PositiveIntegerField()
    gpus_seen = models.PositiveIntegerField(default=0)
    idle_gpus_seen = models.PositiveIntegerField(default=0, help_text="GPUs under the idle threshold.")
    mean_utilisation = models.FloatField(null=True, blank=True, help_text="Percent, mean over its GPUs.")
    memory_used_mib = models.FloatField(null=True, blank=True, help_text="Framebuffer used, all its GPUs.")

    def __str__(self) -> str:
        return f"{self.job_id}: {self.mean_utilisation} % on {self.gpus_seen} GPU(s) at {self.read_at}"


class GpuUseRead(models.Model):
    """The outcome of each attempt to read DCGM metrics from Prometheus (the latest is what pages say).

    A failed attempt keeps every stored ``JobGpuUse``: pages then show the last good values as
    stale, with this row's message, instead of losing them.
    """

    class Outcome(models.TextChoices):
        OK = "ok", "read"
        UNREACHABLE = "unreachable", "Prometheus unreachable"
        ERROR = "error", "Prometheus answered with an error"
        GARBAGE = "garbage", "Prometheus's answer was not understood"

    attempted_at = models.DateTimeField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    message = models.TextField(blank=True)
    series = models.PositiveIntegerField(default=0)
    jobs = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False, help_text="More series than GPU_USE_MAX_SERIES.")

    class Meta:
        ordering = ["-attempted_at", "-id"]
        indexes = [models.Index(fields=["-attempted_at"], name="gpu_use_read_latest")]

    def __str__(self) -> str:
        return f"{self.attempted_at}: {self.outcome}"
