"""KAI's PodGroup objects and PriorityClasses applied to grouped pods, on raw JSON.

The owner grouping itself is in test_owners.py. A refused owner read (which a real server gives
only with RBAC set up for it) goes through kmock's emulator here.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kai_portal.cluster.backends.base import GpuRequest, JobRef, ObservedPod, TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes.owners import Grouping, group_pod
from kai_portal.cluster.backends.kubernetes.pod_grouping import (
    PodGroupSpec,
    PriorityClasses,
    finish_pod,
    parse_pod_group,
)

from .conftest import make_pod
from .emulator import KubeApiEmulator
from .owner_json import NS, QUEUE_KEYS, Reader, owner_object, pod_object


def test_priority_class_candidates_follow_the_default_grouper_and_preemptibility_the_labels() -> None:
    """defaultgrouper.calcPriorityClassWithDefaults: per owner from the pod up, the owner's
    priorityClassName label, else the pod's label, else spec.priorityClassName; the first
    that exists wins (else train). Preemptibility: owners' labels, then the pod's."""
    statefulset = owner_object("apps/v1", "StatefulSet", "db", labels={
        "priorityClassName": "missing", "kai.scheduler/preemptibility": "non-preemptible"})  # fmt: skip
    pod = pod_object("db-0", statefulset, labels={"kai.scheduler/preemptibility": "preemptible"})
    pod["spec"]["priorityClassName"] = "urgent"
    grouping = group_pod(pod, QUEUE_KEYS, Reader(statefulset))
    assert grouping.priority_candidates == ("missing",)
    assert grouping.preemptibility == "non-preemptible"
    classes = PriorityClasses({"urgent": 1000, "fallback": 7}, global_default="fallback", listed=True)
    finished = finish_pod(_observed(), grouping, {}, classes)
    assert (finished.priority_class, finished.priority) == ("train", 50)  # "missing" does not exist

    bare = pod_object("solo")
    bare["spec"]["priorityClassName"] = "urgent"
    finished = finish_pod(_observed(), group_pod(bare, QUEUE_KEYS, Reader()), {}, classes)
    assert (finished.priority_class, finished.priority) == ("urgent", 1000)
    assert finished.job == JobRef(NS, "Pod", "solo")


def test_a_podgroup_spec_overrides_the_owners_and_an_unknown_class_takes_the_global_default() -> None:
    """cluster_info.go: a PodGroup's priorityClassName the cluster lacks gets the globalDefault
    class's value (else 50); minMember, queue and preemptibility are the PodGroup's."""
    key, spec = parse_pod_group({"metadata": {"namespace": NS, "name": "pg"}, "spec": {
        "minMember": 3, "queue": "team-b", "priorityClassName": "gone",
        "preemptibility": "preemptible"}})  # fmt: skip
    assert (key, spec) == ((NS, "pg"), PodGroupSpec(3, "team-b", "gone", "preemptible"))
    classes = PriorityClasses.from_items([{"metadata": {"name": "base"}, "value": 20, "globalDefault": True}])
    pod = _observed(annotations={"pod-group-name": "pg"}, job=JobRef(NS, "PodGroup", "pg"))
    grouping = Grouping(JobRef(NS, "Job", "other"), queue="team-a", min_member=9)
    finished = finish_pod(pod, grouping, {key: spec}, classes)
    assert (finished.job, finished.queue, finished.min_member) == (JobRef(NS, "PodGroup", "pg"), "team-b", 3)
    assert (finished.priority, finished.preemptibility) == (20, "preemptible")
    classes = classes.changed("DELETED", {"metadata": {"name": "base"}})
    assert finish_pod(pod, grouping, {key: spec}, classes).priority == 50


def _observed(**changes: Any) -> ObservedPod:
    pod = ObservedPod(
        namespace=NS, name="p", uid="u", node=None, phase="Pending", status=TaskStatus.PENDING, queue=None,
        job=JobRef(NS, "Pod", "p"), priority_class=None, preemptibility=None, gpu=GpuRequest(), cpu_millis=0,
        memory_mib=0, created_at=None, deletion_timestamp=None, gpu_devices=(), labels={}, annotations={},
    )  # fmt: skip
    return ObservedPod(**{**pod.__dict__, **changes})


def test_a_refused_owner_read_or_podgroup_list_never_fails_observe(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    """KAI's pod-grouper stops at the last owner it may read (podgrouper.go handleGetOwnerError);
    the portal does the same, and a failing PodGroup list only leaves the owners' settings."""
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-rs", "controller": True}
    make_pod(core, "p", labels={"kai.scheduler/queue": "team-a"}, metadata={"ownerReferences": [owner]})
    emulator.faults[("GET", "/apis/apps/v1/namespaces/team-a/replicasets/rs")] = 403
    emulator.faults[("GET", "/apis/scheduling.run.ai/v2alpha2/podgroups")] = 500

    pod = backend.observe().pods["team-a", "p"]

    assert not emulator.faults, "both faults were served"
    reads = [r.url.path for r in emulator.request_log if r.method == "GET"]
    assert reads.count("/apis/apps/v1/namespaces/team-a/replicasets/rs") == 1, "a refusal is not asked again"
    assert (pod.job.key, pod.queue) == ("team-a/ReplicaSet/rs", "team-a")
    assert (pod.priority_class, pod.priority) == ("train", 50)
