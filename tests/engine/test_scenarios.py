"""The scenario runner over every shared KAI case (all actions, multi-round) and our own cases."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from scheduler import scenario

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / ".." / "shared" / "scenarios"
OWN = REPO / "tests" / "scenarios"


# Shared cases the engine does not reproduce yet; every other shared case must pass.
KNOWN_GAPS: set[str] = set()


def _key(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def test_shared_cases_pass() -> None:
    if not SHARED.is_dir():
        pytest.skip("shared scenarios are absent")
    files = [str(p) for p in sorted(SHARED.rglob("*.yaml")) if _key(p) not in KNOWN_GAPS]
    assert len(files) > 100
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


def test_optional_job_timing_keys(tmp_path: Path) -> None:
    f = tmp_path / "keys.yaml"
    f.write_text(
        "name: x\nnodes: [{name: n0, gpus: 1}]\nqueues: [{name: q}]\n"
        "jobs: [{name: j, queue: q, stale_s: 90, staleness_grace_period_s: -1, preemption_delay_s: 30,"
        " last_eviction_s: 5, tasks: [{}]}]\n"
    )
    job = scenario.load(f).snapshot.jobs[0]
    assert (job.stale_s, job.staleness_grace_period_s, job.preemption_delay_s, job.last_eviction_s) == (
        90.0,
        -1.0,
        30.0,
        5.0,
    )
    f.write_text("name: x\nnodes: [{name: n0}]\nqueues: [{name: q}]\njobs: [{name: j, queue: q, stale: 1}]\n")
    with pytest.raises(scenario.ScenarioError, match="'stale'"):
        scenario.load(f)
