"""Record or compare the engine's complete outcomes (a digest per case) before and after an
optimisation: every scenario file given, the benchmark workloads up to a size, and seeded random
snapshots. ``python -m scheduler.bench.equivalence record OUT.json [paths...]`` then
``... compare OUT.json [paths...]``: exit 1 and list the cases whose outcome changed.

This is a development guard (the decisions must stay byte-identical); the permanent test that the
fast node search matches the reference rule lives in tests/engine/test_node_search.py."""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from scheduler.bench import workloads as wl
from scheduler.cycle import run_cycle
from scheduler.model import (
    Config,
    Job,
    Node,
    Queue,
    QueueResource,
    Snapshot,
    Task,
    TaskState,
    TopologyConstraint,
)
from scheduler.scenario import find_files, load, run


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


# Over 80 lines: one random cluster, its nodes, queues and jobs drawn in a fixed order (the seed
# decides every draw, so the order of the draws must not change).
def random_snapshot(seed: int) -> Snapshot:
    """A random mixed cluster: whole and fractional GPU jobs, gangs, running and releasing pods."""
    rnd = random.Random(seed)
    n_nodes = rnd.randint(2, 24)
    nodes = [
        Node(
            f"n{i:03d}",
            gpus=rnd.choice([0, 2, 4, 8, 8]),
            gpu_memory_mib=rnd.choice([40960, 81920]),
            cpu_millis=rnd.choice([16000, 64000]),
            unschedulable=rnd.random() < 0.05,
            max_pods=rnd.choice([4, 110]),
            labels={"rack": f"r{i % 3}", "zone": f"z{i % 2}"},
        )
        for i in range(n_nodes)
    ]
    total = sum(n.gpus for n in nodes)
    queues = [
        Queue("d0", resources={"gpu": QueueResource(total / 2, -1, 1)}),
        Queue("d1", created_index=1, resources={"gpu": QueueResource(-1, -1, 2)}),
    ]
    for i in range(rnd.randint(1, 6)):
        queues.append(
            Queue(
                f"q{i}",
                parent=f"d{i % 2}",
                created_index=2 + i,
                priority=rnd.choice([0, 0, 1]),
                resources={
                    "gpu": QueueResource(
                        rnd.choice([0, 2, 4, -1]), rnd.choice([-1, -1, 12]), rnd.choice([0, 1, 2])
                    )
                },
            )
        )
    leaves = [q.name for q in queues[2:]]
    jobs = []
    used: dict[str, int] = {}
    for j in range(rnd.randint(5, 60)):
        n = rnd.choice([1, 1, 1, 2, 4])
        gpu = rnd.choice([0.25, 0.5, 1, 1, 2, 4, 8, 0])
        tasks = []
        for t in range(n):
            state = TaskState.PENDING
            node = None
            r = rnd.random()
            if r < 0.4 and gpu >= 1:
                cand = rnd.choice(nodes)
                if cand.gpus - used.get(cand.name, 0) >= gpu:
                    used[cand.name] = used.get(cand.name, 0) + int(gpu)
                    state = TaskState.RELEASING if rnd.random() < 0.15 else TaskState.RUNNING
                    node = cand.name
            tasks.append(
                Task(
                    f"j{j}-{t}",
                    gpu=gpu,
                    cpu_millis=rnd.choice([0, 1000, 4000]),
                    memory_mib=rnd.choice([0, 1024]),
                    state=state,
                    node=node,
                )
            )
        jobs.append(
            Job(
                f"j{j}",
                rnd.choice(leaves),
                priority=rnd.choice([50, 50, 100, 125]),
                created_s=float(rnd.randint(0, 1000)),
                last_start_s=float(rnd.choice([0, 7200])),
                min_available=rnd.choice([0, n]),
                tasks=tasks,
                node_selector={"zone": "z0"} if rnd.random() < 0.1 else {},
                topology=rnd.choice(
                    [None] * 6
                    + [
                        TopologyConstraint("rack", None),
                        TopologyConstraint(None, "rack"),
                        TopologyConstraint("zone", "rack"),
                    ]
                ),
            )
        )
    return Snapshot(nodes, queues, jobs)


def outcomes(paths: list[str], max_nodes: int, randoms: int) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in find_files(paths):
        out[f"scenario:{f}"] = _digest(run(load(f)).to_json())
    for w in wl.all_workloads():
        if w.group == "stress":
            continue
        snap = w.build()
        if len(snap.nodes) > max_nodes:
            continue
        out[f"bench:{w.name}"] = _digest(run_cycle(snap, w.config).to_json())
    for seed in range(randoms):
        snap = random_snapshot(seed)
        for name, cfg in (("all", Config()), ("spread", Config(placement="spread"))):
            out[f"random:{seed}:{name}"] = _digest(run_cycle(snap, cfg).to_json())
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scheduler.bench.equivalence")
    p.add_argument("command", choices=["record", "compare"])
    p.add_argument("file")
    p.add_argument("paths", nargs="*")
    p.add_argument("--max-nodes", type=int, default=100)
    p.add_argument("--randoms", type=int, default=200)
    a = p.parse_args(argv)
    got = outcomes(a.paths, a.max_nodes, a.randoms)
    if a.command == "record":
        Path(a.file).write_text(json.dumps(got, indent=1, sort_keys=True))
        print(f"recorded {len(got)} outcomes")
        return 0
    want = json.loads(Path(a.file).read_text())
    bad = [k for k in want if got.get(k) != want[k]]
    missing = [k for k in want if k not in got]
    for k in bad:
        print("CHANGED", k)
    print(f"{len(want) - len(bad)}/{len(want)} identical ({len(missing)} missing)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
