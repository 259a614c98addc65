"""Job-arrival traces: read and write CSV or YAML, and generate synthetic ones.

A trace is a list of arrivals with the columns
``submit_s, queue, tasks, gpu, duration_s, priority`` and optionally ``name``
and ``min_available``. CSV has a header row; YAML is either a list of such
mappings or a mapping with an ``arrivals`` list (and, optionally, the
``nodes`` / ``queues`` / ``jobs`` / ``config`` of a scenario file, which then
define the cluster).
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from scheduler.simulate.records import Arrival

COLUMNS = ("name", "submit_s", "queue", "tasks", "gpu", "duration_s", "priority", "min_available")
REQUIRED = ("submit_s", "queue")


class TraceError(ValueError):
    """A trace that does not follow the format."""


def arrival_from(row: dict[str, Any], where: str) -> Arrival:
    unknown = sorted(set(row) - set(COLUMNS))
    if unknown:
        raise TraceError(f"{where}: unknown column {unknown[0]!r}")
    for key in REQUIRED:
        if row.get(key) in (None, ""):
            raise TraceError(f"{where}: missing {key}")

    def opt(key: str, default: Any, kind: Any) -> Any:
        v = row.get(key)
        return default if v in (None, "") else kind(v)

    try:
        a = Arrival(
            submit_s=float(row["submit_s"]),
            queue=str(row["queue"]),
            tasks=opt("tasks", 1, int),
            gpu=opt("gpu", 1.0, float),
            duration_s=opt("duration_s", 3600.0, float),
            priority=opt("priority", 50, int),
            name=opt("name", "", str),
            min_available=opt("min_available", None, int),
        )
    except (TypeError, ValueError) as exc:
        raise TraceError(f"{where}: {exc}") from None
    if a.tasks < 1 or a.gpu < 0 or (a.gpu > 1 and a.gpu != int(a.gpu)) or a.duration_s < 0:
        raise TraceError(f"{where}: tasks >= 1, gpu a whole number or a fraction, duration >= 0")
    return a


def read_csv(text: str, where: str = "<trace>") -> list[Arrival]:
    reader = csv.DictReader(io.StringIO(text))
    return [arrival_from(dict(row), f"{where}:{i + 2}") for i, row in enumerate(reader)]


def read_yaml(text: str, where: str = "<trace>") -> tuple[list[Arrival], dict[str, Any] | None]:
    """Arrivals and, when the file carries one, the cluster as scenario-format data."""
    data = yaml.safe_load(text)
    cluster = None
    if isinstance(data, dict):
        rows = data.get("arrivals")
        rest = {k: v for k, v in data.items() if k != "arrivals"}
        if rest:
            cluster = rest
    else:
        rows = data
    if not isinstance(rows, list):
        raise TraceError(f"{where}: expected a list of arrivals")
    return [arrival_from(dict(r), f"{where}: arrival {i}") for i, r in enumerate(rows)], cluster


def load(path: str | Path) -> tuple[list[Arrival], dict[str, Any] | None]:
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() in (".yaml", ".yml"):
        return read_yaml(text, str(p))
    return read_csv(text, str(p)), None


def to_csv(arrivals: Iterable[Arrival]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(COLUMNS)
    for a in arrivals:
        w.writerow(
            [
                a.name,
                f"{a.submit_s:g}",
                a.queue,
                a.tasks,
                f"{a.gpu:g}",
                f"{a.duration_s:g}",
                a.priority,
                "" if a.min_available is None else a.min_available,
            ]
        )
    return out.getvalue()


# Job shapes of the synthetic generator: (weight, tasks, gpu per task).
SHAPES: tuple[tuple[float, int, float], ...] = (
    (0.45, 1, 1.0),
    (0.12, 1, 0.5),
    (0.08, 1, 0.25),
    (0.15, 1, 2.0),
    (0.08, 1, 4.0),
    (0.07, 2, 4.0),
    (0.05, 4, 2.0),
)


def generate(
    queues: Sequence[str],
    capacity_gpu: float,
    horizon_s: float = 4 * 3600,
    load: float = 1.3,
    median_duration_s: float = 1800.0,
    seed: int = 1,
    queue_weights: Sequence[float] | None = None,
    inference_share: float = 0.0,
) -> list[Arrival]:
    """Poisson arrivals over ``horizon_s`` whose GPU demand is ``load`` x the capacity.

    Durations are log-normal around ``median_duration_s`` (capped at 8x);
    shapes mix whole-GPU, fractional and multi-task gang jobs (``SHAPES``).
    ``inference_share`` of the jobs get priority 125 (non-preemptible), the
    rest are training jobs (priority 50). Seeded: same arguments, same trace."""
    rng = random.Random(seed)
    weights = list(queue_weights or [1.0] * len(queues))
    shape_w = [s[0] for s in SHAPES]
    sigma = 0.8
    mean_duration = median_duration_s * math.exp(sigma * sigma / 2)
    mean_gpu = sum(w * n * g for w, n, g in SHAPES) / sum(shape_w)
    rate = load * capacity_gpu / (mean_gpu * mean_duration)  # jobs per second
    out: list[Arrival] = []
    t = 0.0
    i = 0
    while True:
        t += rng.expovariate(rate)
        if t > horizon_s:
            break
        _, tasks, gpu = rng.choices(SHAPES, weights=shape_w)[0]
        q = rng.choices(list(queues), weights=weights)[0]
        dur = min(8 * median_duration_s, rng.lognormvariate(math.log(median_duration_s), sigma))
        prio = 125 if rng.random() < inference_share else 50
        out.append(
            Arrival(
                submit_s=round(t, 1),
                queue=q,
                tasks=tasks,
                gpu=gpu,
                duration_s=round(max(60.0, dur)),
                priority=prio,
                name=f"job-{i:05d}",
            )
        )
        i += 1
    return out
