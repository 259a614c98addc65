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
