"""Reading a scenario file's jobs: their tasks and requests, topology, sub-groups and
placement rules (tolerations, node affinity, pod affinity and anti-affinity)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.model import (
    DEFAULT_POOL,
    MATCH_OPERATORS,
    POOL_LABEL,
    TAINT_EFFECTS,
    Job,
    MatchExpression,
    PreferredTerm,
    SubGroup,
    Task,
    TaskState,
    Toleration,
    TopologyConstraint,
)
from scheduler.scenario.schema import ScenarioError, as_list, check_keys

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


def _toleration(data: Any, where: str, path: str) -> Toleration:
    d = check_keys(data, {"key", "operator", "value", "effect"}, where, path)
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
    for i, e in enumerate(as_list(data, where, path)):
        d = check_keys(e, {"key", "operator", "values"}, f"{where}[{i}]", path)
        op = str(d.get("operator", ""))
        if not d.get("key") or op not in MATCH_OPERATORS:
            raise ScenarioError(
                f"{path}: {where}[{i}] needs a key and an operator in {', '.join(MATCH_OPERATORS)}"
            )
        values = tuple(str(v) for v in as_list(d.get("values"), f"{where}[{i}].values", path))
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
            for i, t in enumerate(as_list(d.get("tolerations"), f"{where}.tolerations", path))
        ]
    }
    aff = check_keys(d.get("node_affinity"), {"required", "preferred"}, f"{where}.node_affinity", path)
    required = []
    for i, term in enumerate(as_list(aff.get("required"), f"{where}.node_affinity.required", path)):
        t = check_keys(term, {"match_expressions"}, f"{where}.node_affinity.required[{i}]", path)
        required.append(
            _expressions(t.get("match_expressions"), f"{where}.node_affinity.required[{i}]", path)
        )
    out["node_affinity"] = required
    preferred = []
    for i, term in enumerate(as_list(aff.get("preferred"), f"{where}.node_affinity.preferred", path)):
        w = f"{where}.node_affinity.preferred[{i}]"
        t = check_keys(term, {"weight", "match_expressions"}, w, path)
        weight = t.get("weight")
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ScenarioError(f"{path}: {w}: weight must be an integer from 1 to 100")
        preferred.append(PreferredTerm(weight, _expressions(t.get("match_expressions"), w, path)))
    out["preferred_node_affinity"] = preferred
    anti = check_keys(d.get("pod_anti_affinity"), {"topology_key"}, f"{where}.pod_anti_affinity", path)
    if anti:
        if not anti.get("topology_key"):
            raise ScenarioError(f"{path}: {where}.pod_anti_affinity needs a topology_key")
        out["anti_affinity_key"] = str(anti["topology_key"])
    pa = check_keys(d.get("pod_affinity"), {"topology_key", "weight"}, f"{where}.pod_affinity", path)
    if pa:
        weight = pa.get("weight", 1)
        if not pa.get("topology_key") or isinstance(weight, bool) or not isinstance(weight, int):
            raise ScenarioError(f"{path}: {where}.pod_affinity needs a topology_key and an integer weight")
        if not 1 <= weight <= 100:
            raise ScenarioError(f"{path}: {where}.pod_affinity: weight must be from 1 to 100")
        out["affinity_key"] = str(pa["topology_key"])
        out["affinity_weight"] = weight
    return out


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


def parse_job(data: Mapping[str, Any], path: str) -> Job:
    """One job of the ``jobs`` list, with its tasks, sub-groups, topology and rules."""
    d = check_keys(data, JOB_KEYS, "job", path)
    for key in ("name", "queue"):
        if key not in d:
            raise ScenarioError(f"{path}: job without {key}")
    name = str(d["name"])
    defaults = _requests(
        check_keys(d.get("task_defaults"), REQUEST_KEYS, f"job {name}.task_defaults", path), {}, name, path
    )
    tasks = _tasks(d, defaults, name, path)
    subgroups = _subgroups(d.get("subgroups"), tasks, name, path)
    selector = {str(k): str(v) for k, v in (d.get("node_selector") or {}).items()}
    topology = _topology(d, name, path)
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


def _tasks(d: Mapping[str, Any], defaults: Mapping[str, float], name: str, path: str) -> list[Task]:
    """The job's ``tasks``, each request on top of the job's ``task_defaults``."""
    tasks = []
    for i, t in enumerate(d.get("tasks") or []):
        td = check_keys(t, TASK_KEYS, f"job {name} task", path)
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
    return tasks


def _topology(d: Mapping[str, Any], name: str, path: str) -> TopologyConstraint | None:
    """The job's ``topology`` block: required and preferred levels among the named ``levels``."""
    topo_d = check_keys(
        d.get("topology"), {"required", "preferred", "name", "levels"}, f"job {name}.topology", path
    )
    topology = None
    if topo_d:
        levels = tuple(str(k) for k in as_list(topo_d.get("levels"), f"job {name}.topology.levels", path))
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
    return topology


def _subgroups(data: Any, tasks: list[Task], name: str, path: str) -> list[SubGroup]:
    """A job's sub-group tree: leaves hold pods (``min_available``), sets hold sub-groups
    (``min_subgroups``, default all); docs/scenario-extensions.md."""
    where = f"job {name}.subgroups"
    out: list[SubGroup] = []
    for i, g in enumerate(as_list(data, where, path)):
        gd = check_keys(g, {"name", "min_available", "parent", "min_subgroups"}, f"{where}[{i}]", path)
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
