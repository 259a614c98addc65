"""KAI's pod grouping on raw JSON, for owner kinds whose controllers the test cluster lacks.

Each case names the KAI pod-grouper plugin it follows (pkg/podgrouper/podgrouper/plugins).
The owners are plain dicts served by a reader, as the backend's cached GETs serve them.
The cluster tier (tests/cluster/test_pod_grouping.py) covers Deployment, PyTorchJob,
PodGroup objects and PriorityClasses on a real API server; a refused owner read (which a real
server gives only with RBAC set up for it) goes through kmock's emulator here.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from kai_portal.cluster.backends.base import GpuRequest, JobRef, ObservedPod, TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes.pod_grouping import (
    Grouping,
    Json,
    PodGroupSpec,
    PriorityClasses,
    finish_pod,
    group_pod,
    parse_pod_group,
)

from .conftest import make_pod
from .emulator import KubeApiEmulator

QUEUE_KEYS = ("kai.scheduler/queue", "runai/queue")
NS = "ml"


def _obj(api_version: str, kind: str, name: str, *, owner: Json | None = None,
         labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
         spec: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{kind}-{name}",
                            "labels": labels or {}, "annotations": annotations or {}}  # fmt: skip
    if owner is not None:
        meta["ownerReferences"] = [_ref(owner)]
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec or {}}


def _ref(obj: Json) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": True}  # fmt: skip


class Reader:
    """Serves owner objects by uid; records what was read; refuses what it does not hold."""

    def __init__(self, *objects: Json) -> None:
        self.objects = {o["metadata"]["uid"]: o for o in objects}
        self.reads: list[str] = []

    def __call__(self, namespace: str, ref: Json) -> Json | None:
        self.reads.append(f"{ref['kind']}/{ref['name']}")
        return self.objects.get(ref.get("uid", ""))


def _pod(name: str, owner: Json | None = None, **kw: Any) -> dict[str, Any]:
    return _obj("v1", "Pod", name, owner=owner, **kw)


def test_jobset_pods_are_one_group_whose_minimum_is_every_replicated_jobs_gang() -> None:
    """plugins/jobset: Pod -> Job -> JobSet is one group; a replica of a replicatedJob needs its
    parallelism (or the template's batch-min-member); all replicatedJobs are required (AnyOrder),
    or the JobSet's batch-min-member smallest of them. Flattened here: 2x4 + 1x(min 1) = 9."""
    rjs = [{"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4}}},
           {"name": "driver", "replicas": 1, "template": {
               "metadata": {"annotations": {"kai.scheduler/batch-min-member": "1"}},
               "spec": {"parallelism": 3}}}]  # fmt: skip
    jobset = _obj("jobset.x-k8s.io/v1alpha2", "JobSet", "llm", spec={"replicatedJobs": rjs},
                  labels={"kai.scheduler/queue": "team-a"})  # fmt: skip
    job = _obj("batch/v1", "Job", "llm-workers-0", owner=jobset)
    grouping = group_pod(_pod("llm-workers-0-0", job), QUEUE_KEYS, Reader(jobset, job))
    assert grouping.job == JobRef(NS, "JobSet", "llm")
    assert (grouping.queue, grouping.min_member) == ("team-a", 9)

    jobset["metadata"]["annotations"]["kai.scheduler/batch-min-member"] = "1"  # one replicatedJob suffices
    assert group_pod(_pod("p", job), QUEUE_KEYS, Reader(jobset, job)).min_member == 1


def test_raycluster_pods_gang_is_the_head_plus_each_worker_groups_minimum() -> None:
    """plugins/ray: 1 head + per worker group (minReplicas if > 0 else replicas) x numOfHosts,
    read from the RayCluster even when a RayJob owns it (the top owner and the group); the
    ray.io/priority-class-name label on the top owner names the priority class."""
    workers = [{"groupName": "gpu", "replicas": 4, "minReplicas": 2, "numOfHosts": 2},
               {"groupName": "cpu", "replicas": 3},
               {"groupName": "off", "replicas": 5, "suspended": True}]  # fmt: skip
    rayjob = _obj("ray.io/v1", "RayJob", "tune", labels={"ray.io/priority-class-name": "build"})
    raycluster = _obj("ray.io/v1", "RayCluster", "tune-raycluster", owner=rayjob,
                      spec={"workerGroupSpecs": workers})  # fmt: skip
    grouping = group_pod(_pod("tune-head", raycluster), QUEUE_KEYS, Reader(rayjob, raycluster))
    assert grouping.job == JobRef(NS, "RayJob", "tune")
    assert grouping.min_member == 1 + 2 * 2 + 3
    assert grouping.priority_candidates[0] == "build"


def test_leaderworkerset_groups_per_group_index_with_the_group_size() -> None:
    """plugins/leaderworkerset: one pod group per LWS group index (name suffix -group-<i>),
    min = leaderWorkerTemplate.size; with LeaderReady an unplaced leader needs only itself.
    A worker pod's chain runs Pod -> StatefulSet -> leader Pod -> StatefulSet -> LWS."""
    lws = _obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "vllm",
               spec={"leaderWorkerTemplate": {"size": 4}})  # fmt: skip
    leader_set = _obj("apps/v1", "StatefulSet", "vllm", owner=lws)
    leader = _pod("vllm-1", leader_set, labels={"leaderworkerset.sigs.k8s.io/group-index": "1",
                                                "leaderworkerset.sigs.k8s.io/worker-index": "0"})  # fmt: skip
    worker_set = _obj("apps/v1", "StatefulSet", "vllm-1", owner=leader)
    worker = _pod("vllm-1-1", worker_set,
                  labels={"leaderworkerset.sigs.k8s.io/group-index": "1",
                          "leaderworkerset.sigs.k8s.io/worker-index": "1"})  # fmt: skip
    reader = Reader(lws, leader_set, leader, worker_set)
    for pod in (leader, worker):
        grouping = group_pod(pod, QUEUE_KEYS, reader)
        assert (grouping.job, grouping.min_member) == (JobRef(NS, "LeaderWorkerSet", "vllm-group-1"), 4)

    lws["spec"]["startupPolicy"] = "LeaderReady"
    assert group_pod(leader, QUEUE_KEYS, reader).min_member == 1
    assert group_pod(worker, QUEUE_KEYS, reader).min_member == 4


def test_mpijob_and_tfjob_gang_is_the_sum_of_their_replicas_unless_min_available_says() -> None:
    """plugins/kubeflow (distributed_common.go): runPolicy.schedulingPolicy.minAvailable, else the
    sum of the replica specs' replicas (MPIJob: Launcher + Worker; TFJob: every spec)."""
    mpi = _obj("kubeflow.org/v2beta1", "MPIJob", "allreduce", spec={
        "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 8}}})  # fmt: skip
    tf = _obj("kubeflow.org/v1", "TFJob", "mnist", spec={
        "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
        "tfReplicaSpecs": {"PS": {"replicas": 2}, "Worker": {"replicas": 4}}})  # fmt: skip
    reader = Reader(mpi, tf)
    assert group_pod(_pod("a", mpi), QUEUE_KEYS, reader).min_member == 9
    assert group_pod(_pod("b", tf), QUEUE_KEYS, reader).min_member == 3


def test_pytorchjob_elastic_min_replicas_then_min_available() -> None:
    """plugins/kubeflow/pytorch: elasticPolicy.minReplicas overrides the replica sum, and
    runPolicy.schedulingPolicy.minAvailable overrides both."""
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Worker": {"replicas": 6}},
                            "elasticPolicy": {"minReplicas": 2}}  # fmt: skip
    job = _obj("kubeflow.org/v1", "PyTorchJob", "elastic", spec=spec)
    assert group_pod(_pod("w", job), QUEUE_KEYS, Reader(job)).min_member == 2
    spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": 5}}
    assert group_pod(_pod("w", job), QUEUE_KEYS, Reader(job)).min_member == 5


def test_a_cronjobs_pods_group_by_the_job_it_made_with_that_jobs_queue() -> None:
    """plugins/cronjobs: the group is the Job the CronJob created, not the CronJob."""
    cron = _obj("batch/v1", "CronJob", "nightly", labels={"kai.scheduler/queue": "cron-q"})
    job = _obj("batch/v1", "Job", "nightly-2911", owner=cron, labels={"kai.scheduler/queue": "team-a"})
    grouping = group_pod(_pod("nightly-2911-x", job), QUEUE_KEYS, Reader(cron, job))
    assert (grouping.job, grouping.queue) == (JobRef(NS, "Job", "nightly-2911"), "team-a")


def test_an_unreadable_owner_ends_the_walk_at_the_last_owner_read() -> None:
    """podgrouper.go handleGetOwnerError: an owner we may not read (here: an unknown kind, or
    a GET the reader refuses) stops the walk at the last owner read; a pod whose own owner is
    unreadable groups by that reference. Nothing raises."""
    widget = _obj("example.com/v1", "Widget", "w1")  # a kind KAI has no plugin for and we never GET
    replicaset = _obj("apps/v1", "ReplicaSet", "rs", owner=widget, labels={"kai.scheduler/queue": "q"})
    reader = Reader(replicaset, widget)
    grouping = group_pod(_pod("p", replicaset), QUEUE_KEYS, reader)
    assert (grouping.job, grouping.queue) == (JobRef(NS, "ReplicaSet", "rs"), "q")
    assert reader.reads == ["ReplicaSet/rs"]  # the unknown kind is not even asked for

    refused = Reader()  # every GET refused
    grouping = group_pod(_pod("p", replicaset, labels={"kai.scheduler/queue": "own"}), QUEUE_KEYS, refused)
    assert (grouping.job, grouping.queue) == (JobRef(NS, "ReplicaSet", "rs"), "own")


def test_an_owner_re_created_under_the_same_name_is_not_the_pods_owner() -> None:
    """podgrouper.go getOwnerInstance: a different uid means the pod's owner is gone."""
    job = _obj("batch/v1", "Job", "j", annotations={"kai.scheduler/batch-min-member": "4"})
    pod = _pod("p", job)
    job_again = {**job, "metadata": {**job["metadata"], "uid": "new"}}
    reader = Reader()
    reader.objects[job["metadata"]["uid"]] = job_again  # the name now answers with another object
    grouping = group_pod(pod, QUEUE_KEYS, reader)
    assert (grouping.job, grouping.min_member) == (JobRef(NS, "Job", "j"), None)


def test_priority_class_candidates_follow_the_default_grouper_and_preemptibility_the_labels() -> None:
    """defaultgrouper.calcPriorityClassWithDefaults: per owner from the pod up, the owner's
    priorityClassName label, else the pod's label, else spec.priorityClassName; the first
    that exists wins (else train). Preemptibility: owners' labels, then the pod's."""
    statefulset = _obj("apps/v1", "StatefulSet", "db", labels={
        "priorityClassName": "missing", "kai.scheduler/preemptibility": "non-preemptible"})  # fmt: skip
    pod = _pod("db-0", statefulset, labels={"kai.scheduler/preemptibility": "preemptible"})
    pod["spec"]["priorityClassName"] = "urgent"
    grouping = group_pod(pod, QUEUE_KEYS, Reader(statefulset))
    assert grouping.priority_candidates == ("missing",)
    assert grouping.preemptibility == "non-preemptible"
    classes = PriorityClasses({"urgent": 1000, "fallback": 7}, global_default="fallback", listed=True)
    finished = finish_pod(_observed(), grouping, {}, classes)
    assert (finished.priority_class, finished.priority) == ("train", 50)  # "missing" does not exist

    bare = _pod("solo")
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
