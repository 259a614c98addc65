"""What a pending job waits for, from the engine's reason code (never from its text).

``quota``: only its queue (or an ancestor) holds it back: the queue's limit (``OverLimit``) or,
for a non-preemptible job, its quota (``NonPreemptibleOverQuota``). More nodes would not start
it, so its pods' ``PodScheduled=False`` condition does not say ``Unschedulable`` (the reason
cluster autoscalers add nodes for). ``capacity``: no node has room (a fit error, a gang that
found too few places, a pod larger than any node): more or freed nodes would.
"""

from __future__ import annotations

from typing import Literal

UNSCHEDULABLE = "Unschedulable"
QUOTA_CODES = frozenset({"OverLimit", "NonPreemptibleOverQuota"})
CAPACITY_CODES = frozenset({UNSCHEDULABLE, "PodSchedulingErrors"})

WaitingFor = Literal["quota", "capacity", ""]


def waiting_for(code: str) -> WaitingFor:
    """``quota``, ``capacity``, or ``""`` when it waits for something else (its gang's pods, a
    missing queue, a preemption delay)."""
    if code in QUOTA_CODES:
        return "quota"
    if code in CAPACITY_CODES:
        return "capacity"
    return ""


def condition_reason(code: str) -> str:
    """The PodScheduled=False reason for a pod whose engine reason has this code."""
    return code if code in QUOTA_CODES else UNSCHEDULABLE
