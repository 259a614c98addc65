"""Agreement of the engine with KAI's own scheduler code on seeded random clusters (issue 28).

Drives the project's differential harness ``tools/kai_diff`` (README there; ``KAI_DIFF_BIN`` =
the harness built from KAI's source with its ``build_kai.sh``): for each action set it generates
``--n`` random clusters per GPU-memory mode (node memory 40960/81920 MiB as labelled, and already a
multiple of 100 MiB), runs KAI twice (to find its nondeterministic ties) and this engine once, and
counts the cases whose every task has the same status and node. Tasks whose status or node differ
between KAI's two runs are left out of the comparison and counted. Writes
``benchmarks/kai-agreement.md``.

    KAI_DIFF_BIN=/path/to/kai_difftool .venv/bin/python benchmarks/kai_agreement.py \\
        --seed 5000 --n 200 [--sets alloc,arp,consol,ac,full] [--tool tools/kai_diff] \\
        [--wide | --features spread,selector,...]

``--wide`` (or ``--features`` with some of kai_diff's ``FEATURES``) turns on the generator's widening
features: spread placement, node selectors / affinity, cordoned nodes, per-task request overrides,
Releasing tasks, wider priorities, multi-device fractions, queue min-runtimes, node pools and
time-based fair share. It needs a harness built from ``tools/kai_diff`` (the one that maps them).

Use seeds never used while fixing the engine (taken: 1000-1499, 2000-2499, 3000-3199, 6000-9999,
20000-20999, 30000-30999, 40000-40399, 50000-57999, 70000-72199). Exits 1 when ``KAI_DIFF_BIN`` is not set.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import os
import pathlib
import sys
import tempfile
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "kai-agreement.md"
# the project's own copy of the harness (it began as ../shared/tools/kai_diff)
DEFAULT_TOOL = ROOT / "tools" / "kai_diff"
SETS = ("alloc", "arp", "consol", "ac", "full")
MODES = ("raw", "round100")

# Why a disagreement class is left, by a part of its key (kai_diff.classify); filled in as classes
# are traced in KAI's source. A class not matched here is listed as "not traced yet".
KNOWN: list[tuple[tuple[str, ...], str]] = [
    # Consolidation alone (issue 28, consol28, seeds 50000-50079). Fixed: a scenario always has a
    # victim (by_pod_solver.go), consolidation re-places every victim through the node order, a
    # fraction alone in its GPU group gets a new group (IsTaskFitOnGpuGroup), KAI's allocatable-GPU
    # sum (docs/kai-agreement.md). Traced and left:
    # * KAI's node counters after a discarded probe (traced in session 12, consol12a; the rule is
    #   docs/kai-agreement.md, bullet "D (consolidation run alone)"): statement.go undoes each
    #   operation by its reverse on the node's copy of the pod, exact for whole GPUs, CPU and
    #   memory; but Pipeline of an evicted fraction onto its node in another GPU group
    #   (ConsolidateSharedPodInfoToDifferentGPU) drops its Releasing copy without taking it off,
    #   unpipeline removes the new copy and unevict AddTasks the task again: a phantom share stays,
    #   and the conditional shared-GPU counters (gpu_sharing_node_info.go) then drift. Seed 50056:
    #   2.72 before j16's search, -0.76 after, so IsEnoughGPUsAllocatableForJob refuses every later
    #   job, CPU-only ones too (86109: 2.0 -> -11.25; 86017, 86155). A ledger of those counters
    #   kept by the engine's Statement fixed one case of 86000-86199 and broke another then;
    #   modelled in session 13 (consol13b: scheduler/gpu_ledger.py, Config.kai_gpu_counter_drift,
    #   default on; seeds 89400-89799 consol 318 -> 326 of 400, none broken). Left where the
    #   engine's probes are not KAI's operation for operation (the counters replay every one).
    #   Modelled (session 12): a job that check refuses becomes its signature's representative
    #   (consolidation.go: Execute, a nil SearchResult does not stop the action), so a later job
    #   not easier than it is skipped (seeds 86083, 86122; consolidation.py: refused_in_attempt).
    # * Scheduling signatures: no longer a harness difference. The harness (since "wide-2") gives
    #   KAI's session the scheduler binary's parameters (cmd/scheduler/app/options/options.go:
    #   --use-scheduling-signatures true, --max-consolidation-preemptees 16; allow-consolidating-
    #   reclaim true in both), as the engine's defaults are; the cases once put here (seed 50006)
    #   were from the older build. Traced in session 14 (consol14s, seeds 108000-108399): the
    #   class "KAI Pipelined / ours Pending" came from KAI's node counters read by the multi-node
    #   generator (sub_scenario_emitter.go: nodeCapacities, baselineCapacity read
    #   by_pod_solver.go: nodeIdleOrReleasingGpus), now read off the ledger (108156), or follows
    #   an earlier node or search difference (108058, 108248: a job KAI refused by the
    #   allocatable check, then a smaller one of another signature searched).
    # * Gang steps: KAI probes 1, 2, 4, ... tasks with recorded victims and the node-local, then
    #   the multi-node generator (job_solver.go); modelled since session 12 (job_solver.py:
    #   probe_search, the same probes, recorded victims and fingerprints). The cases once put
    #   under it (88230, 88245, 88273, 89376) were other rules, modelled in session 13 (consol13a,
    #   docs/kai-agreement.md): a fraction re-placed on its device after a new GPU group opened
    #   there is moved (Device.group), gpupack counts a group's releasing members
    #   (Device.group_rel), a victim job gets one allocate step back (simulation._one_step).
    (
        ("[consol]", "KAI Pending / ours Pipelined"),
        "KAI's allocatable-GPU sum after a discarded probe that moved a fraction to another GPU group "
        "of its node (ConsolidateSharedPodInfoToDifferentGPU leaves a phantom share; the shared-GPU "
        "counters drift, below zero: seeds 50056, 86109): KAI stops consolidating; modelled "
        "(kai_gpu_counter_drift); left where KAI's placement reads those counters and the engine its "
        "devices (a victim's GPU group fit after a phantom share: seed 108067; the idle-GPU filter)",
    ),
    (
        ("[consol]", "KAI Running / ours Pipelined"),
        "the victims the engine moves for jobs KAI no longer consolidates for (KAI's allocatable-GPU "
        "sum after a discarded probe's phantom share: seeds 50056, 86109)",
    ),
    (
        ("[consol]", "KAI Pipelined / ours Pending"),
        "not the harness (its KAI session has the binary's scheduling signatures, as the engine): "
        "KAI's node counters after discarded probes where the engine reads its devices (group fits, "
        "node scores, the idle-GPU filter: seed 108152), or follows an earlier node difference "
        "(108058); the multi-node generator's node capacities are read off the ledger (108156)",
    ),
    (
        ("[consol]", "KAI Pipelined / ours Running"),
        "a fraction KAI moves to another GPU group of its own node (statement.go Pipeline, 'moving "
        "it to index') where the engine keeps it on its device: seed 108102, j16 (a CPU-only gang) "
        "moves j03-0 from group 2 to 6 of node04; or follows an earlier node difference (108058); "
        "not traced further (89161, 89300)",
    ),
    # Consolidation alone, seeds 86250-86369 (consol12b): fixed KAI's node vectors for pipelined
    # tasks (GPUs they took while idle still idle for nodeavailability), a moved
    # task re-placed on its old node going back to its move, a fraction's nodeavailability over a
    # group's releasing memory, and the victim order's whole-job AllocatedVector charge
    # (docs/kai-agreement.md). Several of the cases left are KAI ties (its two runs differ on a
    # rerun: 86322, 86346, 86352, 86369).
    # Consolidation alone, seeds 106000-106399 (consol14n), traced in KAI's -vv 7 logs. Fixed: a task
    # moved twice un-evicted through a node holding its Releasing pod, an evicted pipelined
    # fraction's group (docs/kai-agreement.md). Most of what was left: KAI's simulated allocation
    # reads its node GPU counters (fit check IsTaskAllocatableOnReleasingOrIdle, nodeavailability,
    # binpack), which drift from the devices while consolidation runs; modelled since session 15
    # (consol15: fit.counters_of on the nodes gpu_ledger.Ledger.drifted names; seeds 130000-130399
    # 341 -> 374 of 400; 130013, 130197, 130264, 130298 changed the other way, not traced). Also:
    # KAI's unevict checks no room, so a task un-evicted through such a node goes back onto GPUs
    # taken since and overbooks its node (the engine never double-books a device: seeds 106093,
    # 106122); a fraction un-evicted the same way (106287); KAI ties (106026, 106313: 2-3 results
    # in 6-8 KAI runs). Session 16 (consol16, seeds 151000-151199): fixed a task without GPUs on a
    # node whose GPU counters went below zero (fit.gpu_counters_below_zero: 151026; 151172 a tie); of
    # what is left, 151016, 151017 (minimised: two 4-GPU tasks un-evicted onto a 5-GPU node),
    # 151119 and 151121 are un-evictions that overbook (statement.go: Pipeline -> Unevict).
    (
        ("[consol] node differs",),
        "un-evictions through a node holding the task's Releasing pod onto GPUs taken since, which "
        "overbook it (seeds 106093, 106122, 151016, 151017, 151119), KAI ties (106313, 151215, "
        "151308); not traced: 130013, 130197, 130264, 130298",
    ),
    # arp, traced in KAI's -vv 7 log on seeds 52376 and 52423 (round100): the tasks that differ were
    # placed by allocate (Allocated in both engines, on nodes of other scores), not by the eviction
    # search; on 52438 both engines try the same scenarios and evict the same victims, and the
    # preemptor is pipelined elsewhere: after a fraction's eviction KAI's nodeavailability reads its
    # node as -1 idle / 1 releasing GPU, which the engine's devices do not model.
    (
        ("[arp] node differs (Pending whole)",),
        "node scores (allocate's, or after a fraction's eviction), not victim choice",
    ),
    # arp12 (seeds 86500-86999), traced in KAI's -vv 7 log:
    # * 86528 (arp raw): j25-0's probe evicts j02-1, a fraction pipelined earlier in the cycle, and
    #   re-pipelines it on its node in another GPU group (node_info.ConsolidateSharedPodInfoToDifferentGPU
    #   keeps the old entry's resources); after the discard node07 counts -2 idle GPUs and the final
    #   scenario fits j25 nowhere: KAI's phantom share (docs/kai-agreement.md), not modelled.
    # * 86579 (arp raw, minimised: j23-1): a fraction pipelined earlier in the cycle and evicted is
    #   Releasing in KAI and its node counts it twice (idle -2 GPUs on node00), so its re-placement
    #   avoids that node; the engine sends it back to Pending with its room released. Not modelled
    #   (docs/kai-agreement.md: a pipelined task evicted).
    (
        ("[arp] Pending whole: KAI Pending / ours Pipelined",),
        "KAI's phantom share after a discarded probe moved a fraction to another GPU group (seed 86528)",
    ),
    (
        ("node differs (Pending gpu-memory",),
        "a pipelined fraction evicted: its node counted twice in KAI (seed 86579); not modelled",
    ),
    # arp14 (seeds 111000-111599), traced in KAI's -vv 7 log: a whole-GPU step that fits the
    # engine's devices does not fit KAI's node counters (IsTaskAllocatable: IdleVector +
    # ReleasingVector), which a fraction's eviction moves conditionally (gpu_sharing_node_info.go):
    # * 111377 (full raw, minimised): reclaim's scenario for j23 evicts j03-0 (0.75 GPU) on node00,
    #   where j04 was pipelined onto releasing GPUs: KAI reads -1 idle / 4 releasing, 3 < 4, and the
    #   scenario fails; the engine moves j03-0 to node01 and places j23.
    # * 111243 (arp round100, minimised): j02 (2 x 0.5) pipelined by reclaim for j09 into a new group
    #   on node02 (its own node for j02-1) and evicted by j08's scenario: node02 reads -1 idle / 1
    #   releasing, j08 fits nowhere and j02 stays Pipelined; the engine evicts it and places j08.
    # Modelled in session 15 (arp15): reclaim and preempt keep the ledger too (gpu_ledger.kept) and
    # a whole-GPU fit reads its idle + releasing GPUs (fit.node_fit, Ledger.whole_room); both seeds
    # are kai-diff cases, and on seeds 131000-131399 arp + full went 384 -> 387 of 400. Left in these
    # classes: where the ledger is not KAI's counters (seed 131094 arp raw: the ledger gives node04
    # 4 GPUs for j10-2 where KAI's scenario fails; 131051 arp raw: a fraction gang stays Pipelined in
    # KAI), and fraction fits, which still read the devices (fractionTaskGpusAllocatableDeviceCount).
    (
        ("[full] Pending whole: KAI Pending / ours Pipelined",),
        "KAI's node counters after a fraction's eviction (seed 111377), read by whole-GPU fits since "
        "arp15; left where the ledger is not KAI's counters (not traced)",
    ),
    (
        ("fraction-gang: KAI Pipelined / ours Releasing",),
        "a fraction pipelined this cycle and evicted: KAI's node counters (-1 idle, seed 111243) "
        "leave the preemptor no room (modelled for whole-GPU steps; left: seed 131051, not traced)",
    ),
    # arp13 (seeds 89800-90599): a task pipelined (or moved) earlier in the cycle and evicted is now
    # reported Releasing on that node as KAI's Statement.Evict leaves it (Session.evicted_pipelined;
    # seeds 90328, 90368). Left in this class: such a task that a later step of ours placed again.
    (
        ("KAI Releasing / ours Pending",),
        "a task pipelined earlier in the cycle and evicted is Releasing in KAI (statement.go Evict), "
        "which the engine reports; here a later step placed it again or evicted it otherwise: not traced",
    ),
]


def load_tool(tool: pathlib.Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("kai_diff", tool / "kai_diff.py")
    if spec is None or spec.loader is None:
        sys.exit(f"no kai_diff.py in {tool}: pass --tool with the harness directory")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def campaign(
    kd: ModuleType,
    aset: str,
    mode: str,
    seed: int,
    n: int,
    work: pathlib.Path,
    batch: int,
    features: tuple[str, ...] = (),
) -> dict[str, Any]:
    import yaml

    cases = []
    for i in range(n):
        s = seed + i
        # without features the call is the one of the narrow harness: the same files, seed for seed
        scen = kd.gen(s, kd.ACTION_SETS[aset], kd.GPU_MEMS[mode], *([features] if features else []))
        scen["name"] += f" ({aset}, {mode})"
        p = work / f"r{s:05d}-{aset}-{mode}.yaml"
        p.write_text(yaml.safe_dump(scen, sort_keys=False))
        cases.append((str(p), scen))
    results = []
    for k in range(0, len(cases), batch):
        results += kd.eval_case(cases[k : k + batch])
    c: collections.Counter[str] = collections.Counter()
    classes: dict[str, list[str]] = collections.defaultdict(list)
    skips: collections.Counter[str] = collections.Counter()
    for r in results:
        c["cases"] += 1
        if "skip" in r:
            c["skipped"] += 1
            skips[str(r["skip"])] += 1
            continue
        if "error" in r:
            c["errors"] += 1
            classes["error: " + str(r["error"])[:80]].append(pathlib.Path(r["file"]).name)
            continue
        c["compared"] += 1
        status = [d for d in r["diffs"] if d[1] != "node"]
        c["same_status"] += not status
        c["same_all"] += not r["diffs"]
        nondet = len(r["nd_s"] | r["nd_n"])
        c["nondet_cases"] += bool(nondet)
        c["nondet_tasks"] += nondet
        c["tasks"] += len(r["kai"])
        for cl in r["classes"]:
            classes[cl].append(pathlib.Path(r["file"]).name)
    return {"counts": c, "classes": classes, "skips": skips, "seeds": (seed, seed + n - 1)}


def why(aset: str, cls: str) -> str:
    key = f"[{aset}] {cls}"
    for parts, text in KNOWN:
        if all(part in key for part in parts):
            return text
    return "not traced yet"


def report(
    runs: dict[tuple[str, str], dict[str, Any]],
    started: float,
    args: argparse.Namespace,
    when: str,
    harness: str,
) -> str:
    lines = [
        "# Agreement with KAI's own scheduler code (random clusters)",
        "",
        "Generated by `benchmarks/kai_agreement.py` (do not edit by hand; re-run with `KAI_DIFF_BIN` set).",
        "",
        "Each case is a seeded random cluster of `tools/kai_diff` (2-12 nodes, 1-3 queue levels;"
        " whole, fractional, GPU-memory, CPU-only, gang and elastic jobs, running and pending), run through"
        " KAI's real session and actions (twice) and through this engine. *identical*: every task has the"
        " same status, and every placed task the same node, as KAI decided. Tasks on which KAI's two runs"
        " differ (its own nondeterministic ties: Go map order) are excluded and counted. GPU memory"
        " *raw*: nodes labelled 40960 / 81920 MiB; *round100*: 40000 / 80000 MiB.",
        "",
        f"Run on {when} in {time.time() - started:.0f} s; harness `{harness}`.",
        "",
        "Generator features: "
        + (", ".join(getattr(args, "features_list", ())) or "none (the base generator)")
        + ".",
        "",
        "| action set | GPU memory | seeds | cases | compared | identical (status + node) | % |"
        " same statuses | cases with KAI ties | tied tasks excluded |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    total: collections.Counter[str] = collections.Counter()
    per_set: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for (aset, mode), run in runs.items():
        c = run["counts"]
        total.update(c)
        per_set[aset].update(c)
        pct = 100.0 * c["same_all"] / c["compared"] if c["compared"] else 0.0
        lo, hi = run["seeds"]
        lines.append(
            f"| {aset} | {mode} | {lo}-{hi} | {c['cases']} | {c['compared']} | {c['same_all']} | {pct:.1f} |"
            f" {c['same_status']} | {c['nondet_cases']} | {c['nondet_tasks']} |"
        )
    lines += ["", "Per action set (both GPU-memory modes):", ""]
    lines += ["| action set | compared | identical | % |", "|---|---:|---:|---:|"]
    for aset, c in per_set.items():
        pct = 100.0 * c["same_all"] / c["compared"] if c["compared"] else 0.0
        lines.append(f"| {aset} | {c['compared']} | {c['same_all']} | {pct:.1f} |")
    if total["compared"]:
        lines += [
            "",
            f"All: {total['same_all']} of {total['compared']} identical "
            f"({100.0 * total['same_all'] / total['compared']:.1f}%).",
        ]
    lines += ["", "## Classes left", ""]
    left = [
        (aset, mode, cl, files) for (aset, mode), run in runs.items() for cl, files in run["classes"].items()
    ]
    if not left:
        lines.append("None: every compared case agreed.")
    else:
        lines += [
            "| action set | GPU memory | class (task state, job kind: KAI / ours) | cases | example | why |",
            "|---|---|---|---:|---|---|",
        ]
        for aset, mode, cl, files in sorted(left, key=lambda x: -len(x[3])):
            lines.append(f"| {aset} | {mode} | {cl} | {len(files)} | {files[0]} | {why(aset, cl)} |")
    skips: collections.Counter[str] = collections.Counter()
    for run in runs.values():
        skips.update(run["skips"])
    if skips:
        lines += [
            "",
            "Skipped (the harness cannot express them in KAI's fakes): "
            + ", ".join(f"{k} ({v})" for k, v in skips.items()),
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/kai_agreement.py")
    ap.add_argument("--seed", type=int, default=5000)
    ap.add_argument("--n", type=int, default=100, help="cases per action set and GPU-memory mode")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--tool", type=pathlib.Path, default=DEFAULT_TOOL)
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    ap.add_argument("--render", type=pathlib.Path, help="write the report again from a saved .json")
    ap.add_argument("--wide", action="store_true", help="turn on every generator feature of the harness")
    ap.add_argument(
        "--features", default="", help="comma list of the harness's generator features (kai_diff.FEATURES)"
    )
    args = ap.parse_args()
    saved = args.out.with_suffix(".json")
    if args.render:
        data = json.loads(args.render.read_text())
        runs_in = {
            (r["set"], r["mode"]): {
                "counts": collections.Counter(r["counts"]),
                "classes": r["classes"],
                "skips": collections.Counter(r["skips"]),
                "seeds": tuple(r["seeds"]),
            }
            for r in data["runs"]
        }
        harness = data.get("harness", "")
        args.features_list = tuple(data.get("features", ()))
        args.out.write_text(report(runs_in, time.time() - data["seconds"], args, data["when"], harness))
        return 0
    if not os.environ.get("KAI_DIFF_BIN"):
        print("KAI_DIFF_BIN is not set: build the harness with kai_diff's build_kai.sh", file=sys.stderr)
        return 1
    # the harness runs this checkout's engine (ours_runner.py imports ``scheduler``)
    os.environ["PROJECT"] = str(ROOT)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("PROJECT_PY", sys.executable)
    kd = load_tool(args.tool.resolve())
    known = tuple(getattr(kd, "FEATURES", ()))
    wanted = known if args.wide else tuple(f for f in args.features.split(",") if f)
    unknown = [f for f in wanted if f not in known]
    if unknown or (args.wide and not known):
        print(
            f"--features: {unknown or 'wide'} not known to {args.tool}/kai_diff.py (it knows: "
            f"{', '.join(known) or 'none'}); use the project's tools/kai_diff",
            file=sys.stderr,
        )
        return 2
    args.features_list = wanted
    started = time.time()
    runs: dict[tuple[str, str], dict[str, Any]] = {}
    seed = args.seed
    with tempfile.TemporaryDirectory(prefix="kai-agreement-") as td:
        for aset in args.sets.split(","):
            for mode in args.modes.split(","):
                runs[(aset, mode)] = campaign(
                    kd, aset, mode, seed, args.n, pathlib.Path(td), args.batch, wanted
                )
                seed += args.n
                c = runs[(aset, mode)]["counts"]
                done = f"{aset} {mode}: {c['same_all']}/{c['compared']} identical"
                print(done, file=sys.stderr, flush=True)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    harness = os.environ["KAI_DIFF_BIN"]
    text = report(runs, started, args, when, harness)
    args.out.write_text(text)
    # the raw counts and classes, so the report can be written again (--render) as classes are traced
    rows = [
        {
            "set": a,
            "mode": m,
            "counts": r["counts"],
            "classes": r["classes"],
            "skips": r["skips"],
            "seeds": r["seeds"],
        }
        for (a, m), r in runs.items()
    ]
    saved.write_text(
        json.dumps(
            {
                "when": when,
                "seconds": time.time() - started,
                "harness": harness,
                "features": list(wanted),
                "runs": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
