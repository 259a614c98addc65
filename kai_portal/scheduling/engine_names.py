"""The cluster's own names back into the engine's texts.

The engine knows jobs and tasks by name only, so ``snapshot`` renames them when two jobs share a
name (``gpu-pod`` applied in two namespaces, as KAI's quickstart has every user do, becomes
``gpu-pod-4`` with task ``gpu-pod-4-0``). The engine writes those names into the texts KAI's
users read (``Resources were not found for pod team-b/gpu-pod-4-0 ...``, ``Pod prio/train-pod-7-0
was preempted by higher priority workload prio/build-pod-8``): events, pod conditions, reasons
and history. KAI names the pod and the workload as they are in the cluster, so every
``<namespace>/<engine name>`` in the result's texts is put back to ``<namespace>/<own name>``
before anything is written. Only renamed jobs and tasks are looked up; a cycle without a
clash changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from kai_portal.scheduling.snapshot import SnapshotIndex
from scheduler import CycleResult

# ``<namespace>/<name>`` as the engine's messages write them: a DNS-1123 namespace, then a name
# (pod names may hold dots; a sentence's full stop after it is handled in ``_own``).
_QUALIFIED = re.compile(r"(?<![\w./-])([a-z0-9][a-z0-9-]*)/([A-Za-z0-9][A-Za-z0-9_.-]*)")


def renamed(index: SnapshotIndex) -> dict[tuple[str, str], str]:
    """(namespace, engine name) -> the cluster's name, for the jobs and tasks the snapshot renamed."""
    names = {(j.namespace, engine): j.name for engine, j in index.jobs.items() if engine != j.name}
    names.update({(t.namespace, engine): t.name for engine, t in index.tasks.items() if engine != t.name})
    return names


def with_own_names(result: CycleResult, index: SnapshotIndex) -> CycleResult:
    """``result`` with every renamed job or task written under its own name in its texts."""
    names = renamed(index)
    if not names:
        return result

    def fix(text: str) -> str:
        return _QUALIFIED.sub(lambda m: _own(m, names), text) if "/" in text else text

    tasks = dict(result.tasks)
    for name, outcome in result.tasks.items():
        if outcome.reason and (reason := fix(outcome.reason)) != outcome.reason:
            tasks[name] = replace(outcome, reason=reason)
    return replace(
        result,
        tasks=tasks,
        job_messages={name: fix(text) for name, text in result.job_messages.items()},
        job_notes={name: [fix(text) for text in notes] for name, notes in result.job_notes.items()},
        events=[replace(event, message=fix(event.message)) for event in result.events],
        evictions=[
            replace(eviction, message=fix(eviction.message), reason=fix(eviction.reason))
            for eviction in result.evictions
        ],
    )


def _own(match: re.Match[str], names: Mapping[tuple[str, str], str]) -> str:
    namespace, name = match.group(1), match.group(2)
    stripped = name.rstrip(".")  # "... workload prio/build-pod-8." ends a sentence
    own = names.get((namespace, name)) or names.get((namespace, stripped))
    if own is None:
        return match.group(0)
    tail = "" if (namespace, name) in names else name[len(stripped) :]
    return f"{namespace}/{own}{tail}"
