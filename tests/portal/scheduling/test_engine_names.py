"""Texts name pods and workloads as they are, even when the snapshot renamed them for the engine.

Two jobs may share a name (KAI's quickstart ``gpu-pod`` applied by every user in their own
namespace; two teams' ``train``). The engine needs unique names, so ``snapshot`` calls them
``train-<pk>`` with tasks ``train-<pk>-<index>``; KAI's messages name ``<namespace>/<pod>`` and
``<namespace>/<workload>``, so no made-up name may reach a reason, an event or history.
The cluster tier checks the same on a real API server (``tests/cluster/test_kai_quickstart.py``).
"""

from __future__ import annotations

import pytest

from kai_portal.scheduling.engine_names import with_own_names
from kai_portal.scheduling.snapshot import JobRef, PodRef, SnapshotIndex
from kai_portal.workloads.models import Pod
from scheduler.result import CycleResult, Eviction, TaskOutcome, TaskState
from tests.portal import factories


def test_two_teams_train_jobs_pending_reasons_name_their_own_pods(loop, db) -> None:
    """Portal jobs in simulated mode: the namespace is the queue's name, the pods ``train-0``."""
    for name in ("vision", "nlp"):
        factories.job(factories.queue(name, gpu_quota=1), "train")
    factories.node("cordoned", gpus=8, schedulable=False)

    cycle = loop.run()

    assert cycle.status == "succeeded", cycle.error
    for queue in ("vision", "nlp"):
        pod = Pod.objects.get(job__queue__name=queue)
        assert pod.name == "train-0"
        assert pod.reason == (
            f"Resources were not found for pod {queue}/train-0 due to: no nodes with enough resources "
            "were found: 1 node is unschedulable."
        )
        assert pod.decisions.get().message == pod.reason


def _index() -> SnapshotIndex:
    index = SnapshotIndex()
    index.jobs = {
        "train-7": JobRef(7, "train", "team-a", 1, ""),
        "build.v2-8": JobRef(8, "build.v2", "team-a", 1, ""),
        "kept": JobRef(9, "kept", "team-b", 1, ""),
    }
    index.tasks = {
        "train-7-0": PodRef(70, 7, "train-0", "team-a", "running", 1, ""),
        "build.v2-8-0": PodRef(80, 8, "build.v2-0", "team-a", "pending", None, ""),
        "kept-0": PodRef(90, 9, "kept-0", "team-b", "pending", None, ""),
    }
    return index


def test_renamed_jobs_and_tasks_are_put_back_in_every_text_and_nothing_else_changes() -> None:
    result = CycleResult(
        tasks={
            "build.v2-8-0": TaskOutcome("build.v2-8-0", "build.v2-8", TaskState.PENDING,
                                        reason="No room for pod team-a/build.v2-8-0: x."),
            "kept-0": TaskOutcome("kept-0", "kept", TaskState.PENDING,
                                  reason="Resources were not found for pod team-b/kept-0 due to: y."),
        },
        job_messages={"build.v2-8": "Unschedulable: <team-a/build.v2-8> waits; team-a/train-7-0x stays."},
        evictions=[Eviction("train-7-0", "train-7", "q", "preempt",
                            "Pod team-a/train-7-0 was preempted by workload team-a/build.v2-8.",
                            reason="other/train-7-0 is another namespace's")],
    )  # fmt: skip

    fixed = with_own_names(result, _index())

    assert fixed.tasks["build.v2-8-0"].reason == "No room for pod team-a/build.v2-0: x."
    assert fixed.tasks["kept-0"] is result.tasks["kept-0"]  # no name of it was changed
    assert fixed.job_messages["build.v2-8"] == (
        "Unschedulable: <team-a/build.v2> waits; team-a/train-7-0x stays."  # a longer name is not touched
    )
    [eviction] = fixed.evictions
    assert eviction.message == "Pod team-a/train-0 was preempted by workload team-a/build.v2."
    assert eviction.reason == "other/train-7-0 is another namespace's"
    assert (eviction.task, eviction.job) == ("train-7-0", "train-7")  # the engine's keys stay


@pytest.mark.parametrize("names", [{}, {"kept": "kept"}])
def test_a_cycle_without_renamed_names_returns_its_result_as_it_is(names: dict[str, str]) -> None:
    index = SnapshotIndex()
    index.jobs = {n: JobRef(1, own, "ns", 1, "") for n, own in names.items()}
    result = CycleResult(job_messages={"kept": "ns/kept"})
    assert with_own_names(result, index) is result
