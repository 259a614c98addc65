"""Texts name pods and workloads as they are, whatever key the engine holds them by.

Two jobs may share a name (KAI's quickstart ``gpu-pod`` applied by every user in their own
namespace; two teams' ``train``). The engine holds them by key (``<namespace>/<queue>/<name>``, a
task by ``<job key>/<pod>``, ``#<row id>`` added where a key is taken) and calls them by their own
names; KAI's messages name ``<namespace>/<pod>`` and ``<namespace>/<workload>``, so no key may
reach a reason, an event or history: the engine's reasons name tasks and jobs by key (``Ref``) and
the portal words them with the cluster's own names (``SnapshotIndex.text``). The keys below are
any strings, as the index treats them. The previews word them the same way
(``tests/portal/previews/test_same_name_jobs.py``); the cluster tier checks the same on a real API
server (``tests/cluster/test_kai_quickstart.py``).
"""

from __future__ import annotations

import pytest

from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.scheduling.snapshot_index import JobRef, PodRef, SnapshotIndex
from kai_portal.workloads.models import Pod
from scheduler import reasons
from scheduler.reasons import Ref, render
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
        # The pod's own text is its fit error (KAI's pod event); the job's names the pod.
        assert pod.reason == "no nodes with enough resources were found: 1 node is unschedulable."
        assert pod.decisions.get().message == pod.reason
        assert pod.job.message == (
            f"PodSchedulingErrors: Resources were not found for pod {queue}/train-0 due to: no nodes "
            "with enough resources were found: 1 node is unschedulable.."
        )


def test_the_snapshot_keys_two_trains_by_namespace_queue_and_name_and_calls_them_train(loop, db) -> None:
    for name in ("vision", "nlp"):
        factories.job(factories.queue(name, gpu_quota=1), "train")

    inp = build_snapshot(loop.now)

    assert sorted(inp.index.jobs) == ["nlp/nlp/train", "vision/vision/train"]
    assert sorted(inp.index.tasks) == ["nlp/nlp/train/train-0", "vision/vision/train/train-0"]
    assert sorted((j.name, j.key, [t.name for t in j.tasks]) for j in inp.snapshot.jobs) == [
        ("train", "nlp/nlp/train", ["train-0"]),
        ("train", "vision/vision/train", ["train-0"]),
    ]


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


def test_renamed_jobs_and_tasks_are_worded_with_their_own_names_in_every_text() -> None:
    index = _index()
    no_room = reasons.fit_error({})
    pending = reasons.pod_not_found(Ref("build.v2-8-0", "team-a"), no_room)
    kept = reasons.pod_not_found(Ref("kept-0", "team-b"), no_room)
    topology = reasons.topology_no_match("t", "rack", Ref("build.v2-8", "team-a", kind="job"))
    message = reasons.job_message([(reasons.POD_SCHEDULING_ERRORS, topology)])
    evicted = reasons.evicted_by_reclaim(
        Ref("train-7-0", "team-a"), Ref("build.v2-8", "team-a", kind="job"), []
    )
    why = reasons.victim_lower_priority(1, 2, Ref("build.v2-8", bare=True, kind="job"), "q")

    assert index.text(pending) == (
        "Resources were not found for pod team-a/build.v2-0 due to: no nodes with enough resources were found"
    )
    assert index.text(kept) == render(kept)  # a job the snapshot did not rename keeps its name
    assert index.text(message) == (
        "PodSchedulingErrors: topology t, requirement rack couldn't be satisfied for job <team-a/build.v2>."
    )
    assert index.text(evicted) == "Pod team-a/train-0 was preempted by workload team-a/build.v2."
    assert index.text(why) == "priority 1 is below 2 of build.v2 in queue q"
    # The engine's own wording (scenarios, the CLI) names them as keyed.
    assert render(evicted) == "Pod team-a/train-7-0 was preempted by workload team-a/build.v2-8."


def test_a_task_and_a_job_with_the_same_key_are_told_apart() -> None:
    """A lone pod is its own job: a task key may equal another job's key."""
    index = SnapshotIndex()
    index.jobs = {"a-0": JobRef(1, "a-zero", "ns", 1, "")}
    index.tasks = {"a-0": PodRef(10, 2, "a-0-pod", "ns", "pending", None, "")}
    assert index.text(reasons.evicted_by_consolidation(Ref("a-0", "ns"))).startswith("Pod ns/a-0-pod was")
    assert index.text(reasons.victim_moved(Ref("a-0", bare=True, kind="job"))).startswith(
        "moved to make room for a-zero;"
    )


@pytest.mark.parametrize("names", [{}, {"kept": "kept"}])
def test_a_cycle_without_renamed_names_words_as_the_engine_does(names: dict[str, str]) -> None:
    index = SnapshotIndex()
    index.jobs = {n: JobRef(1, own, "ns", 1, "") for n, own in names.items()}
    reason = reasons.topology_no_match("t", "rack", Ref("kept", "ns", kind="job"))
    assert (
        index.text(reason)
        == render(reason)
        == "topology t, requirement rack couldn't be satisfied for job <ns/kept>"
    )
