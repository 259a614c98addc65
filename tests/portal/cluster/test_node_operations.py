"""Cordon, uncordon and remove a node of the simulated cluster, from code and the admin."""

from __future__ import annotations

from datetime import timedelta

import pytest

from kai_portal.cluster import operations
from kai_portal.nodes.models import GpuDevice, Node
from kai_portal.workloads.choices import RestartPolicy
from kai_portal.workloads.models import Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


def test_a_cordoned_node_keeps_its_pods_but_gets_nothing_new(loop, leaf):
    node = factories.node("n1", gpus=4)
    first = factories.job(leaf, "first", duration=timedelta(hours=1))
    loop.run()
    assert operations.cordon_node(node) and not operations.cordon_node(node)
    second = factories.job(leaf, "second")

    loop.run_many(3)

    assert first.pods.get().state == "running"
    waiting = second.pods.get()
    assert waiting.state == "pending" and "node is unschedulable" in waiting.reason

    operations.uncordon_node(node)
    loop.run(5)
    assert second.pods.get().state == "bound"


def test_removing_a_node_sends_its_pods_back_to_pending_and_they_run_elsewhere(loop, leaf):
    doomed = factories.node("n1", gpus=1)
    factories.node("n2", gpus=0)
    job = factories.job(leaf, "a", duration=timedelta(hours=1))
    never = factories.job(leaf, "b", gpu_count=0, cpu_millicores=1000, restart_policy=RestartPolicy.NEVER)
    loop.run_many(2)
    assert set(Pod.objects.values_list("node__name", flat=True)) <= {"n1", "n2"}
    on_doomed = Pod.objects.filter(node=doomed).count()
    never_was_on_doomed = never.pods.get().node_id == doomed.pk

    moved = operations.remove_node(doomed, now=loop.now)

    assert moved == on_doomed
    assert (
        not Node.objects.filter(name="n1").exists()
        and not GpuDevice.objects.filter(node_id=doomed.pk).exists()
    )
    pod = job.pods.get()
    assert pod.state == "pending" and pod.node is None and "n1 was removed" in pod.reason
    job.refresh_from_db()
    assert job.state == "pending"
    never.refresh_from_db()
    # A drained pod of a job that never restarts ends the job.
    assert never.state == ("failed" if never_was_on_doomed else "running")

    factories.node("n3", gpus=1)
    loop.run(5)
    assert job.pods.get().state == "bound" and job.pods.get().node.name == "n3"


def test_admin_actions_cordon_and_remove(client, portal_admin, loop, leaf):
    node = factories.node("n1", gpus=1)
    client.force_login(portal_admin)
    url = "/admin/cluster/node/"

    client.post(url, {"action": "cordon", "_selected_action": [node.pk]})
    node.refresh_from_db()
    assert node.schedulable is False

    client.post(url, {"action": "uncordon", "_selected_action": [node.pk]})
    node.refresh_from_db()
    assert node.schedulable is True

    client.post(url, {"action": "remove", "_selected_action": [node.pk]})
    assert not Node.objects.filter(pk=node.pk).exists()
