"""Reading a scenario file (shared/docs/scenario-format.md and docs/scenario-extensions.md):
its config, nodes and queues here, its jobs in ``scheduler.scenario.jobs``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from scheduler.model import (
    DEFAULT_ACTIONS,
    DEFAULT_POOL,
    PLACEMENTS,
    RESOURCES,
    TAINT_EFFECTS,
    Config,
    ExternalUsage,
    Node,
    Queue,
    QueueResource,
    Snapshot,
    Taint,
)
from scheduler.scenario.jobs import parse_job
from scheduler.scenario.schema import Scenario, ScenarioError, as_list, check_keys

TOP_KEYS = {"name", "description", "source", "config", "nodes", "queues", "jobs", "expected"}
CONFIG_KEYS = {
    "actions",
    "rounds",
    "placement",
    "now",
    "usage_window_hours",
    "usage_half_life_hours",
    "usage_k",
    # docs/scenario-extensions.md
    "gpu_placement",
    "cpu_placement",
    "reclaimer_saturation_multiplier",
    "pool_saturation_multiplier",
    "node_local_max_stream",
    "kai_gpu_counter_drift",
    "fragmentation_requests",
}
NODE_KEYS = {
    "name",
    "gpus",
    "gpu_memory_mib",
    "cpu_millis",
    "memory_mib",
    "pool",
    "labels",
    "unschedulable",
    "max_pods",
    "taints",  # docs/scenario-extensions.md
    "external",  # docs/scenario-extensions.md
}
QUEUE_KEYS = {
    "name",
    "parent",
    "priority",
    "resources",
    "reclaim_min_runtime_s",
    "preempt_min_runtime_s",
    "historical_usage",
    # Our extension of the shared format: the queue's node pool (KAI shard); unset = the parent's,
    # and for a top-level queue the default pool.
    "pool",
}
QRES_KEYS = {"quota", "limit", "over_quota_weight"}
# Beyond scenario-format.md v1 (docs/scenario-extensions.md): expected.messages (job -> exact
# PodGroup message) and a task's expected reason (exact pod event text).
EXPECTED_KEYS = {"tasks", "queues", "messages"}
EXPECTED_TASK_KEYS = {"status", "node", "gpu_group", "reason"}
EXPECTED_QUEUE_KEYS = {"deserved", "fair_share", "allocated", "requested"}


def _parse_now(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _config(data: Mapping[str, Any], path: str) -> Config:
    c = check_keys(data, CONFIG_KEYS, "config", path)
    cfg = Config(
        actions=tuple(c.get("actions", DEFAULT_ACTIONS)),
        rounds=int(c.get("rounds", 1)),
        placement=str(c.get("placement", "binpack")),
        usage_window_hours=c.get("usage_window_hours"),
        usage_half_life_hours=c.get("usage_half_life_hours"),
        usage_k=c.get("usage_k"),
    )
    if "now" in c:
        cfg.now = _parse_now(c["now"])
    for key in ("placement", "gpu_placement", "cpu_placement"):
        value = c.get(key)
        if value is not None and value not in PLACEMENTS:
            raise ScenarioError(
                f"{path}: config.{key} must be binpack, spread or fragmentation, not {value!r}"
            )
    cfg.gpu_placement = c.get("gpu_placement")
    cfg.cpu_placement = c.get("cpu_placement")
    if "fragmentation_requests" in c:
        cfg.fragmentation_requests = _fragmentation_requests(c["fragmentation_requests"], path)
    mult = c.get("reclaimer_saturation_multiplier", 1.0)
    pools = c.get("pool_saturation_multiplier") or {}
    if not isinstance(pools, dict):
        raise ScenarioError(f"{path}: config.pool_saturation_multiplier must map pool names to numbers")
    for v in [mult, *pools.values()]:
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 1:
            raise ScenarioError(f"{path}: a reclaimer saturation multiplier must be a number >= 1")
    cfg.reclaimer_saturation_multiplier = float(mult)
    if "node_local_max_stream" in c:
        cap = c["node_local_max_stream"]
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
            raise ScenarioError(
                f"{path}: config.node_local_max_stream must be a whole number >= 0, or null for every "
                "stream (KAI's behaviour)"
            )
        cfg.node_local_max_stream = cap
    if "kai_gpu_counter_drift" in c:
        drift = c["kai_gpu_counter_drift"]
        if not isinstance(drift, bool):
            raise ScenarioError(
                f"{path}: config.kai_gpu_counter_drift must be true (KAI's counters, the default) or false"
            )
        cfg.kai_gpu_counter_drift = drift
    cfg.pool_saturation_multiplier = {str(k): float(v) for k, v in pools.items()}
    return cfg


def _fragmentation_requests(data: Any, path: str) -> tuple[tuple[float, float, float, float], ...]:
    """config.fragmentation_requests: a list of {gpu, cpu_millis, memory_mib, weight}
    (docs/scenario-extensions.md)."""
    keys = ("gpu", "cpu_millis", "memory_mib", "weight")
    out = []
    for i, item in enumerate(as_list(data, "config.fragmentation_requests", path)):
        where = f"config.fragmentation_requests[{i}]"
        d = check_keys(item, set(keys), where, path)
        values = [d.get(k, 1 if k == "weight" else 0) for k in keys]
        if any(isinstance(v, bool) or not isinstance(v, int | float) or v < 0 for v in values):
            raise ScenarioError(
                f"{path}: {where}: gpu, cpu_millis, memory_mib and weight must be numbers >= 0"
            )
        out.append((float(values[0]), float(values[1]), float(values[2]), float(values[3])))
    if not out or sum(r[3] for r in out) <= 0:
        raise ScenarioError(
            f"{path}: config.fragmentation_requests needs at least one request with a weight above 0"
        )
    return tuple(out)


def _taint(data: Any, where: str, path: str) -> Taint:
    d = check_keys(data, {"key", "value", "effect"}, where, path)
    if not d.get("key"):
        raise ScenarioError(f"{path}: {where} without key")
    effect = str(d.get("effect", "NoSchedule"))
    if effect not in TAINT_EFFECTS:
        raise ScenarioError(f"{path}: {where}: effect must be one of {', '.join(TAINT_EFFECTS)}")
    return Taint(str(d["key"]), str(d.get("value", "")), effect)


def _node(data: Mapping[str, Any], path: str) -> Node:
    d = check_keys(data, NODE_KEYS, "node", path)
    if "name" not in d:
        raise ScenarioError(f"{path}: node without name")
    return Node(
        name=str(d["name"]),
        gpus=int(d.get("gpus", 0)),
        gpu_memory_mib=float(d.get("gpu_memory_mib", 81920)),
        cpu_millis=float(d.get("cpu_millis", 1_000_000)),
        memory_mib=float(d.get("memory_mib", 1_073_741_824)),
        pool=str(d.get("pool", DEFAULT_POOL)),
        labels={str(k): str(v) for k, v in (d.get("labels") or {}).items()},
        unschedulable=bool(d.get("unschedulable", False)),
        max_pods=int(d.get("max_pods", 110)),
        taints=[
            _taint(t, f"node {d['name']}.taints[{i}]", path)
            for i, t in enumerate(as_list(d.get("taints"), f"node {d['name']}.taints", path))
        ],
        external=_external(d.get("external"), f"node {d['name']}.external", path),
    )


def _external(data: Any, where: str, path: str) -> ExternalUsage:
    d = check_keys(data, {"gpus", "cpu_millis", "memory_mib", "pods"}, where, path)
    try:
        held = ExternalUsage(
            gpus=int(d.get("gpus", 0)),
            cpu_millis=float(d.get("cpu_millis", 0)),
            memory_mib=float(d.get("memory_mib", 0)),
            pods=int(d.get("pods", 0)),
        )
    except (TypeError, ValueError) as error:
        raise ScenarioError(f"{path}: {where}: {error}") from error
    if min(held.gpus, held.cpu_millis, held.memory_mib, held.pods) < 0:
        raise ScenarioError(f"{path}: {where}: amounts must not be negative")
    return held


def _queue(data: Mapping[str, Any], index: int, path: str) -> Queue:
    d = check_keys(data, QUEUE_KEYS, "queue", path)
    if "name" not in d:
        raise ScenarioError(f"{path}: queue without name")
    where = f"queue {d['name']}"
    res = check_keys(d.get("resources"), set(RESOURCES), f"{where}.resources", path)
    resources = {}
    for r, spec in res.items():
        s = check_keys(spec, QRES_KEYS, f"{where}.resources.{r}", path)
        resources[r] = QueueResource(
            quota=float(s.get("quota", 0)),
            limit=float(s.get("limit", -1)),
            over_quota_weight=float(s.get("over_quota_weight", 1)),
        )
    usage = check_keys(d.get("historical_usage"), set(RESOURCES), f"{where}.historical_usage", path)
    return Queue(
        name=str(d["name"]),
        parent=str(d["parent"]) if d.get("parent") is not None else None,
        priority=int(d.get("priority", 100)),
        resources=resources,
        reclaim_min_runtime_s=d.get("reclaim_min_runtime_s"),
        preempt_min_runtime_s=d.get("preempt_min_runtime_s"),
        historical_usage={k: float(v) for k, v in usage.items()},
        created_index=index,
        pool=str(d["pool"]) if d.get("pool") is not None else None,
    )


def parse(data: Any, path: str = "<scenario>") -> Scenario:
    top = check_keys(data, TOP_KEYS, "the top level", path)
    for key in ("name", "nodes", "queues"):
        if not top.get(key):
            raise ScenarioError(f"{path}: missing required key {key!r}")
    config = _config(top.get("config") or {}, path)
    nodes = [_node(n, path) for n in top["nodes"]]
    queues = [_queue(q, i, path) for i, q in enumerate(top["queues"])]
    jobs = [parse_job(j, path) for j in top.get("jobs") or []]
    parents = {q.parent for q in queues if q.parent}
    for job in jobs:
        if job.queue in parents:
            raise ScenarioError(f"{path}: job {job.name} names queue {job.queue}, which is not a leaf queue")
    expected = check_keys(top.get("expected"), EXPECTED_KEYS, "expected", path)
    for name, spec in (expected.get("tasks") or {}).items():
        check_keys(spec, EXPECTED_TASK_KEYS, f"expected.tasks.{name}", path)
    for name, spec in (expected.get("queues") or {}).items():
        check_keys(spec, EXPECTED_QUEUE_KEYS, f"expected.queues.{name}", path)
    return Scenario(str(top["name"]), path, Snapshot(nodes, queues, jobs), config, expected)


def load(path: str | Path) -> Scenario:
    with open(path, encoding="utf-8") as fh:
        return parse(yaml.safe_load(fh), str(path))
