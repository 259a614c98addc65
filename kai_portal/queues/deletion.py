"""Deleting a queue, the one rule for the page and the API.

A queue with child queues or with jobs is kept: its children would lose their place in the tree,
and its jobs' history (states, decisions, usage) points at it. In kubernetes mode its Queue object
goes with it, in the same transaction (a refused object delete rolls the row back).
"""

from __future__ import annotations

from kai_portal.queues import cluster_writes
from kai_portal.queues.models import Queue


class QueueInUse(Exception):
    """The queue still has child queues or jobs; the message says which."""


def delete_locked(locked: Queue) -> None:
    """Delete ``locked`` (a row the caller's transaction holds ``select_for_update``) and its
    Queue object. Raises ``QueueInUse``, or ``cluster_writes.QueueWriteRefused`` from the cluster."""
    if locked.children.exists():
        raise QueueInUse(f"Queue '{locked}' has child queues; delete or move them first.")
    if locked.jobs.exists():
        raise QueueInUse(f"Queue '{locked}' has jobs; it is kept as their history.")
    locked.delete()
    cluster_writes.unpublish(locked)
