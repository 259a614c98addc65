"""``benchmarks/openb.md``: the openb replay's table beside the FGD simulator's published one,
and the allocate benchmark with the fragmentation strategy on and off (``scheduler.bench.openb``)."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from scheduler.bench.openb import DATA, PUBLISHED_POLICIES, Cell, published
from scheduler.bench.workloads import ALLOCATE_ONLY, allocate_snapshot
from scheduler.cycle import run_cycle
from scheduler.model import Config

TIMING_NODES, TIMING_JOBS, TIMING_REPS = 1000, 5000, 5


def timing() -> dict[str, list[float]]:
    """CPU seconds of one allocate cycle (the engine benchmark's allocate-1000n-5000j), binpack
    and fragmentation interleaved rep by rep so that both see the same machine load."""
    out: dict[str, list[float]] = {"binpack": [], "fragmentation": []}
    configs = {
        "binpack": ALLOCATE_ONLY,
        "fragmentation": Config(actions=("allocate",), placement="fragmentation"),
    }
    for _ in range(TIMING_REPS):
        for name, cfg in configs.items():
            snapshot = allocate_snapshot(TIMING_NODES, TIMING_JOBS)
            start = time.process_time()
            result = run_cycle(snapshot, cfg)
            out[name].append(time.process_time() - start)
            if len(result.allocations) != TIMING_JOBS:
                raise AssertionError(f"{name}: {len(result.allocations)} of {TIMING_JOBS} allocated")
    return out


def _wall(wall_s: float | None) -> str:
    """The run's wall time, or where the rows come from when the report is rendered from the
    per-run results of earlier runs (``--render-only``)."""
    if wall_s is None:
        return "rendered from earlier runs' per-run results, `--render-only`"
    return f"{wall_s / 60:.1f} min wall"


def _row(trace: str, name: str, source: str, values: Sequence[float], same: float, extra: str = "") -> str:
    mean = statistics.fmean(values)
    spread = f"{min(values):.2f}–{max(values):.2f}"
    return f"| {trace} | {name} | {source} | {mean:.2f} | {spread} | {same:.2f} | {extra} |"


def render(
    cells: Sequence[Cell],
    seeds: Sequence[int],
    wall_s: float | None,
    timings: dict[str, list[float]] | None,
) -> str:
    lines = [
        "# openb: GPU allocation ratio on the Alibaba GPU-sharing trace, beside the FGD paper",
        "",
        f"`make bench-openb` ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {_wall(wall_s)}). Method, data and licences: "
        "`scheduler/bench/openb.py`, `benchmarks/data/openb/README.md`, ../shared/docs/openb-yardstick.md.",
        "",
        "GPU milli allocated, % of the 6,212 GPUs, when the arrived workload reaches 100% of them "
        f"(column 100 of the simulator's table), mean over seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} seeds) "
        "with tune 1.3. *published*: the simulator's own per-seed results "
        "(`experiments/analysis/expected_results/analysis_allo_discrete.csv`, all 10 seeds 42–51); "
        "*engine*: this engine, one allocate step per pod, a pod that does not fit dropped. "
        "The workload (order and copies) is the simulator's, seed for seed: columns up to 40% match "
        "its table exactly (tests/engine/test_openb_replay.py).",
        "",
        "| trace | strategy | source | mean @100% | seeds min–max | mean on the seeds run here | "
        "pods placed, CPU per pod |",
        "|---|---|---|---|---|---|---|",
    ]
    by_trace: dict[str, list[Cell]] = {}
    for cell in cells:
        by_trace.setdefault(cell.trace, []).append(cell)
    for trace, group in by_trace.items():
        pub = published(DATA / "fgd_analysis_allo_discrete.csv", trace)
        ran = sorted({seed for c in group for seed in c.per_seed})
        for policy in PUBLISHED_POLICIES:
            if policy in pub:
                same = statistics.fmean(pub[policy][seed] for seed in ran if seed in pub[policy])
                lines.append(
                    _row(trace, policy.split("-", 1)[1], "published", list(pub[policy].values()), same)
                )
        for cell in group:
            runs = len(cell.per_seed)
            per_pod = 1000 * cell.seconds / max(1, cell.tried)
            extra = f"{cell.placed / runs:.0f} of {cell.tried / runs:.0f} per seed, {per_pod:.2f} ms"
            source = "engine" if runs == len(seeds) else f"engine, {runs} seeds"
            values = list(cell.per_seed.values())
            lines.append(_row(trace, cell.strategy, source, values, statistics.fmean(values), extra))
    lines += [
        "",
        "Per seed (engine):",
        "",
        "| trace | strategy | " + " | ".join(str(s) for s in seeds) + " |",
    ]
    lines.append("|---|---|" + "---|" * len(seeds))
    for cell in cells:
        lines.append(
            f"| {cell.trace} | {cell.strategy} | "
            + " | ".join(f"{cell.per_seed[s]:.2f}" if s in cell.per_seed else "–" for s in seeds)
            + " |"
        )
    if timings:
        b, f = statistics.median(timings["binpack"]), statistics.median(timings["fragmentation"])
        lines += [
            "",
            f"Allocate cycle, {TIMING_NODES:,} nodes and {TIMING_JOBS:,} one-GPU jobs "
            f"(the engine benchmark's allocate workload), median CPU of {TIMING_REPS} interleaved reps: "
            f"binpack {1000 * b:.0f} ms, "
            f"fragmentation {1000 * f:.0f} ms ({f / b:.2f}x; goal: within 2x).",
        ]
    default = {c.strategy: c.mean for c in by_trace.get("default", [])}
    if default:
        others = {k: v for k, v in default.items() if k not in ("binpack", "spread")}
        best = max(others, key=lambda k: others[k]) if others else "binpack"
        nan = float("nan")
        lines += [
            "",
            f"openb default @100%: binpack {default.get('binpack', nan):.1f}%, "
            f"spread {default.get('spread', nan):.1f}%, {best} {default.get(best, nan):.1f}%",
        ]
    return "\n".join(lines) + "\n"
