"""The openb yardstick: replay the Alibaba GPU-sharing trace (``cluster-trace-gpu-v2023``) through
the engine the way the FGD paper's simulator does, and compare the GPU allocation ratio with its
published table (../shared/docs/openb-yardstick.md; data and licences in
``benchmarks/data/openb/README.md``).

The simulator's method, read from its source (hkust-adsl/kubernetes-scheduler-simulator):

* nodes: the 1,213 GPU nodes of ``openb_node_list_gpu_node.csv`` (6,212 GPUs), as the
  simulator's ``prepare_input.sh`` copies them next to every pod list;
* workload per seed (``core.go: Simulate``, ``simulator.go: SortClusterPods``,
  ``TunePodsByNodeTotalResource``): ``rand.Seed(seed)``, one ``rand.Int()``, the pods sorted by
  name and ``rand.Shuffle``d, then random copies of the name-sorted list appended while the GPU
  demand stays within 130% of capacity (a list above it loses random pods instead); Go's
  ``math/rand`` is reproduced by ``scheduler.bench.gorand``;
* pods arrive one at a time, never leave; each is placed alone, a pod that does not fit is
  dropped (``simulator.go: SchedulePods``);
* after every pod: used = allocated GPU milli, arrived = GPU milli of every pod tried so far;
  column X of a seed = mean, over the pods after which arrived/capacity rounds to X%, of
  used/capacity in % (2 decimals) (``merge_alloc_discrete.py``).

Here each pod is one job in one engine session (``open_session``) with every pod of the
workload pending, and the allocate action's step (``allocate_step``) is run for each in arrival
order: the engine's own filter and score, one pod at a time. A GPU is a device of 1,000 MiB so
that a milli-GPU fraction is exact (``gpu_milli / 1000``).

``python -m scheduler.bench.openb [--seeds 42-51] [--traces ...] [--strategies ...]`` writes
``benchmarks/openb.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from scheduler.actions.allocate import allocate_step
from scheduler.bench.gorand import GoRand
from scheduler.cycle import open_session
from scheduler.fragmentation import typical_requests
from scheduler.gc_pause import gc_paused
from scheduler.model import RESOURCES, Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "openb"
NODES_CSV = "openb_node_list_gpu_node.csv"
TRACES = ("default", "gpushare100", "multigpu50")
SEEDS = tuple(range(42, 52))
TUNE = 1.3
STRATEGIES = ("binpack", "spread", "fragmentation")
DEVICE_MIB = 1000.0
MAX_PODS = 1001  # the node list's pod capacity
QUEUE = "openb"
# The FGD simulator's policies as its per-seed table names them.
PUBLISHED_POLICIES = ("01-Random", "02-DotProd", "03-GpuClustering", "04-GpuPacking", "05-BestFit", "06-FGD")


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU: < 1000 only with num_gpu == 1 (a shared GPU)

    @property
    def total_milli(self) -> int:
        return self.gpu_milli * self.num_gpu

    @property
    def gpu(self) -> float:
        """The engine's GPU request: a whole count, or a fraction of one device."""
        if self.num_gpu == 0 or self.gpu_milli == 0:
            return 0.0
        return float(self.num_gpu) if self.gpu_milli >= 1000 else self.gpu_milli / 1000


def read_nodes(path: Path) -> list[Node]:
    with path.open(newline="") as f:
        return [
            Node(
                name=row["sn"],
                gpus=int(row["gpu"]),
                gpu_memory_mib=DEVICE_MIB,
                cpu_millis=float(row["cpu_milli"]),
                memory_mib=float(row["memory_mib"]),
                max_pods=MAX_PODS,
            )
            for row in csv.DictReader(f)
        ]


def read_pods(path: Path) -> list[Pod]:
    with path.open(newline="") as f:
        return [
            Pod(
                name=row["name"],
                cpu_milli=int(row["cpu_milli"]),
                memory_mib=int(row["memory_mib"]),
                num_gpu=int(row["num_gpu"]),
                gpu_milli=int(row["gpu_milli"]),
            )
            for row in csv.DictReader(f)
        ]


def arrival_order(pods: Sequence[Pod], capacity_milli: int, seed: int, tune: float = TUNE) -> list[Pod]:
    """The simulator's workload for one seed: shuffled, then tuned to ``tune`` x capacity."""
    rng = GoRand(seed)
    rng.int_()  # core.go logs one rand.Int() right after seeding
    by_name = sorted(pods, key=lambda p: p.name)
    order = list(by_name)

    def swap(i: int, j: int) -> None:
        order[i], order[j] = order[j], order[i]

    rng.shuffle(len(order), swap)
    total = sum(p.total_milli for p in order)
    target = tune * float(capacity_milli)
    if float(total) > target:
        while float(total) > target:
            total -= order.pop(rng.intn(len(order))).total_milli
    elif float(total) < target:
        i = 0
        while True:
            p = by_name[rng.intn(len(by_name))]
            # The simulator compares with the per-GPU milli, then adds the pod's total.
            if float(total + p.gpu_milli) > target:
                break
            total += p.total_milli
            order.append(Pod(f"{p.name}-tuned-{i}", p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli))
            i += 1
    return order


def workload_requests(pods: Iterable[Pod]) -> tuple[tuple[float, float, float, float], ...]:
    """The workload's request shapes for ``Config.fragmentation_requests``: every shape of the
    original list (the simulator keeps the most frequent 95% and ignores memory; every shape,
    memory included, keeps the few large requests, e.g. 8 GPUs with 88 cores, in view)."""
    shapes = ((p.gpu, float(p.cpu_milli), float(p.memory_mib)) for p in pods)
    return tuple((r.gpu, r.cpu_millis, r.memory_mib, r.share) for r in typical_requests(shapes, 1.0))


def _snapshot(nodes: list[Node], order: Sequence[Pod]) -> Snapshot:
    unlimited = {r: QueueResource(quota=-1.0, limit=-1.0) for r in RESOURCES}
    jobs = []
    for i, p in enumerate(order):
        name = f"{i:05d}-{p.name}"
        task = Task(name, job=name, gpu=p.gpu, cpu_millis=float(p.cpu_milli), memory_mib=float(p.memory_mib))
        jobs.append(Job(name=name, queue=QUEUE, created_s=float(len(order) - i), tasks=[task]))
    return Snapshot(nodes=nodes, queues=[Queue(QUEUE, resources=unlimited)], jobs=jobs)


@dataclass
class Replay:
    events: list[tuple[int, int]]  # (arrived milli, used milli) after each pod
    placed: int
    seconds: float  # CPU time of the placements (the session built once, not counted)


def replay(nodes: list[Node], order: Sequence[Pod], config: Config) -> Replay:
    """Place the pods one at a time in ``order``; a pod that fits nowhere is dropped."""
    snapshot = _snapshot(nodes, order)
    with gc_paused():
        session = open_session(snapshot, config, nodes[0].pool)
        placements = session.placements
        arrived = used = placed = 0
        events: list[tuple[int, int]] = []
        start = time.process_time()
        for job, pod in zip(snapshot.jobs, order, strict=True):
            arrived += pod.total_milli
            allocate_step(session, job)
            if placements[job.tasks[0].key].status == TaskState.ALLOCATED:
                used += pod.total_milli
                placed += 1
            events.append((arrived, used))
        seconds = time.process_time() - start
    return Replay(events, placed, seconds)


def ratio_at(events: Sequence[tuple[int, int]], total_gpus: int, x: int) -> float | None:
    """Column ``x`` of one run, as merge_alloc_discrete.py computes it (None: no event near)."""
    arrive = [round(a / total_gpus / 10, 0) for a, _ in events]
    alloc = [round(u / total_gpus / 10, 2) for _, u in events]
    near = [al for ar, al in zip(arrive, alloc, strict=True) if ar == x]
    if not near:
        near = [al for ar, al in zip(arrive, alloc, strict=True) if x - 1 <= ar <= x + 1]
    return round(statistics.fmean(near), 2) if near else None


def published(path: Path, trace: str, x: int = 100) -> dict[str, dict[int, float]]:
    """The simulator's per-seed column ``x`` for one trace: policy -> seed -> value."""
    out: dict[str, dict[int, float]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            if row["workload"] == f"openb_pod_list_{trace}" and row.get(str(x)):
                out.setdefault(row["sc_policy"], {})[int(row["seed"])] = float(row[str(x)])
    return out


def strategy_config(strategy: str, pods: Sequence[Pod]) -> Config:
    cfg = Config(actions=("allocate",), placement=strategy)
    if strategy == "fragmentation":
        cfg.fragmentation_requests = workload_requests(pods)
    return cfg


@dataclass
class Cell:
    trace: str
    strategy: str
    per_seed: dict[int, float]
    placed: int
    seconds: float
    tried: int = 0

    @property
    def mean(self) -> float:
        return statistics.fmean(self.per_seed.values())


def _one(args: tuple[str, str, int]) -> tuple[str, str, int, float, int, float, int]:
    """One (trace, strategy, seed) run: its value at 100%, pods placed, CPU seconds, pods."""
    trace, strategy, seed = args
    nodes = read_nodes(DATA / NODES_CSV)
    total_gpus = sum(n.gpus for n in nodes)
    pods = read_pods(DATA / f"openb_pod_list_{trace}.csv")
    order = arrival_order(pods, total_gpus * 1000, seed)
    r = replay(nodes, order, strategy_config(strategy, pods))
    value = ratio_at(r.events, total_gpus, 100)
    if value is None:
        raise AssertionError(f"{trace} seed {seed}: the workload never reached 100% of capacity")
    print(
        f"{trace} {strategy} seed {seed}: {value:.2f}% at 100% arrived, {r.placed}/{len(order)} placed, "
        f"{1000 * r.seconds / len(order):.2f} ms/pod",
        file=sys.stderr,
        flush=True,
    )
    return trace, strategy, seed, value, r.placed, r.seconds, len(order)


def plan(
    traces: Sequence[str], strategies: Sequence[str], seeds: Sequence[int], spread_seeds: Sequence[int]
) -> list[tuple[str, str, int]]:
    """The runs, seed by seed, so that a run cut short still has every row for its first seeds."""
    work = []
    for seed in seeds:
        for trace in traces:
            for strategy in strategies:
                if strategy != "spread" or seed in spread_seeds:
                    work.append((trace, strategy, seed))
    return work


def run(work: Sequence[tuple[str, str, int]], jobs: int = 1, results: Path | None = None) -> list[Cell]:
    """Every (trace, strategy, seed) of ``work``, ``jobs`` at a time; each result is appended to
    ``results`` (JSON lines) as it comes, and read back by ``cells``."""
    out: list[tuple[str, str, int, float, int, float, int]] = []

    def keep(r: tuple[str, str, int, float, int, float, int]) -> None:
        out.append(r)
        if results is not None:
            with results.open("a") as f:
                f.write(json.dumps(r) + "\n")

    if jobs > 1:
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            for r in pool.imap(_one, work, chunksize=1):
                keep(r)
    else:
        for w in work:
            keep(_one(w))
    return cells(out)


def read_results(path: Path) -> list[Cell]:
    return cells([tuple(json.loads(line)) for line in path.read_text().splitlines() if line.strip()])


def cells(results: Iterable[tuple[str, str, int, float, int, float, int]]) -> list[Cell]:
    by_key: dict[tuple[str, str], Cell] = {}
    for trace, strategy, seed, value, placed, seconds, tried in results:
        cell = by_key.setdefault((trace, strategy), Cell(trace, strategy, {}, 0, 0.0))
        cell.per_seed[seed] = value
        cell.placed += placed
        cell.seconds += seconds
        cell.tried += tried
    order = {(t, st): (TRACES.index(t), STRATEGIES.index(st)) for t, st in by_key}
    return [by_key[k] for k in sorted(by_key, key=lambda k: order[k])]


def _parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scheduler.bench.openb")
    ap.add_argument(
        "--seeds", default="42-51", help="seeds, e.g. 42-51 or 42,45 (default: the paper's 42-51)"
    )
    ap.add_argument("--spread-seeds", help="seeds for spread, which scans every node (default: --seeds)")
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel (processes)")
    ap.add_argument("--traces", nargs="+", default=list(TRACES), choices=TRACES)
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    ap.add_argument("--results", type=Path, help="append each run's result here (JSON lines)")
    ap.add_argument("--render-only", action="store_true", help="write the report from --results, run nothing")
    ap.add_argument("--out", type=Path, help="write the report here (default: print it)")
    ap.add_argument("--timing", action="store_true", help="add the allocate benchmark, option on and off")
    args = ap.parse_args(argv)
    from scheduler.bench.openb_report import render, timing

    seeds = _parse_seeds(args.seeds)
    spread_seeds = _parse_seeds(args.spread_seeds) if args.spread_seeds else seeds
    started = time.time()
    if args.render_only:
        if args.results is None:
            ap.error("--render-only needs --results")
        found = read_results(args.results)
    else:
        found = run(plan(args.traces, args.strategies, seeds, spread_seeds), args.jobs, args.results)
    timings = timing() if args.timing else None
    done = sorted({s for c in found for s in c.per_seed})
    text = render(found, done, None if args.render_only else time.time() - started, timings)
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
