"""Engine benchmark: cycle time, memory and answer checks on KAI-shaped workloads, plus packing
quality against an exact optimum and fairness at steady state. ``python -m scheduler.bench``."""

from __future__ import annotations

from scheduler.bench.workloads import Check, Workload, all_workloads

__all__ = ["Check", "Workload", "all_workloads"]
