"""The KAI differential harness's random generator (tools/kai_diff): the base generator stays
reproducible seed for seed, and each widening feature adds only what it says, consistently with the
running tasks (a running task never violates the feature it is generated with)."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pathlib
import subprocess
import sys
from types import ModuleType

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "kai_diff"

# sha256 of the base generator's files for seeds 54000-54039 x {alloc, full} x {raw, round100},
# computed with ../shared/tools/kai_diff/kai_diff.py as given to the project (before any feature
# option existed): the old campaigns' seeds must keep giving the same clusters.
BASE_DIGEST = "ba035449dec63be80d8d3f1a1370f2d3ff1ea9d014f010223663903000b96253"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kai_diff_under_test", TOOL / "kai_diff.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KD = _load()
# Features whose point is another request (several GPUs per fraction): the rest keep the base requests.
CHANGES_REQUESTS = {"multifrac"}


@pytest.fixture(scope="module")
def kd() -> ModuleType:
    return KD


def dump(scen: dict) -> str:
    return yaml.safe_dump(scen, sort_keys=False)


def test_base_generator_is_the_same_seed_for_seed(kd: ModuleType) -> None:
    h = hashlib.sha256()
    for seed in range(54000, 54040):
        for aset in ("alloc", "full"):
            for mode in ("raw", "round100"):
                h.update(dump(kd.gen(seed, kd.ACTION_SETS[aset], kd.GPU_MEMS[mode])).encode())
    assert h.hexdigest() == BASE_DIGEST


def test_no_features_is_the_base_generator(kd: ModuleType) -> None:
    for seed in range(54000, 54020):
        assert dump(kd.gen(seed, ["allocate"], kd.GPU_MEMS["raw"], ())) == dump(
            kd.gen(seed, ["allocate"], kd.GPU_MEMS["raw"])
        )


@pytest.mark.parametrize("feature", [f for f in KD.FEATURES if f not in CHANGES_REQUESTS])
def test_a_feature_keeps_the_base_cluster(kd: ModuleType, feature: str) -> None:
    """Features draw from their own generator: node sizes and job requests are the base ones."""
    for seed in range(54000, 54030):
        base = kd.gen(seed, ["allocate"], kd.GPU_MEMS["raw"])
        wide = kd.gen(seed, ["allocate"], kd.GPU_MEMS["raw"], (feature,))
        assert [n["gpus"] for n in wide["nodes"]] == [n["gpus"] for n in base["nodes"]]
        assert [j["task_defaults"] for j in wide["jobs"]] == [j["task_defaults"] for j in base["jobs"]]
        assert wide["source"].endswith(" + " + feature)


def test_unknown_feature_is_refused(kd: ModuleType) -> None:
    with pytest.raises(ValueError, match="unknown generator features"):
        kd.gen(54000, ["allocate"], kd.GPU_MEMS["raw"], ("nosuch",))


def queue_pool(name: str, parent: dict, pool: dict) -> str:
    while parent[name]:
        name = parent[name]
    return pool[name]


def test_wide_clusters_are_consistent(kd: ModuleType) -> None:
    """Every feature on, 150 seeds: running tasks fit their devices, satisfy their job's selector
    and sit in their queue's pool; each feature shows up somewhere."""
    seen: set[str] = set()
    for seed in range(54000, 54150):
        scen = kd.gen(seed, ["allocate"], kd.GPU_MEMS["raw"], kd.FEATURES)
        assert kd.valid_capacity(scen)
        nodes = {n["name"]: n for n in scen["nodes"]}
        parent = {q["name"]: q.get("parent") for q in scen["queues"]}
        pool = {q["name"]: q.get("pool") for q in scen["queues"]}

        for j in scen["jobs"]:
            running = [t for t in j["tasks"] if t["state"] in ("Running", "Releasing")]
            for t in running:
                node = nodes[t["node"]]
                assert node["pool"] == queue_pool(j["queue"], parent, pool)
                for key, value in (j.get("node_selector") or {}).items():
                    assert node["labels"][key] == value
                devices = t.get("gpu_device")
                if isinstance(devices, list):
                    assert len(devices) == j["task_defaults"]["gpu_fraction_devices"]
                    seen.add("multifrac")
            if any(t["state"] == "Releasing" for t in j["tasks"]):
                seen.add("releasing")
            if "node_selector" in j or "node_affinity" in j:
                seen.add("selector")
            if any(k in t for t in j["tasks"] for k in ("cpu_millis", "memory_mib", "gpu_memory_mib")):
                seen.add("override")
        if any(n.get("unschedulable") for n in scen["nodes"]):
            seen.add("unsched")
        if any("reclaim_min_runtime_s" in q or "preempt_min_runtime_s" in q for q in scen["queues"]):
            seen.add("minruntime")
        if len({n["pool"] for n in scen["nodes"]}) > 1:
            seen.add("pools")
        seen |= {"usage"} if "usage_window_hours" in scen["config"] else set()
        seen |= {"spread"} if "spread" in str(scen["config"]) else set()
        seen |= {"prio"} if any(j["priority"] not in (50, 75, 100, 125) for j in scen["jobs"]) else set()
    assert seen == set(kd.FEATURES)


def test_agreement_benchmark_refuses_an_unknown_feature() -> None:
    env = dict(os.environ, KAI_DIFF_BIN="/nonexistent/kai_difftool")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "kai_agreement.py"),
            "--features",
            "spread,nosuch",
            "--out",
            "/nonexistent/out.md",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "nosuch" in proc.stderr and "spread" in proc.stderr
