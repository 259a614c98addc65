"""Enumerations of the workloads app.

Job (KAI pod group) states, as the portal shows them:

* ``pending``   -- submitted; not all of its gang minimum is running yet.
* ``running``   -- at least the gang minimum of pods is bound or running.
* ``succeeded`` / ``failed`` -- terminal, from the pods' outcome.
* ``cancelled`` -- terminal, withdrawn by a user or admin.

Pod (KAI task) states, a subset of kai-semantics §1.3 that persists between
cycles:

* ``pending``   -- waiting for a node (KAI Pending).
* ``bound``     -- the scheduler bound it to a node; not running yet (KAI
  Binding/Bound).
* ``running``   -- running on its node, charged to its queue.
* ``releasing`` -- being evicted or deleted; still holds its node's resources
  but is no longer charged to its queue (KAI Releasing).
* ``succeeded`` / ``failed`` -- terminal.

KAI's *Allocated* and *Pipelined* exist only inside one cycle: they are kept
as ``scheduling.Decision`` rows, not as pod states. *Evicted* is likewise a
decision: an evicted pod goes to ``releasing``, then back to ``pending``
(it is recreated) once its resources are free.
"""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"

    @classmethod
    def active(cls) -> list[str]:
        """States in which a job still wants or holds resources."""
        return ["pending", "running"]


class PodState(models.TextChoices):
    PENDING = "pending", "Pending"
    BOUND = "bound", "Bound"
    RUNNING = "running", "Running"
    RELEASING = "releasing", "Releasing"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"

    @classmethod
    def holding_resources(cls) -> list[str]:
        """States whose pod occupies node resources."""
        return ["bound", "running", "releasing"]


class RestartPolicy(models.TextChoices):
    """What an evicted job does once its pods are released."""

    ON_FAILURE = "OnFailure", "OnFailure (back to pending)"
    NEVER = "Never", "Never (the job fails)"


class PriorityClass(models.TextChoices):
    """KAI's built-in priority classes (kai-semantics §1.7)."""

    TRAIN = "train", "train (50)"
    BUILD_PREEMPTIBLE = "build-preemptible", "build-preemptible (75)"
    BUILD = "build", "build (100)"
    INFERENCE = "inference", "inference (125)"


PRIORITY_VALUES = {
    PriorityClass.TRAIN: 50,
    PriorityClass.BUILD_PREEMPTIBLE: 75,
    PriorityClass.BUILD: 100,
    PriorityClass.INFERENCE: 125,
}


class Preemptibility(models.TextChoices):
    """Explicit preemptibility; empty means "priority < 100 is preemptible" (§5.4)."""

    DEFAULT = "", "By priority"
    PREEMPTIBLE = "preemptible", "Preemptible"
    NON_PREEMPTIBLE = "non-preemptible", "Non-preemptible"
