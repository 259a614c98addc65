"""Checking scenarios: a result against the file's ``expected`` block, and every file of a
folder at once (``python -m scheduler.scenario check``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from scheduler.result import CycleResult
from scheduler.scenario.loader import load
from scheduler.scenario.runner import run
from scheduler.scenario.schema import Scenario, ScenarioError


def compare(scenario: Scenario, result: CycleResult) -> list[str]:
    """Mismatches between the expected block and the result, one message each: tasks, then job
    messages, then queues."""
    problems = _task_problems(scenario, result)
    for jname, text in (scenario.expected.get("messages") or {}).items():
        actual = result.job_message(jname)
        if actual != text:
            problems.append(f"job {jname}: message {actual!r}, expected {text!r}")
    problems.extend(_queue_problems(scenario, result))
    return problems


def _task_problems(scenario: Scenario, result: CycleResult) -> list[str]:
    """``expected.tasks``: by task or by job name, status, node, reason and GPU group."""
    problems: list[str] = []
    jobs = {j.name: [t.key for t in j.tasks] for j in scenario.snapshot.jobs}
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
            if "reason" in spec and out.text() != spec["reason"]:
                problems.append(f"{name}: reason {out.text()!r}, expected {spec['reason']!r}")
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
    return problems


def _queue_problems(scenario: Scenario, result: CycleResult) -> list[str]:
    """``expected.queues``: each named amount within 1e-6."""
    problems: list[str] = []
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
