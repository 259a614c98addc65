"""KAI's pod grouping by owners on raw JSON, for owner kinds whose controllers the test cluster lacks.

Each case names the KAI pod-grouper plugin it follows (pkg/podgrouper/podgrouper/plugins).
The owners are plain dicts served by a reader, as the backend's cached GETs serve them.
The cluster tier (tests/cluster/test_pod_grouping.py) covers Deployment, PyTorchJob,
PodGroup objects and PriorityClasses on a real API server; PodGroups, PriorityClasses and a
refused owner read are in test_pod_grouping.py.
"""

from __future__ import annotations

from typing import Any

from kai_portal.cluster.backends.base import JobRef
from kai_portal.cluster.backends.kubernetes.owners import group_pod

from .owner_json import NS, QUEUE_KEYS, Reader, owner_object, pod_object


def test_jobset_pods_are_one_group_whose_minimum_is_every_replicated_jobs_gang() -> None:
    """plugins/jobset: Pod -> Job -> JobSet is one group; a replica of a replicatedJob needs its
    parallelism (or the template's batch-min-member); all replicatedJobs are required (AnyOrder),
    or the JobSet's batch-min-member smallest of them. Flattened here: 2x4 + 1x(min 1) = 9."""
    rjs = [{"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4}}},
           {"name": "driver", "replicas": 1, "template": {
               "metadata": {"annotations": {"kai.scheduler/batch-min-member": "1"}},
               "spec": {"parallelism": 3}}}]  # fmt: skip
    jobset = owner_object("jobset.x-k8s.io/v1alpha2", "JobSet", "llm", spec={"replicatedJobs": rjs},
                  labels={"kai.scheduler/queue": "team-a"})  # fmt: skip
    job = owner_object("batch/v1", "Job", "llm-workers-0", owner=jobset)
    grouping = group_pod(pod_object("llm-workers-0-0", job), QUEUE_KEYS, Reader(jobset, job))
    assert grouping.job == JobRef(NS, "JobSet", "llm")
    assert (grouping.queue, grouping.min_member) == ("team-a", 9)

    jobset["metadata"]["annotations"]["kai.scheduler/batch-min-member"] = "1"  # one replicatedJob suffices
    assert group_pod(pod_object("p", job), QUEUE_KEYS, Reader(jobset, job)).min_member == 1


def test_raycluster_pods_gang_is_the_head_plus_each_worker_groups_minimum() -> None:
    """plugins/ray: 1 head + per worker group (minReplicas if > 0 else replicas) x numOfHosts,
    read from the RayCluster even when a RayJob owns it (the top owner and the group); the
    ray.io/priority-class-name label on the top owner names the priority class."""
    workers = [{"groupName": "gpu", "replicas": 4, "minReplicas": 2, "numOfHosts": 2},
               {"groupName": "cpu", "replicas": 3},
               {"groupName": "off", "replicas": 5, "suspended": True}]  # fmt: skip
    rayjob = owner_object("ray.io/v1", "RayJob", "tune", labels={"ray.io/priority-class-name": "build"})
    raycluster = owner_object("ray.io/v1", "RayCluster", "tune-raycluster", owner=rayjob,
                      spec={"workerGroupSpecs": workers})  # fmt: skip
    grouping = group_pod(pod_object("tune-head", raycluster), QUEUE_KEYS, Reader(rayjob, raycluster))
    assert grouping.job == JobRef(NS, "RayJob", "tune")
    assert grouping.min_member == 1 + 2 * 2 + 3
    assert grouping.priority_candidates[0] == "build"


def test_leaderworkerset_groups_per_group_index_with_the_group_size() -> None:
    """plugins/leaderworkerset: one pod group per LWS group index (name suffix -group-<i>),
    min = leaderWorkerTemplate.size; with LeaderReady an unplaced leader needs only itself.
    A worker pod's chain runs Pod -> StatefulSet -> leader Pod -> StatefulSet -> LWS."""
    lws = owner_object("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "vllm",
               spec={"leaderWorkerTemplate": {"size": 4}})  # fmt: skip
    leader_set = owner_object("apps/v1", "StatefulSet", "vllm", owner=lws)
    leader = pod_object("vllm-1", leader_set, labels={"leaderworkerset.sigs.k8s.io/group-index": "1",
                                                "leaderworkerset.sigs.k8s.io/worker-index": "0"})  # fmt: skip
    worker_set = owner_object("apps/v1", "StatefulSet", "vllm-1", owner=leader)
    worker = pod_object("vllm-1-1", worker_set,
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
    mpi = owner_object("kubeflow.org/v2beta1", "MPIJob", "allreduce", spec={
        "mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 8}}})  # fmt: skip
    tf = owner_object("kubeflow.org/v1", "TFJob", "mnist", spec={
        "runPolicy": {"schedulingPolicy": {"minAvailable": 3}},
        "tfReplicaSpecs": {"PS": {"replicas": 2}, "Worker": {"replicas": 4}}})  # fmt: skip
    reader = Reader(mpi, tf)
    assert group_pod(pod_object("a", mpi), QUEUE_KEYS, reader).min_member == 9
    assert group_pod(pod_object("b", tf), QUEUE_KEYS, reader).min_member == 3


def test_pytorchjob_elastic_min_replicas_then_min_available() -> None:
    """plugins/kubeflow/pytorch: elasticPolicy.minReplicas overrides the replica sum, and
    runPolicy.schedulingPolicy.minAvailable overrides both."""
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Worker": {"replicas": 6}},
                            "elasticPolicy": {"minReplicas": 2}}  # fmt: skip
    job = owner_object("kubeflow.org/v1", "PyTorchJob", "elastic", spec=spec)
    assert group_pod(pod_object("w", job), QUEUE_KEYS, Reader(job)).min_member == 2
    spec["runPolicy"] = {"schedulingPolicy": {"minAvailable": 5}}
    assert group_pod(pod_object("w", job), QUEUE_KEYS, Reader(job)).min_member == 5


def test_a_cronjobs_pods_group_by_the_job_it_made_with_that_jobs_queue() -> None:
    """plugins/cronjobs: the group is the Job the CronJob created, not the CronJob."""
    cron = owner_object("batch/v1", "CronJob", "nightly", labels={"kai.scheduler/queue": "cron-q"})
    job = owner_object(
        "batch/v1", "Job", "nightly-2911", owner=cron, labels={"kai.scheduler/queue": "team-a"}
    )
    grouping = group_pod(pod_object("nightly-2911-x", job), QUEUE_KEYS, Reader(cron, job))
    assert (grouping.job, grouping.queue) == (JobRef(NS, "Job", "nightly-2911"), "team-a")


def test_an_unreadable_owner_ends_the_walk_at_the_last_owner_read() -> None:
    """podgrouper.go handleGetOwnerError: an owner we may not read (here: an unknown kind, or
    a GET the reader refuses) stops the walk at the last owner read; a pod whose own owner is
    unreadable groups by that reference. Nothing raises."""
    widget = owner_object("example.com/v1", "Widget", "w1")  # a kind KAI has no plugin for and we never GET
    replicaset = owner_object(
        "apps/v1", "ReplicaSet", "rs", owner=widget, labels={"kai.scheduler/queue": "q"}
    )
    reader = Reader(replicaset, widget)
    grouping = group_pod(pod_object("p", replicaset), QUEUE_KEYS, reader)
    assert (grouping.job, grouping.queue) == (JobRef(NS, "ReplicaSet", "rs"), "q")
    assert reader.reads == ["ReplicaSet/rs"]  # the unknown kind is not even asked for

    refused = Reader()  # every GET refused
    grouping = group_pod(
        pod_object("p", replicaset, labels={"kai.scheduler/queue": "own"}), QUEUE_KEYS, refused
    )
    assert (grouping.job, grouping.queue) == (JobRef(NS, "ReplicaSet", "rs"), "own")


def test_an_owner_re_created_under_the_same_name_is_not_the_pods_owner() -> None:
    """podgrouper.go getOwnerInstance: a different uid means the pod's owner is gone."""
    job = owner_object("batch/v1", "Job", "j", annotations={"kai.scheduler/batch-min-member": "4"})
    pod = pod_object("p", job)
    job_again = {**job, "metadata": {**job["metadata"], "uid": "new"}}
    reader = Reader()
    reader.objects[job["metadata"]["uid"]] = job_again  # the name now answers with another object
    grouping = group_pod(pod, QUEUE_KEYS, reader)
    assert (grouping.job, grouping.min_member) == (JobRef(NS, "Job", "j"), None)
