"""The KAI side-by-side test bed's scripts (deploy/kai-testbed/), checked without KAI.

KAI is not on the Go module proxy, so CI cannot build it: these tests check what can be checked
without it. ``make kai-up`` refuses a missing or wrong ``KAI_SRC`` with a message saying what to
give and starts nothing; the source key tells edited sources apart; the portal's Lease is seen;
and the normaliser behind ``compare.py`` masks what changes from run to run and nothing else, so
two runs of one outcome dump the same text and ``diff`` names every difference that is left.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BED = ROOT / "deploy" / "kai-testbed"
COMPONENTS = ("scheduler", "binder", "podgrouper", "queuecontroller", "podgroupcontroller")
UID_A = "3f6c1d2e-aaaa-4bbb-8ccc-0123456789ab"
UID_B = "9e8d7c6b-1111-4222-8333-ba9876543210"


def load(name: str) -> ModuleType:
    """A script of the bed as a module (``deploy/kai-testbed`` is not a package: it has a hyphen)."""
    spec = importlib.util.spec_from_file_location(f"kai_testbed_{name}", BED / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


compare = load("compare")
portal_lease = load("portal_lease")


def run_make_kai_up(tmp_path: Path, kai_src: str) -> subprocess.CompletedProcess[str]:
    """``make kai-up KAI_SRC=...`` with the bed's directories under tmp_path (nothing of the repo's)."""
    env = {**os.environ, "K8S_DIR": str(tmp_path / "k8s"), "KAI_BED_DIR": str(tmp_path / "kai"),
           "KAI_BED_CACHE": str(tmp_path / "cache")}  # fmt: skip
    env.pop("KAI_SRC", None)
    return subprocess.run(["make", "-s", "-C", str(ROOT), "kai-up", f"KAI_SRC={kai_src}"],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip


def fake_kai(root: Path) -> Path:
    """A directory shaped like KAI's source (module line, CRDs, the five commands); no real code."""
    (root / "deployments" / "kai-scheduler" / "crds").mkdir(parents=True)
    (root / "go.mod").write_text("module github.com/kai-scheduler/KAI-scheduler\n\ngo 1.26\n")
    (root / "go.sum").write_text("")
    for component in COMPONENTS:
        (root / "cmd" / component).mkdir(parents=True)
        (root / "cmd" / component / "main.go").write_text("package main\n\nfunc main() {}\n")
    (root / "pkg").mkdir()
    return root


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_kai_up_without_kai_src_says_how_to_get_kai_and_starts_nothing(tmp_path: Path) -> None:
    done = run_make_kai_up(tmp_path, "")
    assert done.returncode != 0
    assert "KAI_SRC is not set" in done.stderr
    assert "not on the Go module proxy" in done.stderr
    assert "make kai-up KAI_SRC=/path/to/kai" in done.stderr
    assert (
        not (tmp_path / "k8s").exists()
        and not (tmp_path / "kai").exists()
        and not (tmp_path / "cache").exists()
    )


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_kai_up_refuses_a_path_that_is_not_kai(tmp_path: Path) -> None:
    missing = run_make_kai_up(tmp_path, str(tmp_path / "nowhere"))
    assert missing.returncode != 0
    assert f"KAI_SRC={tmp_path / 'nowhere'} does not exist" in missing.stderr

    other = tmp_path / "other-go-project"
    other.mkdir()
    (other / "go.mod").write_text("module example.com/other\n")
    wrong = run_make_kai_up(tmp_path, str(other))
    assert wrong.returncode != 0
    assert "is not KAI Scheduler's source" in wrong.stderr
    assert "github.com/kai-scheduler/KAI-scheduler" in wrong.stderr

    # KAI's module but a tree without one of the components the bed runs (an old or partial checkout).
    partial = fake_kai(tmp_path / "partial")
    shutil.rmtree(partial / "cmd" / "queuecontroller")
    done = run_make_kai_up(tmp_path, str(partial))
    assert done.returncode != 0
    assert "has no cmd/queuecontroller" in done.stderr
    assert not (tmp_path / "k8s").exists() and not (tmp_path / "cache").exists()


@pytest.mark.skipif(shutil.which("go") is None, reason="the source key includes the Go version: needs go")
def test_the_build_cache_key_follows_the_sources_go_files(tmp_path: Path) -> None:
    """An edited checkout (or a plain copy without .git) is never taken for one already built."""
    src = fake_kai(tmp_path / "kai")

    def key() -> str:
        done = subprocess.run(["bash", "-c", f'. "{BED}/common.sh" && kai_src_key "$1"', "_", str(src)],
                              capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        return done.stdout.strip()

    first = key()
    assert re.fullmatch(r"[0-9a-f]{12}", first)
    assert key() == first
    (src / "README.md").write_text("docs do not change the binaries\n")
    assert key() == first
    (src / "cmd" / "binder" / "main.go").write_text("package main\n\nfunc main() { println() }\n")
    assert key() != first


def lease(
    name: str, renewed: datetime, namespace: str = "kai-portal", holder: str = "worker-1"
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                 "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    }  # fmt: skip


def test_a_portal_lease_renewed_lately_is_reported_and_others_are_not() -> None:
    now = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
    found = portal_lease.fresh_portal_leases(
        [
            lease("kai-portal-kai-scheduler", now - timedelta(seconds=4)),
            lease("kai-portal-other", now - timedelta(seconds=600)),  # a portal stopped long ago
            lease("kai-scheduler-leader", now, namespace="kai-scheduler"),  # not the portal's
            {"metadata": {"name": "kai-portal-released", "namespace": "x"}, "spec": {"renewTime": None}},
        ],
        now,
    )
    assert found == ["Lease kai-portal/kai-portal-kai-scheduler held by worker-1, renewed 4 s ago"]


def podgroup(uid: str, version: str, when: str, conditions: list[dict[str, Any]]) -> dict[str, Any]:
    """A PodGroup as KAI's podgrouper names it (pg-<owner>-<owner uid>), with run-specific values."""
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": f"pg-gpu-pod-{uid}",
            "namespace": "kai-bed-quickstart",
            "uid": uid,
            "resourceVersion": version,
            "creationTimestamp": when,
            "generation": 1,
            "labels": {"kai.scheduler/queue": "default-queue"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "gpu-pod", "uid": uid}],
            "managedFields": [
                {"manager": "podgrouper", "operation": "Update", "time": when},
                {"manager": "kai-scheduler", "operation": "Update", "subresource": "status", "time": when},
            ],
        },
        "spec": {"minMember": 1, "queue": "default-queue", "priorityClassName": "train"},
        "status": {"schedulingConditions": conditions},
    }


def test_two_runs_of_one_outcome_normalise_to_the_same_view() -> None:
    """Only UIDs (also inside names), resourceVersions, timestamps and writers' times differ:
    masked, and the conditions compared by type whatever order they were written in."""
    first = podgroup(UID_A, "812", "2026-11-28T08:40:01Z", [
        {"type": "Unschedulable", "status": "False", "lastTransitionTime": "2026-11-28T08:40:02Z"},
        {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-11-28T08:40:03.123456Z"},
    ])  # fmt: skip
    second = podgroup(UID_B, "4410", "2026-11-28T09:02:11+00:00", list(reversed([
        {"type": "Unschedulable", "status": "False", "lastTransitionTime": "2026-11-28T09:02:12Z"},
        {"type": "Scheduled", "status": "True", "lastTransitionTime": "2026-11-28T09:02:13Z"},
    ])))  # fmt: skip
    a, b = compare.normalise_object(first), compare.normalise_object(second)
    assert a == b
    assert a["metadata.name"] == "pg-gpu-pod-<uid>"
    assert a["metadata.uid"] == "<uid>" and a["metadata.ownerReferences[name=gpu-pod].uid"] == "<uid>"
    assert a["metadata.resourceVersion"] == "<masked>" and a["metadata.creationTimestamp"] == "<time>"
    assert a["status.schedulingConditions[type=Scheduled].lastTransitionTime"] == "<time>"
    assert a["metadata.managedFields"] == ["kai-scheduler Update status", "podgrouper Update"]
    # What the scheduler decided is kept as it is.
    assert a['metadata.labels["kai.scheduler/queue"]'] == "default-queue"
    assert a["spec.minMember"] == 1 and a["spec.priorityClassName"] == "train"
    assert a["status.schedulingConditions[type=Scheduled].status"] == "True"
    assert not any(UID_A in str(k) or UID_A in str(v) for k, v in a.items())


def test_the_view_keeps_what_a_scheduler_writes_on_pods_and_drops_event_counts() -> None:
    pod = {
        "metadata": {"name": "gpu-pod", "uid": UID_A, "labels": {"kai.scheduler/queue": "default-queue"},
                     "annotations": {"pod-group-name": f"pg-gpu-pod-{UID_A}",
                                     "kubectl.kubernetes.io/last-applied-configuration": '{"kind":"Pod"}'}},
        "spec": {"nodeName": "kai-bed-gpu-1", "schedulerName": "kai-scheduler",
                 "containers": [{"name": "main"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7", "startTime": "2026-11-28T08:40:03Z",
                   "conditions": [{"type": "PodScheduled", "status": "True"}]},
    }  # fmt: skip
    event = {
        "involvedObject": {"kind": "PodGroup", "name": f"pg-gpu-pod-{UID_A}"},
        "type": "Normal", "reason": "Scheduled", "source": {"component": "kai-scheduler"},
        "message": f"Job pg-gpu-pod-{UID_A} scheduled", "count": 3,
        "firstTimestamp": "2026-11-28T08:40:03Z", "lastTimestamp": "2026-11-28T08:41:03Z",
    }  # fmt: skip
    again = {**event, "count": 1, "lastTimestamp": "2026-11-28T08:40:03Z"}
    got = compare.view([pod], [], [], [event, again])
    assert got["pods"]["gpu-pod"] == {
        'metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]': "<masked>",
        "metadata.annotations.pod-group-name": "pg-gpu-pod-<uid>",
        'metadata.labels["kai.scheduler/queue"]': "default-queue",
        "spec.nodeName": "kai-bed-gpu-1",
        "spec.schedulerName": "kai-scheduler",
        "status.conditions[type=PodScheduled].status": "True",
        "status.phase": "Running",
    }
    assert got["events"] == [{
        "object": "PodGroup/pg-gpu-pod-<uid>", "type": "Normal", "reason": "Scheduled",
        "source": "kai-scheduler", "message": "Job pg-gpu-pod-<uid> scheduled",
    }]  # fmt: skip


def test_diff_names_every_path_and_value_that_differs_and_nothing_else() -> None:
    kai = {
        "podgroups": {"pg-gpu-pod-<uid>": {"spec.queue": "default-queue", "status.phase": "Running"}},
        "queues": {
            "default-queue": {"status.allocated.gpu": "1", "spec.parentQueue": "default-parent-queue"}
        },
        "pods": {"gpu-pod": {"spec.nodeName": "n1"}},
        "events": [{"object": "Pod/gpu-pod", "reason": "Bound"}],
    }
    portal = {
        "podgroups": {"pg-gpu-pod-<uid>": {"spec.queue": "default-queue"}},
        "queues": {
            "default-queue": {"status.allocated.gpu": "2", "spec.parentQueue": "default-parent-queue"}
        },
        "pods": {"gpu-pod": {"spec.nodeName": "n1"}, "cpu-only-pod": {}},
        "events": [],
    }
    assert compare.diff(kai, portal) == [
        "pods/cpu-only-pod: only in B",
        "podgroups/pg-gpu-pod-<uid> status.phase: only in A ('Running')",
        "queues/default-queue status.allocated.gpu: A '1' != B '2'",
        'event only in A: {"object": "Pod/gpu-pod", "reason": "Bound"}',
    ]
    assert compare.diff(kai, kai) == []
    assert compare.diff(kai, portal, ignore_reasons=["Bound"])[-1] == (
        "queues/default-queue status.allocated.gpu: A '1' != B '2'"
    )


def job_pod(name: str, node: str | None) -> dict[str, Any]:
    spec = {"schedulerName": "kai-scheduler", **({"nodeName": node} if node else {})}
    return {"metadata": {"name": name, "generateName": "train-", "uid": UID_A}, "spec": spec,
            "status": {"phase": "Running" if node else "Pending"}}  # fmt: skip


def test_generated_pod_names_are_numbered_by_what_happened_to_the_pods_everywhere_in_the_view() -> None:
    """A Job's pods get random names each run: the view numbers them in the order of their fields
    (so the same outcome gives the same names) and uses those names in events too."""
    created = {
        "involvedObject": {"kind": "Job", "name": "train"},
        "type": "Normal",
        "reason": "SuccessfulCreate",
    }

    def events(*names: str) -> list[dict[str, Any]]:
        return [{**created, "message": f"Created pod: {name}"} for name in names]

    first = compare.view([job_pod("train-x7k2p", "n1"), job_pod("train-ab9zq", None)], [], [],
                         events("train-x7k2p", "train-ab9zq"))  # fmt: skip
    second = compare.view([job_pod("train-4hh5d", None), job_pod("train-q2w3e", "n1")], [], [],
                          events("train-q2w3e", "train-4hh5d"))  # fmt: skip
    assert first == second
    assert first["pods"] == {
        "train-<0>": {
            "spec.nodeName": "n1",
            "spec.schedulerName": "kai-scheduler",
            "status.phase": "Running",
        },
        "train-<1>": {"spec.schedulerName": "kai-scheduler", "status.phase": "Pending"},
    }
    assert [e["message"] for e in first["events"]] == ["Created pod: train-<0>", "Created pod: train-<1>"]


def test_the_committed_kai_reference_is_normalised() -> None:
    """docs/kai-parity/*-kai.yaml were dumped by compare.py from KAI's own run: no UID, timestamp or
    resourceVersion of that run is left in them, so a portal run can be diffed against them."""
    references = sorted((ROOT / "docs" / "kai-parity").glob("*-kai.yaml"))
    assert references, "no KAI reference committed under docs/kai-parity/"
    for path in references:
        text = path.read_text()
        assert not compare.UID_RE.search(text), path
        assert not re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}", text), path
        data = yaml.safe_load(text)
        assert data["scheduler"].startswith("kai") and data["settled"] is True, path
        assert data["pods"] and data["podgroups"] and data["queues"], path
        for objects in (data["podgroups"], data["queues"]):
            for fields in objects.values():
                assert fields.get("metadata.resourceVersion", "<masked>") == "<masked>", path
