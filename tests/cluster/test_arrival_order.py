"""Arrival order on a real API server (issue 29, item 1).

KAI orders the jobs of a queue by priority, then elastic state, then the PodGroup's creation
time (the podgrouper makes it as the top owner's pods appear), then its ``UID`` field, which holds
the PodGroup's name (cluster_info.go: ``PodGroupID(podGroup.Name)``). Two equal one-GPU pods
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
from .test_pod_grouping import podgroup_crd  # noqa: F401
from .test_pod_groups_written import pod_groups

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


def _create_in_one_second(cluster: Cluster, namespace: str, scheduler: str, names: tuple[str, ...]) -> bool:
    """Creates the pods; True when their creationTimestamps fell in one second, else they are
    deleted (and gone) so the caller can try again."""
    for name in names:
        _create(cluster, namespace, scheduler, name)
    stamps = {cluster.core.read_namespaced_pod(n, namespace).metadata.creation_timestamp for n in names}
    if len(stamps) == 1:
        return True
    for name in names:
        cluster.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_until(lambda: not cluster.core.list_namespaced_pod(namespace).items, "the pods to be gone")
    return False


def test_pods_created_in_one_second_are_taken_in_podgroup_name_order_not_pod_name_order(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    podgroup_crd: None,  # noqa: F811
) -> None:  # fmt: skip
    """``tie`` and ``tie-0`` in one second: by name ``tie`` sorts first, but their PodGroups are
    ``pg-tie-<uid>`` and ``pg-tie-0-<uid>``, and a uid's first character (hex) sorts after the
    ``-`` of ``-0-`` or after ``0``, so KAI takes ``tie-0`` whatever the uids. The test reads the
    PodGroups the portal wrote and checks the bound pod is the one whose PodGroup sorts first."""
    node = nodes.kwok("only", gpus=1)
    for attempt in range(5):
        names = (f"tie{attempt}", f"tie{attempt}-0")
        if _create_in_one_second(cluster, namespace, scheduler_name, names):
            break
    else:
        pytest.fail("five pairs of pods were each created across a second boundary")

    cycle()

    groups = wait_until(lambda: len(pod_groups(cluster, namespace)) == 2 and pod_groups(cluster, namespace),
                        "the portal to write both PodGroups")  # fmt: skip
    group_of = {}
    for name in names:
        uid = cluster.core.read_namespaced_pod(name, namespace).metadata.uid
        group_of[name] = f"pg-{name}-{uid}"
        assert group_of[name] in groups
        assert Job.objects.get(name=name).pod_group_name == group_of[name]
    kai_first = min(names, key=group_of.__getitem__)
    assert kai_first == names[1]  # the name order and KAI's order differ
    assert _node_of(cluster, namespace, kai_first) == node
    assert _node_of(cluster, namespace, names[0]) is None
