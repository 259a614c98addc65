"""The fields KAI fills on the objects its tooling reads, as lists of field paths (docs/kai-objects.md).

Read from KAI's source (podgrouper, podgroup controller, scheduler status updater, queue
controller, binder); the cluster tests check that the portal fills each of them, and the lead
compares the lists with KAI's recorded output of the quickstart. A path names a field that is
present and not empty; ``[]`` stands for every item of a list, and a map key is written as it is
(``metadata.annotations.kai.scheduler/top-owner-metadata``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# A running bare pod of the quickstart (gpu-pod.yaml): podgrouper, scheduler, podgroup controller.
POD_GROUP_RUNNING = (
    "metadata.name",  # pg-<top owner>-<uid>
    "metadata.namespace",
    "metadata.labels.kai.scheduler/queue",  # the top owner's labels
    "metadata.annotations.kai.scheduler/top-owner-metadata",
    "metadata.annotations.kai.scheduler/last-start-timestamp",  # scheduler, when allocated
    "metadata.ownerReferences[].apiVersion",
    "metadata.ownerReferences[].kind",
    "metadata.ownerReferences[].name",
    "metadata.ownerReferences[].uid",
    "spec.minMember",
    "spec.queue",
    "spec.priorityClassName",
    "status.resourcesStatus.allocated",  # podgroup controller
    "status.resourcesStatus.requested",
)
# A gang that waits (docs/batch/batch-job-min-member.yaml on one GPU): the scheduler's condition.
POD_GROUP_WAITING = (
    "metadata.name",
    "metadata.ownerReferences[].kind",
    "spec.minMember",
    "spec.queue",
    "spec.priorityClassName",
    "status.resourcesStatus.requested",
    "status.schedulingConditions[].type",  # UnschedulableOnNodePool
    "status.schedulingConditions[].nodePool",
    "status.schedulingConditions[].reason",
    "status.schedulingConditions[].message",
    "status.schedulingConditions[].status",
    "status.schedulingConditions[].transitionID",
    "status.schedulingConditions[].lastTransitionTime",
)
# KAI's quickstart queues with both pods running: the queue controller's fields.
QUEUE_PARENT = (
    "status.childQueues",
    "status.allocated",
    "status.requested",
)
QUEUE_LEAF = (
    "status.allocated",
    "status.requested",
)
# The binder's event for each bound pod.
BOUND_EVENT = (
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "reason",  # Bound
    "message",  # Pod bound successfully to node <node>
    "type",  # Normal
    "source.component",  # binder
    "count",
    "firstTimestamp",
    "lastTimestamp",
)
ALL_LISTS = {
    "POD_GROUP_RUNNING": POD_GROUP_RUNNING,
    "POD_GROUP_WAITING": POD_GROUP_WAITING,
    "QUEUE_PARENT": QUEUE_PARENT,
    "QUEUE_LEAF": QUEUE_LEAF,
    "BOUND_EVENT": BOUND_EVENT,
}


def field_paths(obj: Any, prefix: str = "") -> set[str]:
    """Every path in ``obj`` whose value is present and not empty, its parents included."""
    out: set[str] = set()
    if isinstance(obj, Mapping):
        for key, value in obj.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if value in (None, "", [], {}):
                continue
            out.add(path)
            out |= field_paths(value, path)
    elif isinstance(obj, list):
        for item in obj:
            out |= field_paths(item, f"{prefix}[]")
    return out
