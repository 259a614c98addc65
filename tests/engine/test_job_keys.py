"""Jobs and tasks are held by key (``Job.key``, ``Task.key``) and called by name: two jobs of one
name in two queues are two jobs, a key never moves a decision, and a scenario's key is its name."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scheduler import Config, Job, Node, Queue, QueueResource, Snapshot, Task, TaskState, run_cycle
from scheduler import scenario as scenarios
from scheduler.cycle import run_rounds
from scheduler.reasons import Ref, render
from scheduler.result import CycleResult

OWN_SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def _queues(**quota: float) -> list[Queue]:
    dept = Queue("dept", resources={"gpu": QueueResource(quota=sum(quota.values()))})
    leaves = [Queue(n, parent="dept", resources={"gpu": QueueResource(quota=q)}) for n, q in quota.items()]
    return [dept, *leaves]


def _train(namespace: str, queue: str, *, running_on: str | None = None, gpu: float = 1) -> Job:
    """A one-pod job ``train`` (pod ``train-0``) keyed as the portal keys it."""
    key = f"{namespace}/{queue}/train"
    state = TaskState.RUNNING if running_on else TaskState.PENDING
    devices = (0,) if running_on else ()
    task = Task(
        "train-0", job=key, gpu=gpu, state=state, node=running_on, gpu_devices=devices, key=f"{key}/train-0"
    )
    return Job("train", queue=queue, namespace=namespace, key=key, tasks=[task], last_start_s=3600.0)


def _names(snapshot: Snapshot) -> dict[str, str]:
    return {k: v for j in snapshot.jobs for k, v in [(j.key, j.name), *((t.key, t.name) for t in j.tasks)]}


def test_a_scenario_job_and_task_are_keyed_by_their_names() -> None:
    task = Task("a-0", job="a")
    assert (Job("a", queue="q", tasks=[task]).key, task.key) == ("a", "a-0")


def test_two_trains_in_two_queues_are_two_jobs_and_each_decision_names_its_own() -> None:
    """vision's ``train`` runs over its quota on the only GPU; nlp's ``train`` reclaims it."""
    snapshot = Snapshot(
        nodes=[Node("n1", gpus=1)],
        queues=_queues(vision=0, nlp=1),
        jobs=[_train("vision", "vision", running_on="n1"), _train("nlp", "nlp")],
    )
    names = _names(snapshot)

    result = run_cycle(snapshot, Config())

    assert {k: o.status for k, o in result.tasks.items()} == {
        "vision/vision/train/train-0": TaskState.RELEASING,
        "nlp/nlp/train/train-0": TaskState.PIPELINED,
    }
    [eviction] = result.evictions
    assert (eviction.task, eviction.job, eviction.evictor_job) == (
        "vision/vision/train/train-0", "vision/vision/train", "nlp/nlp/train",
    )  # fmt: skip
    shown = render(eviction.message, lambda ref: names[ref.key])
    assert shown.startswith("Pod vision/train-0 was preempted by workload nlp/train.\nvision uses GPU: 0")
    # Without names, the engine's own wording shows keys: nothing was renamed to tell them apart.
    assert render(eviction.message).startswith(
        "Pod vision/vision/vision/train/train-0 was preempted by workload nlp/nlp/nlp/train."
    )


def test_two_pending_trains_each_get_their_own_message() -> None:
    snapshot = Snapshot(
        nodes=[Node("n1", gpus=1)],
        queues=_queues(vision=1, nlp=1),
        jobs=[_train("vision", "vision", gpu=2), _train("nlp", "nlp", gpu=2)],
    )
    names = _names(snapshot)

    result = run_cycle(snapshot, Config())

    assert set(result.job_messages) == {"vision/vision/train", "nlp/nlp/train"}
    for namespace in ("vision", "nlp"):
        outcome = result.tasks[f"{namespace}/{namespace}/train/train-0"]
        assert outcome.status == TaskState.PENDING
        text = outcome.text(lambda ref: names[ref.key]) or ""
        assert text.startswith(f"Scheduling conditions were not met for pod {namespace}/train-0:\n")
        assert f"MaxNodePoolResources: The pod {namespace}/train-0 requires GPU: 2," in text


@pytest.mark.parametrize("reverse", [False, True])
def test_equal_names_in_one_queue_tie_on_their_keys_not_on_the_list_order(reverse: bool) -> None:
    """An ended job's releasing pods beside a new job of its name: two ``train`` in one queue."""
    first, second = _train("ns", "q"), _train("ns", "q")
    second.key = "ns/q/train#2"
    second.tasks[0].key, second.tasks[0].job = "ns/q/train#2/train-0", second.key
    jobs = [second, first] if reverse else [first, second]
    snapshot = Snapshot(nodes=[Node("n1", gpus=1)], queues=_queues(q=1), jobs=jobs)

    result = run_cycle(snapshot, Config())

    assert result.tasks["ns/q/train/train-0"].status == TaskState.ALLOCATED
    assert result.tasks["ns/q/train#2/train-0"].status == TaskState.PENDING


def _rekeyed(snapshot: Snapshot) -> Snapshot:
    """The snapshot with every job keyed ``ns/<queue>/<name>`` and its tasks under it."""
    jobs = []
    for job in snapshot.jobs:
        key = f"ns/{job.queue}/{job.name}"
        tasks = [dataclasses.replace(t, key=f"{key}/{t.name}", job=key) for t in job.tasks]
        jobs.append(dataclasses.replace(job, key=key, tasks=tasks))
    return dataclasses.replace(snapshot, jobs=jobs)


def _decisions(result: CycleResult, names: dict[str, str]) -> dict[str, object]:
    """Everything the cycle decided, with keys turned back into names."""

    def name(ref: Ref) -> str:
        return names[ref.key]

    return {
        "tasks": {names[k]: (o.status, o.node, o.gpu_devices, o.text(name)) for k, o in result.tasks.items()},
        "jobs": {names[k]: render(m, name) for k, m in result.job_messages.items()},
        "notes": {names[k]: [render(r, name) for r in notes] for k, notes in result.job_notes.items()},
        "evictions": [
            (
                names[e.task],
                names[e.job],
                e.action,
                render(e.message, name),
                e.node,
                e.moved_to,
                names.get(e.evictor_job or "", e.evictor_job),
                "" if e.reason is None else render(e.reason, name),
            )
            for e in result.evictions
        ],  # fmt: skip
        "events": [(names[e.object], e.kind, render(e.message, name)) for e in result.events],
        "queues": {q: o.to_json() for q, o in result.queues.items()},
    }


def test_keys_never_move_a_decision_in_any_of_our_scenarios() -> None:
    files = scenarios.find_files([str(OWN_SCENARIOS)])
    assert len(files) > 20
    for path in files:
        case = scenarios.load(path)
        rekeyed = _rekeyed(case.snapshot)
        as_named = _decisions(run_rounds(case.snapshot, case.config), _names(case.snapshot))
        as_keyed = _decisions(run_rounds(rekeyed, case.config), _names(rekeyed))
        assert as_keyed == as_named, path.name
