"""Scenario files (shared/docs/scenario-format.md): load, run one cycle (or ``rounds``), check.

python -m scheduler.scenario run FILE.yaml [--json]
python -m scheduler.scenario check FILE_OR_DIR...
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from scheduler.cycle import run_rounds
from scheduler.model import (
    DEFAULT_ACTIONS,
    DEFAULT_POOL,
    MATCH_OPERATORS,
    POOL_LABEL,
    RESOURCES,
    TAINT_EFFECTS,
    Config,
    ExternalUsage,
    Job,
    MatchExpression,
    Node,
    PreferredTerm,
    Queue,
    QueueResource,
    Snapshot,
    SubGroup,
    Taint,
    Task,
    TaskState,
    Toleration,
    TopologyConstraint,
)
from scheduler.result import CycleResult

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
JOB_KEYS = {
    "name",
    "queue",
    "priority",
    "preemptible",
    "min_available",
    "created_s",
    "last_start_s",
    "node_selector",
    "topology",
    "task_defaults",
    "tasks",
    # Optional job keys beyond scenario-format.md v1, all in seconds (kai-semantics.md §3.10, §5.5);
    # each defaults to "not set":
    #   stale_s                   how long the gang has been stale (below its minimum); None = not stale
    #   staleness_grace_period_s  grace before a stale gang is evicted (default 60; negative = never)
    #   preemption_delay_s        the job may not trigger evictions before max(creation, last eviction)
    #                             + this delay (reason PreemptionDelayNotElapsed)
    #   last_eviction_s           seconds since the job last had pods evicted
    "stale_s",
    "staleness_grace_period_s",
    "preemption_delay_s",
    "last_eviction_s",
    # Placement rules (docs/scenario-extensions.md)
    "tolerations",
    "node_affinity",
    "pod_anti_affinity",
    "pod_affinity",
    "subgroups",
}
# gpu_fraction_devices: docs/scenario-extensions.md (KAI's gpu-fraction-num-devices).
REQUEST_KEYS = {"gpu", "gpu_memory_mib", "cpu_millis", "memory_mib", "gpu_fraction_devices"}
# gpu_device may be a list for a running multi-device fractional task.
TASK_KEYS = {"name", "state", "node", "gpu_device", "subgroup"} | REQUEST_KEYS
# Beyond scenario-format.md v1 (docs/scenario-extensions.md): expected.messages (job -> exact
# PodGroup message) and a task's expected reason (exact pod event text).
EXPECTED_KEYS = {"tasks", "queues", "messages"}
EXPECTED_TASK_KEYS = {"status", "node", "gpu_group", "reason"}
EXPECTED_QUEUE_KEYS = {"deserved", "fair_share", "allocated", "requested"}


class ScenarioError(ValueError):
    """A scenario file that does not follow the format."""


@dataclass
class Scenario:
    name: str
    path: str
    snapshot: Snapshot
    config: Config
    expected: dict[str, Any]


def _check_keys(data: Any, allowed: set[str], where: str, path: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ScenarioError(f"{path}: {where} must be a mapping")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ScenarioError(f"{path}: unknown key {unknown[0]!r} in {where}")
    return data


def _parse_now(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _config(data: Mapping[str, Any], path: str) -> Config:
    c = _check_keys(data, CONFIG_KEYS, "config", path)
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
        if value is not None and value not in ("binpack", "spread"):
            raise ScenarioError(f"{path}: config.{key} must be binpack or spread, not {value!r}")
    cfg.gpu_placement = c.get("gpu_placement")
    cfg.cpu_placement = c.get("cpu_placement")
    mult = c.get("reclaimer_saturation_multiplier", 1.0)
    pools = c.get("pool_saturation_multiplier") or {}
    if not isinstance(pools, dict):
        raise ScenarioError(f"{path}: config.pool_saturation_multiplier must map pool names to numbers")
    for v in [mult, *pools.values()]:
        if isinstance(v, bool) or not isinstance(v, int | float) or v < 1:
            raise ScenarioError(f"{path}: a reclaimer saturation multiplier must be a number >= 1")
    cfg.reclaimer_saturation_multiplier = float(mult)
    cfg.pool_saturation_multiplier = {str(k): float(v) for k, v in pools.items()}
    return cfg


def _list(data: Any, where: str, path: str) -> list[Any]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ScenarioError(f"{path}: {where} must be a list")
    return data


def _taint(data: Any, where: str, path: str) -> Taint:
    d = _check_keys(data, {"key", "value", "effect"}, where, path)
    if not d.get("key"):
        raise ScenarioError(f"{path}: {where} without key")
    effect = str(d.get("effect", "NoSchedule"))
    if effect not in TAINT_EFFECTS:
        raise ScenarioError(f"{path}: {where}: effect must be one of {', '.join(TAINT_EFFECTS)}")
    return Taint(str(d["key"]), str(d.get("value", "")), effect)


def _toleration(data: Any, where: str, path: str) -> Toleration:
    d = _check_keys(data, {"key", "operator", "value", "effect"}, where, path)
    op = str(d.get("operator", "Equal"))
    if op not in ("Equal", "Exists"):
        raise ScenarioError(f"{path}: {where}: operator must be Equal or Exists")
    if op == "Equal" and not d.get("key"):
        raise ScenarioError(f"{path}: {where}: an Equal toleration needs a key")
    if op == "Exists" and d.get("value"):
        raise ScenarioError(f"{path}: {where}: an Exists toleration takes no value")
    effect = str(d.get("effect", ""))
    if effect and effect not in TAINT_EFFECTS:
        raise ScenarioError(f"{path}: {where}: effect must be one of {', '.join(TAINT_EFFECTS)}")
    return Toleration(str(d.get("key", "")), op, str(d.get("value", "")), effect)


def _expressions(data: Any, where: str, path: str) -> tuple[MatchExpression, ...]:
    out = []
    for i, e in enumerate(_list(data, where, path)):
        d = _check_keys(e, {"key", "operator", "values"}, f"{where}[{i}]", path)
        op = str(d.get("operator", ""))
        if not d.get("key") or op not in MATCH_OPERATORS:
            raise ScenarioError(
                f"{path}: {where}[{i}] needs a key and an operator in {', '.join(MATCH_OPERATORS)}"
            )
        values = tuple(str(v) for v in _list(d.get("values"), f"{where}[{i}].values", path))
        if op in ("In", "NotIn") and not values:
            raise ScenarioError(f"{path}: {where}[{i}]: {op} needs values")
        if op in ("Exists", "DoesNotExist") and values:
            raise ScenarioError(f"{path}: {where}[{i}]: {op} takes no values")
        if op in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
            raise ScenarioError(f"{path}: {where}[{i}]: {op} needs one integer value")
        out.append(MatchExpression(str(d["key"]), op, values))
    return tuple(out)


def _rules(d: Mapping[str, Any], name: str, path: str) -> dict[str, Any]:
    """Placement rule keys of a job (docs/scenario-extensions.md) as Job fields."""
    where = f"job {name}"
    out: dict[str, Any] = {
        "tolerations": [
            _toleration(t, f"{where}.tolerations[{i}]", path)
            for i, t in enumerate(_list(d.get("tolerations"), f"{where}.tolerations", path))
        ]
    }
    aff = _check_keys(d.get("node_affinity"), {"required", "preferred"}, f"{where}.node_affinity", path)
    required = []
    for i, term in enumerate(_list(aff.get("required"), f"{where}.node_affinity.required", path)):
        t = _check_keys(term, {"match_expressions"}, f"{where}.node_affinity.required[{i}]", path)
        required.append(
            _expressions(t.get("match_expressions"), f"{where}.node_affinity.required[{i}]", path)
        )
    out["node_affinity"] = required
    preferred = []
    for i, term in enumerate(_list(aff.get("preferred"), f"{where}.node_affinity.preferred", path)):
        w = f"{where}.node_affinity.preferred[{i}]"
        t = _check_keys(term, {"weight", "match_expressions"}, w, path)
        weight = t.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ScenarioError(f"{path}: {w}: weight must be an integer from 1 to 100")
        preferred.append(PreferredTerm(weight, _expressions(t.get("match_expressions"), w, path)))
    out["preferred_node_affinity"] = preferred
    anti = _check_keys(d.get("pod_anti_affinity"), {"topology_key"}, f"{where}.pod_anti_affinity", path)
    if anti:
        if not anti.get("topology_key"):
            raise ScenarioError(f"{path}: {where}.pod_anti_affinity needs a topology_key")
        out["anti_affinity_key"] = str(anti["topology_key"])
    pa = _check_keys(d.get("pod_affinity"), {"topology_key", "weight"}, f"{where}.pod_affinity", path)
    if pa:
        weight = pa.get("weight", 1)
        if not pa.get("topology_key") or isinstance(weight, bool) or not isinstance(weight, int):
            raise ScenarioError(f"{path}: {where}.pod_affinity needs a topology_key and an integer weight")
        if not 1 <= weight <= 100:
            raise ScenarioError(f"{path}: {where}.pod_affinity: weight must be from 1 to 100")
        out["affinity_key"] = str(pa["topology_key"])
        out["affinity_weight"] = weight
    return out


def _node(data: Mapping[str, Any], path: str) -> Node:
    d = _check_keys(data, NODE_KEYS, "node", path)
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
            for i, t in enumerate(_list(d.get("taints"), f"node {d['name']}.taints", path))
        ],
        external=_external(d.get("external"), f"node {d['name']}.external", path),
    )


def _external(data: Any, where: str, path: str) -> ExternalUsage:
    d = _check_keys(data, {"gpus", "cpu_millis", "memory_mib", "pods"}, where, path)
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
    d = _check_keys(data, QUEUE_KEYS, "queue", path)
    if "name" not in d:
        raise ScenarioError(f"{path}: queue without name")
    where = f"queue {d['name']}"
    res = _check_keys(d.get("resources"), set(RESOURCES), f"{where}.resources", path)
    resources = {}
    for r, spec in res.items():
        s = _check_keys(spec, QRES_KEYS, f"{where}.resources.{r}", path)
        resources[r] = QueueResource(
            quota=float(s.get("quota", 0)),
            limit=float(s.get("limit", -1)),
            over_quota_weight=float(s.get("over_quota_weight", 1)),
        )
    usage = _check_keys(d.get("historical_usage"), set(RESOURCES), f"{where}.historical_usage", path)
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


def _requests(d: Mapping[str, Any], base: Mapping[str, float], where: str, path: str) -> dict[str, float]:
    out = dict(base)
    for k in REQUEST_KEYS & set(d):
        out[k] = float(d[k])
    gpu = out.get("gpu", 0.0)
    if gpu < 0 or (gpu > 1 and gpu != int(gpu)):
        raise ScenarioError(f"{path}: {where}: gpu must be a whole number >= 1 or a fraction 0 < x < 1")
    count = out.get("gpu_fraction_devices", 1.0)
    if count < 1 or count != int(count):
        raise ScenarioError(f"{path}: {where}: gpu_fraction_devices must be a whole number >= 1")
    return out


def _job(data: Mapping[str, Any], path: str) -> Job:
    d = _check_keys(data, JOB_KEYS, "job", path)
    for key in ("name", "queue"):
        if key not in d:
            raise ScenarioError(f"{path}: job without {key}")
    name = str(d["name"])
    defaults = _requests(
        _check_keys(d.get("task_defaults"), REQUEST_KEYS, f"job {name}.task_defaults", path), {}, name, path
    )
    tasks = []
    for i, t in enumerate(d.get("tasks") or []):
        td = _check_keys(t, TASK_KEYS, f"job {name} task", path)
        req = _requests(td, defaults, f"job {name} task {i}", path)
        try:
            state = TaskState(td.get("state", "Pending"))
        except ValueError:
            raise ScenarioError(f"{path}: job {name}: unknown task state {td.get('state')!r}") from None
        if state not in (TaskState.PENDING, TaskState.RUNNING, TaskState.RELEASING):
            raise ScenarioError(f"{path}: job {name}: task state must be Pending, Running or Releasing")
        if state != TaskState.PENDING and not td.get("node"):
            raise ScenarioError(f"{path}: job {name}: a {state.value} task needs a node")
        device = td.get("gpu_device")
        devices = (
            tuple(int(i) for i in device)
            if isinstance(device, list)
            else (int(device),)
            if device is not None
            else ()
        )
        tasks.append(
            Task(
                name=str(td.get("name", f"{name}-{i}")),
                job=name,
                gpu=req.get("gpu", 0.0),
                gpu_memory_mib=req.get("gpu_memory_mib", 0.0),
                cpu_millis=req.get("cpu_millis", 0.0),
                memory_mib=req.get("memory_mib", 0.0),
                state=state,
                node=str(td["node"]) if td.get("node") and state != TaskState.PENDING else None,
                gpu_devices=devices,
                gpu_fraction_devices=int(req.get("gpu_fraction_devices", 1)),
                subgroup=str(td["subgroup"]) if td.get("subgroup") is not None else None,
            )
        )
    subgroups = _subgroups(d.get("subgroups"), tasks, name, path)
    selector = {str(k): str(v) for k, v in (d.get("node_selector") or {}).items()}
    topo_d = _check_keys(
        d.get("topology"), {"required", "preferred", "name", "levels"}, f"job {name}.topology", path
    )
    topology = None
    if topo_d:
        levels = tuple(str(k) for k in _list(topo_d.get("levels"), f"job {name}.topology.levels", path))
        required, preferred = topo_d.get("required"), topo_d.get("preferred")
        if levels:
            for level in (required, preferred):
                if level is not None and level not in levels:
                    raise ScenarioError(f"{path}: job {name}: topology level {level!r} is not in levels")
            if (
                required is not None
                and preferred is not None
                and levels.index(preferred) < levels.index(required)
            ):
                raise ScenarioError(
                    f"{path}: job {name}: the preferred level must be narrower than the required one"
                )
        topology = TopologyConstraint(required, preferred, topo_d.get("name"), levels)
    return Job(
        name=name,
        queue=str(d["queue"]),
        priority=int(d.get("priority", 50)),
        preemptible=d.get("preemptible"),
        min_available=int(d["min_available"]) if d.get("min_available") is not None else None,
        created_s=float(d.get("created_s", 0)),
        last_start_s=float(d["last_start_s"]) if d.get("last_start_s") is not None else None,
        node_selector=selector,
        topology=topology,
        tasks=tasks,
        pool=selector.get(POOL_LABEL, DEFAULT_POOL),
        stale_s=_opt_seconds(d, "stale_s", name, path),
        staleness_grace_period_s=_opt_seconds(d, "staleness_grace_period_s", name, path),
        preemption_delay_s=_opt_seconds(d, "preemption_delay_s", name, path),
        last_eviction_s=_opt_seconds(d, "last_eviction_s", name, path),
        subgroups=subgroups,
        **_rules(d, name, path),
    )


def _subgroups(data: Any, tasks: list[Task], name: str, path: str) -> list[SubGroup]:
    """A job's sub-group tree: leaves hold pods (``min_available``), sets hold sub-groups
    (``min_subgroups``, default all); docs/scenario-extensions.md."""
    where = f"job {name}.subgroups"
    out: list[SubGroup] = []
    for i, g in enumerate(_list(data, where, path)):
        gd = _check_keys(g, {"name", "min_available", "parent", "min_subgroups"}, f"{where}[{i}]", path)
        m = gd.get("min_available", 0)
        ms = gd.get("min_subgroups")
        if not gd.get("name") or isinstance(m, bool) or not isinstance(m, int) or m < 0:
            raise ScenarioError(f"{path}: {where}[{i}] needs a name and min_available >= 0")
        if ms is not None and (isinstance(ms, bool) or not isinstance(ms, int) or ms < 0):
            raise ScenarioError(f"{path}: {where}[{i}]: min_subgroups must be an integer >= 0")
        parent = str(gd["parent"]) if gd.get("parent") is not None else None
        out.append(SubGroup(str(gd["name"]), m, parent, ms))
    names = [g.name for g in out]
    if len(set(names)) != len(names):
        raise ScenarioError(f"{path}: job {name}: sub-group names must be unique")
    by_name = {g.name: g for g in out}
    parents = {g.parent for g in out if g.parent is not None}
    for g in out:
        seen = {g.name}
        p = g.parent
        while p is not None:
            if p not in by_name:
                raise ScenarioError(f"{path}: job {name}: sub-group {g.name} names unknown parent {p!r}")
            if p in seen:
                raise ScenarioError(f"{path}: job {name}: sub-groups form a cycle at {p!r}")
            seen.add(p)
            p = by_name[p].parent
        kids = sum(1 for c in out if c.parent == g.name)
        if g.name in parents:
            if g.min_subgroups is not None and g.min_subgroups > kids:
                raise ScenarioError(
                    f"{path}: job {name}: sub-group {g.name} has fewer children than min_subgroups"
                )
        elif g.min_available > sum(1 for t in tasks if t.subgroup == g.name):
            raise ScenarioError(f"{path}: job {name}: sub-group {g.name} has fewer pods than its minimum")
    for t in tasks:
        if t.subgroup is not None and t.subgroup not in by_name:
            raise ScenarioError(f"{path}: job {name}: task {t.name} names unknown sub-group {t.subgroup!r}")
        if t.subgroup in parents:
            raise ScenarioError(
                f"{path}: job {name}: task {t.name} is in sub-group {t.subgroup}, which has sub-groups"
            )
    return out


def _opt_seconds(d: Mapping[str, Any], key: str, job: str, path: str) -> float | None:
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(f"{path}: job {job}: {key} must be a number of seconds")
    if key != "staleness_grace_period_s" and value < 0:
        raise ScenarioError(f"{path}: job {job}: {key} must be >= 0")
    return float(value)


def parse(data: Any, path: str = "<scenario>") -> Scenario:
    top = _check_keys(data, TOP_KEYS, "the top level", path)
    for key in ("name", "nodes", "queues"):
        if not top.get(key):
            raise ScenarioError(f"{path}: missing required key {key!r}")
    config = _config(top.get("config") or {}, path)
    nodes = [_node(n, path) for n in top["nodes"]]
    queues = [_queue(q, i, path) for i, q in enumerate(top["queues"])]
    jobs = [_job(j, path) for j in top.get("jobs") or []]
    parents = {q.parent for q in queues if q.parent}
    for job in jobs:
        if job.queue in parents:
            raise ScenarioError(f"{path}: job {job.name} names queue {job.queue}, which is not a leaf queue")
    expected = _check_keys(top.get("expected"), EXPECTED_KEYS, "expected", path)
    for name, spec in (expected.get("tasks") or {}).items():
        _check_keys(spec, EXPECTED_TASK_KEYS, f"expected.tasks.{name}", path)
    for name, spec in (expected.get("queues") or {}).items():
        _check_keys(spec, EXPECTED_QUEUE_KEYS, f"expected.queues.{name}", path)
    return Scenario(str(top["name"]), path, Snapshot(nodes, queues, jobs), config, expected)


def load(path: str | Path) -> Scenario:
    with open(path, encoding="utf-8") as fh:
        return parse(yaml.safe_load(fh), str(path))


def run(scenario: Scenario) -> CycleResult:
    return run_rounds(scenario.snapshot, scenario.config)


def compare(scenario: Scenario, result: CycleResult) -> list[str]:
    """Mismatches between the expected block and the result, one message each."""
    problems: list[str] = []
    jobs = {j.name: [t.name for t in j.tasks] for j in scenario.snapshot.jobs}
    groups: dict[str, tuple[str | None, tuple[int, ...]]] = {}
    group_of: dict[tuple[str | None, tuple[int, ...]], str] = {}
    for key, spec in (scenario.expected.get("tasks") or {}).items():
        names = [key] if key in result.tasks else jobs.get(key, [])
        if not names:
            problems.append(f"expected task or job {key!r} does not exist")
            continue
        for name in names:
            out = result.tasks[name]
            if "status" in spec and out.status.value != spec["status"]:
                problems.append(f"{name}: status {out.status.value}, expected {spec['status']}")
            if "node" in spec and out.node != spec["node"]:
                problems.append(f"{name}: node {out.node}, expected {spec['node']}")
            if "reason" in spec and out.reason != spec["reason"]:
                problems.append(f"{name}: reason {out.reason!r}, expected {spec['reason']!r}")
            if "gpu_group" in spec:
                label = str(spec["gpu_group"])
                where = (out.node, out.gpu_devices)
                if not out.gpu_devices:
                    problems.append(f"{name}: gpu_group {label}, but the task holds no GPU device")
                    continue
                if label in groups and groups[label] != where:
                    problems.append(
                        f"{name}: gpu_group {label} expected on the device of other tasks of that group"
                    )
                elif label not in groups and where in group_of and group_of[where] != label:
                    problems.append(
                        f"{name}: gpu_group {label} shares a device with gpu_group {group_of[where]}"
                    )
                groups.setdefault(label, where)
                group_of.setdefault(where, label)
    for jname, text in (scenario.expected.get("messages") or {}).items():
        actual = result.job_messages.get(jname)
        if actual != text:
            problems.append(f"job {jname}: message {actual!r}, expected {text!r}")
    for qname, spec in (scenario.expected.get("queues") or {}).items():
        q = result.queues.get(qname)
        if q is None:
            problems.append(f"expected queue {qname!r} does not exist")
            continue
        for field, values in spec.items():
            actual = getattr(q, field)
            for r, v in (values or {}).items():
                if abs(actual.get(r, 0.0) - float(v)) > 1e-6:
                    problems.append(
                        f"queue {qname}: {field}.{r} {actual.get(r, 0.0):g}, expected {float(v):g}"
                    )
    return problems


def find_files(paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        files.extend(sorted(path.rglob("*.yaml")) if path.is_dir() else [path])
    return files


def check(paths: Iterable[str], out: Any = sys.stdout) -> tuple[int, int]:
    """Run and compare every scenario; print one line per mismatch and a closing count."""
    passed = failed = 0
    for f in find_files(paths):
        try:
            scenario = load(f)
            problems = compare(scenario, run(scenario))
        except (ScenarioError, ValueError, KeyError, yaml.YAMLError) as exc:
            problems = [f"error: {exc}"]
        if problems:
            failed += 1
            for p in problems:
                print(f"{f}: {p}", file=out)
        else:
            passed += 1
    print(f"{passed} passed, {failed} failed", file=out)
    return passed, failed


def _print_human(result: CycleResult) -> None:
    for name, t in result.tasks.items():
        where = f" on {t.node}" + (f" gpu {list(t.gpu_devices)}" if t.gpu_devices else "") if t.node else ""
        reason = f": {t.reason}" if t.reason else ""
        print(f"{name} [{t.job}] {t.status.value}{where}{reason}")
    for name, q in result.queues.items():
        print(f"queue {name}: fair_share {q.fair_share} allocated {q.allocated} requested {q.requested}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler.scenario")
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run one scenario and print the outcome")
    p_run.add_argument("file")
    p_run.add_argument("--json", action="store_true")
    p_check = sub.add_parser("check", help="compare scenarios with their expected block")
    p_check.add_argument("paths", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "run":
        try:
            result = run(load(args.file))
        except ScenarioError as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.json:
            print(json.dumps(result.to_json(), indent=2))
        else:
            _print_human(result)
        return 0
    _passed, failed = check(args.paths)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
