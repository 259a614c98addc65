"""A job's age as KAI's job order reads it (issue 29, item 1): the creation time of the object
its pod group is named for, never the time the portal first saw it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kai_portal.cluster.backends.kubernetes.objects import parse_pod
from kai_portal.cluster.backends.kubernetes.owners import group_pod
from kai_portal.cluster.backends.kubernetes.pod_grouping import (
    PodGroupSpec,
    PriorityClasses,
    finish_pod,
    parse_pod_group,
)

from .owner_json import NS, QUEUE_KEYS, Reader, owner_object, pod_object

OWNER_TIME, POD_TIME = "2026-11-28T08:00:00Z", "2026-11-28T08:00:07Z"


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC)


def _stamped(obj: dict[str, Any], stamp: str) -> dict[str, Any]:
    obj["metadata"]["creationTimestamp"] = stamp
    return obj


def test_a_groups_age_is_its_top_owners_creation_time() -> None:
    job = _stamped(owner_object("batch/v1", "Job", "train"), OWNER_TIME)
    pod = _stamped(pod_object("train-0", job), POD_TIME)
    assert group_pod(pod, QUEUE_KEYS, Reader(job)).created_at == _at(OWNER_TIME)

    # A CronJob's group is the Job it made: that Job's time, not the CronJob's.
    cron = _stamped(owner_object("batch/v1", "CronJob", "nightly"), "2026-01-01T00:00:00Z")
    made = _stamped(owner_object("batch/v1", "Job", "nightly-1", owner=cron), OWNER_TIME)
    pod = _stamped(pod_object("nightly-1-x", made), POD_TIME)
    assert group_pod(pod, QUEUE_KEYS, Reader(cron, made)).created_at == _at(OWNER_TIME)


def test_a_bare_pod_and_a_deployments_replica_are_as_old_as_the_pod() -> None:
    """plugins/podjob: the pod is its own top owner; plugins/deployment: one group per pod."""
    bare = _stamped(pod_object("alone"), POD_TIME)
    assert group_pod(bare, QUEUE_KEYS, Reader()).created_at == _at(POD_TIME)
    deployment = _stamped(owner_object("apps/v1", "Deployment", "web"), OWNER_TIME)
    replicaset = _stamped(owner_object("apps/v1", "ReplicaSet", "web-1", owner=deployment), OWNER_TIME)
    replica = _stamped(pod_object("web-1-x", replicaset), POD_TIME)
    assert group_pod(replica, QUEUE_KEYS, Reader(deployment, replicaset)).created_at == _at(POD_TIME)


def test_a_pod_group_made_after_its_pods_does_not_make_them_younger() -> None:
    job = _stamped(owner_object("batch/v1", "Job", "train"), OWNER_TIME)
    raw = _stamped(pod_object("train-0", job, annotations={"pod-group-name": "pg-train"}), POD_TIME)
    raw["spec"] = {"schedulerName": "kai-scheduler", "containers": []}
    pod, grouping = parse_pod(raw, QUEUE_KEYS), group_pod(raw, QUEUE_KEYS, Reader(job))
    for group_time, wanted in (("2026-11-28T09:00:00Z", OWNER_TIME), ("2026-11-28T07:00:00Z", None)):
        key, spec = parse_pod_group(
            {"metadata": {"namespace": NS, "name": "pg-train", "creationTimestamp": group_time}}
        )
        assert spec.created_at == _at(group_time)
        finished = finish_pod(pod, grouping, {key: spec}, PriorityClasses())
        assert finished.job_created_at == _at(wanted or group_time)
    # Without a PodGroup: the owner's.
    finished = finish_pod(pod, grouping, {(NS, "other"): PodGroupSpec()}, PriorityClasses())
    assert finished.job_created_at == _at(OWNER_TIME)


def test_the_arrival_tiebreak_is_the_name_of_the_pods_pod_group() -> None:
    """KAI breaks ties of age on the PodGroup's name: the one a pod names, else the one its
    podgrouper writes (``pg-<top owner>-<uid>``)."""
    job = _stamped(owner_object("batch/v1", "Job", "train"), OWNER_TIME)
    owned = _stamped(pod_object("train-0", job), POD_TIME)
    owned["spec"] = {"schedulerName": "kai-scheduler", "containers": []}
    grouping = group_pod(owned, QUEUE_KEYS, Reader(job))
    finished = finish_pod(parse_pod(owned, QUEUE_KEYS), grouping, {}, PriorityClasses())
    assert finished.pod_group_name == f"pg-train-{job['metadata']['uid']}"

    raw = _stamped(pod_object("train-0", job, annotations={"pod-group-name": "pg-mine"}), POD_TIME)
    raw["spec"] = {"schedulerName": "kai-scheduler", "containers": []}
    key, spec = parse_pod_group({"metadata": {"namespace": NS, "name": "pg-mine"}})
    pod, grouping = parse_pod(raw, QUEUE_KEYS), group_pod(raw, QUEUE_KEYS, Reader(job))
    assert finish_pod(pod, grouping, {key: spec}, PriorityClasses()).pod_group_name == "pg-mine"
    # Named but not (yet) created: still that name.
    assert finish_pod(pod, grouping, {}, PriorityClasses()).pod_group_name == "pg-mine"
