"""Arrival order on a real API server (issue 29, item 1).

KAI orders the jobs of a queue by priority, then elastic state, then the PodGroup's creation
time (the podgrouper makes it as the top owner's pods appear), then UID. Two equal one-GPU pods
want the only free node (one GPU); the older must get it whatever their names, so the names are
chosen to sort the other way round (``aa-newer`` is created 1.5 s after ``zz-older``: creation
timestamps have whole seconds, and 1.5 s apart always falls in different seconds).
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.workloads.models import Job

from .conftest import Cluster, Nodes, cycle, pod_body, wait_until

pytestmark = pytest.mark.django_db

LABELS = {"kai.scheduler/queue": "team-a"}


def _create(cluster: Cluster, namespace: str, scheduler: str, name: str) -> None:
    cluster.core.create_namespaced_pod(namespace, pod_body(name, scheduler, gpus=1, labels=LABELS))


def _create_older_then_newer(cluster: Cluster, namespace: str, scheduler: str) -> None:
    _create(cluster, namespace, scheduler, "zz-older")
    time.sleep(1.5)
    _create(cluster, namespace, scheduler, "aa-newer")


def _node_of(cluster: Cluster, namespace: str, name: str) -> str | None:
    return cluster.core.read_namespaced_pod(name, namespace).spec.node_name  # type: ignore[no-any-return]


def test_older_pod_is_bound_when_both_arrive_within_one_cycle(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    node = nodes.kwok("only", gpus=1)
    _create_older_then_newer(cluster, namespace, scheduler_name)

    cycle()  # the first cycle sees both pods: a fresh install's backlog

    assert _node_of(cluster, namespace, "zz-older") == node
    assert _node_of(cluster, namespace, "aa-newer") is None
    # Each job's age is its top owner's (here the pod's own) creationTimestamp, not the sync time.
    for name in ("zz-older", "aa-newer"):
        pod = cluster.core.read_namespaced_pod(name, namespace)
        assert Job.objects.get(name=name).created_at == pod.metadata.creation_timestamp


def test_older_pod_is_bound_when_each_was_first_seen_by_its_own_cycle(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    node = nodes.kwok("only", gpus=1, spec={"unschedulable": True})  # cordoned until both wait
    _create(cluster, namespace, scheduler_name, "zz-older")
    cycle()
    time.sleep(1.5)
    _create(cluster, namespace, scheduler_name, "aa-newer")
    cycle()
    assert set(Job.objects.values_list("name", flat=True)) == {"zz-older", "aa-newer"}

    cluster.core.patch_node(node, {"spec": {"unschedulable": False}})
    wait_until(lambda: not cluster.core.read_node(node).spec.unschedulable, "the node to be uncordoned")
    cycle()

    assert _node_of(cluster, namespace, "zz-older") == node
    assert _node_of(cluster, namespace, "aa-newer") is None


def test_rows_stamped_with_the_sync_time_take_the_clusters_time_when_seen_again(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """Rows an earlier version wrote carry the time of the sync that first saw them, in name
    order (``aa-newer`` before ``zz-older``); the next observe puts the cluster's time back."""
    node = nodes.kwok("only", gpus=1, spec={"unschedulable": True})
    _create_older_then_newer(cluster, namespace, scheduler_name)
    cycle()
    synced = Job.objects.get(name="zz-older").created_at + timedelta(minutes=5)
    Job.objects.filter(name="aa-newer").update(created_at=synced)
    Job.objects.filter(name="zz-older").update(created_at=synced + timedelta(microseconds=1))

    cluster.core.patch_node(node, {"spec": {"unschedulable": False}})
    wait_until(lambda: not cluster.core.read_node(node).spec.unschedulable, "the node to be uncordoned")
    cycle()

    assert _node_of(cluster, namespace, "zz-older") == node
    assert _node_of(cluster, namespace, "aa-newer") is None
    older = cluster.core.read_namespaced_pod("zz-older", namespace).metadata.creation_timestamp
    assert Job.objects.get(name="zz-older").created_at == older
