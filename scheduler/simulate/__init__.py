"""Simulator: a workload played over simulated time through the engine (no database).

Library first (the portal uses it for estimated start times and what-if
previews), command line second (``python -m scheduler.simulate``)."""

from __future__ import annotations

from scheduler.simulate.core import leaf_queues, simulate, with_quotas
from scheduler.simulate.records import Arrival, EvictionRecord, JobRecord, Sample, SimResult, jain, percentile
from scheduler.simulate.trace import TraceError, generate, read_csv, read_yaml, to_csv

__all__ = [
    "Arrival",
    "EvictionRecord",
    "JobRecord",
    "Sample",
    "SimResult",
    "TraceError",
    "generate",
    "jain",
    "leaf_queues",
    "percentile",
    "read_csv",
    "read_yaml",
    "simulate",
    "to_csv",
    "with_quotas",
]
