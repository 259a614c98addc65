"""Free GPUs over the schedulable nodes, kept per node version: the free side of reclaim's quick
screen (consolidation counts KAI's allocatable sum instead: ``consolidation.allocatable_gpus``)."""

from __future__ import annotations

from scheduler.session import Session


def free_gpus(session: Session) -> float:
    return session.per_node_version(free_gpus_scan)


def free_gpus_scan(session: Session) -> float:
    """The same sum read afresh (the reference tests/engine/test_node_search.py holds the cache to)."""
    free = 0.0
    for ns in session.nodes.values():
        if ns.node.unschedulable:
            continue
        for d in ns.devices:
            m = d.memory
            # a full device adds 0.0, which leaves the sum as it is: skipped (most of a busy pool)
            if m > 0 and d.active < m:
                free += (m - d.active) / m
    return free
