"""A capacity plan: what an admin asked (inputs), how far the worker got (status, progress), and
what the two replays gave (outputs). Written by ``tasks.run_plan`` only; pages read it."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PlanRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="plan_runs"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0, help_text="Percent done, 0-100.")
    stage = models.CharField(max_length=200, blank=True, help_text="What the worker is doing now.")
    inputs = models.JSONField(default=dict, help_text="Window and changes, as the form cleaned them.")
    outputs = models.JSONField(default=dict, blank=True, help_text="Per team and queue, both replays.")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"plan {self.pk} ({self.status})"

    @property
    def done(self) -> bool:
        return self.status in (self.Status.SUCCEEDED, self.Status.FAILED)
