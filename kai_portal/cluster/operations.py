"""Admin operations on nodes: cordon, uncordon, remove (as Kubernetes does them).

* cordon: the node keeps its pods but the scheduler places nothing new on it;
* uncordon: it takes pods again;
* remove: like ``kubectl drain`` then delete: every pod on the node lets go of
  it at once and goes back to pending (or fails, per its job's restart
  policy), then the node and its GPU devices are deleted.

These act on the portal's rows, which are the cluster for the simulated
backend. With the Kubernetes backend the cluster is the source of truth: cordon
with ``kubectl cordon``; the next observe brings the change in.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from kai_portal.nodes.models import Node
from kai_portal.workloads import lifecycle
from kai_portal.workloads.choices import PodState
from kai_portal.workloads.models import Pod


def cordon_node(node: Node) -> bool:
    """Mark the node unschedulable. False if it already was."""
    return bool(
        Node.objects.filter(pk=node.pk, schedulable=True).update(schedulable=False, updated_at=timezone.now())
    )


def uncordon_node(node: Node) -> bool:
    """Let the node take new pods again. False if it already did."""
    return bool(
        Node.objects.filter(pk=node.pk, schedulable=False).update(schedulable=True, updated_at=timezone.now())
    )


@transaction.atomic
def remove_node(node: Node, now: datetime | None = None) -> int:
    """Drain and delete the node; returns how many pods were moved off it."""
    now = now or timezone.now()
    pods = Pod.objects.filter(
        node_id=node.pk, state__in=[PodState.BOUND, PodState.RUNNING, PodState.RELEASING]
    ).select_related("job")
    moved = 0
    jobs = set()
    for pod in pods:
        lifecycle.release_pod(pod, now, reason=f"Node {node.name} was removed from the cluster.")
        jobs.add(pod.job_id)
        moved += 1
    Node.objects.filter(pk=node.pk).delete()
    lifecycle.refresh_job_states(jobs, now)
    return moved
