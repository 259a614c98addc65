"""The scenario runner: shared KAI cases whose actions are exactly [allocate], and our own cases."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from scheduler import scenario

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared" / "scenarios"
OWN = REPO / "tests" / "scenarios"


def _allocate_only(path: Path) -> bool:
    data = yaml.safe_load(path.read_text())
    return list((data.get("config") or {}).get("actions", [])) == ["allocate"]


def test_shared_allocate_cases_pass() -> None:
    if not SHARED.is_dir():
        pytest.skip("shared scenarios are absent")
    files = [str(p) for p in sorted(SHARED.rglob("*.yaml")) if _allocate_only(p)]
    assert files
    out = io.StringIO()
    passed, failed = scenario.check(files, out)
    assert failed == 0, out.getvalue()


def test_own_cases_pass() -> None:
    out = io.StringIO()
    passed, failed = scenario.check([str(OWN)], out)
    assert passed > 0 and failed == 0, out.getvalue()
    assert out.getvalue().splitlines()[-1] == f"{passed} passed, 0 failed"


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\nnodes: [{name: n0, gpuz: 1}]\nqueues: [{name: q}]\n")
    with pytest.raises(scenario.ScenarioError, match=r"bad\.yaml.*'gpuz'"):
        scenario.load(f)


def test_job_on_non_leaf_queue_is_an_error(tmp_path: Path) -> None:
    f = tmp_path / "nonleaf.yaml"
    f.write_text(
        "name: x\nnodes: [{name: n0}]\nqueues: [{name: p}, {name: c, parent: p}]\n"
        "jobs: [{name: j, queue: p, tasks: [{}]}]\n"
    )
    with pytest.raises(scenario.ScenarioError, match="not a leaf"):
        scenario.load(f)


def test_check_reports_mismatch_and_exit_code(tmp_path: Path) -> None:
    f = tmp_path / "wrong.yaml"
    f.write_text(
        "name: x\nconfig: {actions: [allocate]}\nnodes: [{name: n0, gpus: 1}]\nqueues: [{name: q}]\n"
        "jobs: [{name: j, queue: q, task_defaults: {gpu: 2}, tasks: [{}]}]\n"
        "expected: {tasks: {j: {status: Allocated}}}\n"
    )
    assert scenario.main(["check", str(f)]) == 1


def test_run_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "ok.yaml"
    f.write_text(
        "name: x\nnodes: [{name: n0, gpus: 1}]\nqueues: [{name: q}]\n"
        "jobs: [{name: j, queue: q, tasks: [{gpu: 1}]}]\n"
    )
    assert scenario.main(["run", str(f), "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["tasks"]["j-0"]["status"] == "Allocated"
    assert data["queues"]["q"]["allocated"]["gpu"] == 1
