"""The PodGroups the portal writes, as KAI's podgrouper and controllers would: the pure parts.

Writing them to a real API server is tests/cluster/test_pod_groups_written.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from kai_portal.cluster.backends.base import GpuRequest, JobRef, ObservedPod, OperationResult, TaskStatus
from kai_portal.cluster.backends.kubernetes.owners import group_pod
from kai_portal.cluster.backends.kubernetes.pod_grouping import PodGroupSpec, PriorityClasses, finish_pod
from kai_portal.cluster.backends.kubernetes.pod_groups import (
    PodGroupPlan,
    PodGroupWriter,
    desired_pod_group,
    desired_status,
    scheduling_condition,
    top_owner_metadata,
)
from kai_portal.cluster.backends.kubernetes.resource_sums import quantities
from tests.cluster.kai_object_fields import ALL_LISTS

from .owner_json import NS, QUEUE_KEYS, Reader, owner_object, pod_object

POOL = "kai.scheduler/node-pool"
NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


def observed(name: str = "p", **changes: Any) -> ObservedPod:
    pod = ObservedPod(
        namespace=NS, name=name, uid=f"uid-{name}", node=None, phase="Pending", status=TaskStatus.PENDING,
        queue="team-a", job=JobRef(NS, "Pod", name), priority_class="train", preemptibility=None,
        gpu=GpuRequest(), cpu_millis=0, memory_mib=0, created_at=None, deletion_timestamp=None,
        gpu_devices=(), labels={}, annotations={}, priority=50,
    )  # fmt: skip
    return ObservedPod(**{**pod.__dict__, **changes})


def test_a_jobs_podgroup_is_named_owned_and_labelled_as_kais_podgrouper_makes_it() -> None:
    """A CronJob's Job: the Job is the group (plugins/cronjobs), so the PodGroup is
    pg-<job>-<job uid>, owned by the Job, with the Job's labels and annotations and
    top-owner-metadata naming the Job; the pod's node-pool label is added."""
    cron = owner_object("batch/v1", "CronJob", "nightly")
    job = owner_object("batch/v1", "Job", "nightly-1", owner=cron, labels={"team": "vision"},
                       annotations={"kai.scheduler/batch-min-member": "2"})  # fmt: skip
    raw = pod_object("nightly-1-x", job, labels={POOL: "a100"})
    grouping = group_pod(raw, QUEUE_KEYS, Reader(job, cron))
    pod = observed("nightly-1-x", min_member=2, labels={POOL: "a100"}, job=grouping.job)
    body = desired_pod_group(PodGroupPlan(NS, "pg-nightly-1-uid-Job-nightly-1", [pod], grouping), POOL)
    meta, spec = body["metadata"], body["spec"]
    assert (body["apiVersion"], body["kind"], meta["name"]) == (
        "scheduling.run.ai/v2alpha2",
        "PodGroup",
        "pg-nightly-1-uid-Job-nightly-1",
    )
    assert grouping.pod_group is not None and grouping.pod_group.name == meta["name"]
    assert meta["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "nightly-1", "uid": "uid-Job-nightly-1"}
    ]
    assert meta["labels"] == {"team": "vision", POOL: "a100", "kai-portal/written-by": "pod-grouper"}
    assert meta["annotations"]["kai.scheduler/batch-min-member"] == "2"
    assert yaml.safe_load(meta["annotations"]["kai.scheduler/top-owner-metadata"]) == {
        "name": "nightly-1",
        "uid": "uid-Job-nightly-1",
        "group": "batch",
        "version": "v1",
        "kind": "Job",
    }
    assert spec == {"minMember": 2, "queue": "team-a", "priorityClassName": "train", "topologyConstraint": {}}


def test_a_deployments_replica_is_its_own_group_owned_by_the_pod_with_the_deployments_labels() -> None:
    """plugins/deployment: pg-<pod>-<pod uid>, owned by the pod; labels from the Deployment."""
    deployment = owner_object("apps/v1", "Deployment", "web", labels={"app": "web"})
    rs = owner_object("apps/v1", "ReplicaSet", "web-5d", owner=deployment)
    raw = pod_object("web-5d-abc", rs)
    grouping = group_pod(raw, QUEUE_KEYS, Reader(rs, deployment))
    assert grouping.pod_group is not None
    assert grouping.pod_group.name == "pg-web-5d-abc-uid-Pod-web-5d-abc"
    assert grouping.pod_group.owner == {"apiVersion": "v1", "kind": "Pod", "name": "web-5d-abc",
                                        "uid": "uid-Pod-web-5d-abc"}  # fmt: skip
    assert grouping.pod_group.labels == {"app": "web"}


def test_pods_naming_a_group_no_owner_makes_get_it_owned_by_all_of_them_and_a_default_queue() -> None:
    """The portal's own jobs name their PodGroup (pod-group-name); it goes once all its pods have
    gone. A group naming no queue gets KAI's default-queue."""
    named = {"pod-group-name": "train-7", "kai.scheduler/batch-min-member": "2"}
    pods = [observed(n, queue=None, annotations=named) for n in ("a", "b")]
    body = desired_pod_group(PodGroupPlan(NS, "train-7", pods, None), POOL)
    assert body["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": n, "uid": f"uid-{n}"} for n in ("a", "b")
    ]
    assert (body["spec"]["queue"], body["spec"]["minMember"]) == ("default-queue", 2)


def test_a_podgroup_the_portal_wrote_never_feeds_back_into_its_pods() -> None:
    """Its spec came from the pods; read back it would turn "no queue" into default-queue. Another
    writer's PodGroup still sets its pods' queue and minimum (KAI's scheduler reads the group)."""
    raw = pod_object("p", annotations={"pod-group-name": "g"})
    grouping = group_pod(raw, QUEUE_KEYS, Reader())
    pod = observed("p", queue=None, annotations={"pod-group-name": "g"}, job=JobRef(NS, "PodGroup", "g"))
    ours = {(NS, "g"): PodGroupSpec(min_member=3, queue="default-queue", portal=True)}
    theirs = {(NS, "g"): PodGroupSpec(min_member=3, queue="default-queue")}
    classes = PriorityClasses()
    from_ours, from_theirs = (finish_pod(pod, grouping, specs, classes) for specs in (ours, theirs))
    assert (from_ours.queue, from_ours.min_member) == (None, None)
    assert (from_theirs.queue, from_theirs.min_member) == ("default-queue", 3)


def test_status_counts_requested_and_allocated_as_kais_podgroup_controller() -> None:
    """Pending and running pods are requested, bound ones allocated, finished ones nothing; a
    non-preemptible group (build, 100) also counts its allocation as non-preemptible."""
    pods = [
        observed("run", node="n1", status=TaskStatus.RUNNING, cpu_millis=1500, memory_mib=1024,
                 memory_bytes=1024 * 2**20, memory_binary=True, gpu=GpuRequest(whole=1)),
        observed("half", status=TaskStatus.PENDING, gpu=GpuRequest(fraction=0.5, num_devices=2)),
        observed("done", node="n1", status=TaskStatus.SUCCEEDED, gpu=GpuRequest(whole=4)),
    ]  # fmt: skip
    status = desired_status(PodGroupPlan(NS, "g", pods), None, None, POOL, NOW)
    assert status == {"resourcesStatus": {
        "allocated": {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "requested": {"cpu": "1500m", "memory": "1Gi", "nvidia.com/gpu": "2"}}}  # fmt: skip
    build = [observed("b", node="n1", status=TaskStatus.RUNNING, priority=100, gpu=GpuRequest(whole=2))]
    status = desired_status(PodGroupPlan(NS, "g", build), None, None, POOL, NOW)
    assert status["resourcesStatus"]["allocatedNonPreemptible"] == {"nvidia.com/gpu": "2"}
    assert quantities({"nvidia.com/gpu": 250, "cpu": 2000, "memory": 0}) == {
        "cpu": "2",
        "nvidia.com/gpu": "250m",
    }


def test_the_scheduling_condition_is_set_kept_renumbered_on_new_words_and_cleared_when_started() -> None:
    """KAI's status updater: UnschedulableOnNodePool on the group's node pool while it waits with
    nothing allocated; the same words keep the condition (no write), new words are the next
    transition; nothing pending clears it."""
    waiting = [observed("a", labels={POOL: "a100"}, gpu=GpuRequest(whole=8))]
    plan = PodGroupPlan(NS, "g", waiting)
    first = desired_status(plan, None, "OverLimit: queue team-a would exceed its limit", POOL, NOW)
    [condition] = first["schedulingConditions"]
    assert condition == {
        "type": "UnschedulableOnNodePool", "nodePool": "a100", "reason": "Unschedulable",
        "message": "OverLimit: queue team-a would exceed its limit",
        "reasons": [{"reason": "OverLimit", "message": "queue team-a would exceed its limit"}],
        "lastTransitionTime": "2026-11-28T09:00:00Z", "status": "True", "transitionID": "1"}  # fmt: skip
    later = datetime(2026, 11, 28, 9, 5, tzinfo=UTC)
    assert desired_status(plan, first, "OverLimit: queue team-a would exceed its limit", POOL, later) == first
    assert desired_status(plan, first, None, POOL, later) == first
    changed = desired_status(plan, first, "no nodes with enough resources", POOL, later)
    assert [c["transitionID"] for c in changed["schedulingConditions"]] == ["2"]
    started = PodGroupPlan(
        NS, "g", [observed("a", node="n1", status=TaskStatus.BOUND, gpu=GpuRequest(whole=8))]
    )
    assert "schedulingConditions" not in desired_status(started, changed, None, POOL, later)


def test_docs_list_every_field_path_the_cluster_tests_require() -> None:
    """docs/kai-objects.md holds the lists the lead compares with KAI's recording, one path a line."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "kai-objects.md").read_text()
    for name, paths in ALL_LISTS.items():
        block = doc.split(f"{name}:\n\n```\n", 1)[1].split("```", 1)[0]
        assert block.split() == list(paths), name


def test_top_owner_metadata_is_written_as_kais_yaml_marshaller_writes_it() -> None:
    """Byte for byte as KAI's (docs/kai-parity/quickstart-kai.yaml): a uid that starts with a digit
    stays plain, the core group is ``""``, and only a string YAML would read as something else is
    quoted, in double quotes."""
    pod = {"apiVersion": "v1", "kind": "Pod", "name": "gpu-pod", "uid": "8229eda8-27d7-40e6"}
    expected = 'name: gpu-pod\nuid: 8229eda8-27d7-40e6\ngroup: ""\nversion: v1\nkind: Pod\n'
    assert top_owner_metadata(pod) == expected
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "123", "uid": "true"}
    text = top_owner_metadata(job)
    assert text == 'name: "123"\nuid: "true"\ngroup: batch\nversion: v1\nkind: Job\n'
    assert yaml.safe_load(text) == {"name": "123", "uid": "true", "group": "batch", "version": "v1",
                                    "kind": "Job"}  # fmt: skip


class _Cache:
    """What the writer reads of the watch cache: pods naming their PodGroups, none listed yet."""

    pool_label = POOL
    pod_groups_listed = True

    def __init__(self, pods: list[ObservedPod]) -> None:
        self.pods = {(p.namespace, p.name): p for p in pods}

    def grouping_of(self, key: tuple[str, str]) -> None:
        return None

    def pod_group_specs(self) -> dict[tuple[str, str], PodGroupSpec]:
        return {}


class _Caller:
    """The API as it answers while one namespace is being deleted: 403 there, fine elsewhere."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def call(self, operation: str, namespace: str, name: str, _request: Any) -> OperationResult:
        self.calls.append((operation, namespace))
        if namespace == "dying":
            return OperationResult(operation, namespace, name, ok=False, error="terminating", status_code=403)
        return OperationResult(operation, namespace, name, ok=True)


def test_a_namespace_being_deleted_pauses_its_own_podgroup_writes_not_everyone_elses() -> None:
    """A member who deletes their namespace makes the API refuse writes there (403, "being
    terminated"); that must not stop the PodGroups of every other team for a minute."""
    named = {"pod-group-name": "g"}
    pods = [
        observed("a", namespace="dying", annotations=named, job=JobRef("dying", "PodGroup", "g")),
        observed("b", namespace="team-b", annotations=named, job=JobRef("team-b", "PodGroup", "g")),
    ]
    caller = _Caller()
    writer = PodGroupWriter(None, None, caller, _Cache(pods), concurrency=1)  # type: ignore[arg-type]

    writer.write([], [], [])
    third = observed("c", namespace="team-c", annotations=named, job=JobRef("team-c", "PodGroup", "g"))
    writer.cache = _Cache([*pods, third])  # type: ignore[assignment]
    writer.write([], [], [])

    assert ("podgroup", "team-b") in caller.calls and ("podgroup", "team-c") in caller.calls, caller.calls
    assert caller.calls.count(("podgroup", "dying")) == 1, caller.calls  # paused there after one refusal


def test_a_pod_scheduling_error_is_the_reason_of_the_condition_as_kai_writes_it() -> None:
    """KAI's scheduler gives each job fit error its reason (``PodSchedulingErrors`` for a gang
    that does not fit) and the text after it as the reason's message."""
    text = (
        "Resources were found for 1 pods while 2 are required for gang scheduling. Additional pods "
        "cannot be scheduled due to: no nodes with enough resources were found: 1 node(s) didn't "
        "have enough resources: GPUs."
    )
    # KAI's recorded view (docs/kai-parity/batch-gang-waiting-kai.yaml): the message ends "GPUs..",
    # the reason's own message "GPUs.".
    condition = scheduling_condition("default", f"PodSchedulingErrors: {text}.", 1, NOW)
    assert condition["reasons"] == [{"reason": "PodSchedulingErrors", "message": text}]
    assert condition["message"] == f"PodSchedulingErrors: {text}."
