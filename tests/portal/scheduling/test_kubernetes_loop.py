"""The loop drives the Kubernetes backend against the emulator: exact Binding bodies, Unschedulable events."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.nodes.models import Node
from kai_portal.workloads.models import Job, Pod
from tests.backends.conftest import api_client, backend, core, emulator, emulator_and_url, make_node, make_pod
from tests.backends.emulator import KubeApiEmulator
from tests.portal import factories

__all__ = ["api_client", "backend", "core", "emulator", "emulator_and_url"]  # fixtures used below

pytestmark = pytest.mark.django_db


def _posts(emulator: KubeApiEmulator, suffix: str) -> list[dict[str, Any]]:
    return [
        json.loads(r.body) for r in emulator.request_log if r.method == "POST" and r.url.path.endswith(suffix)
    ]


@pytest.fixture
def team_queue(db):
    dept = factories.queue("dept", gpu_quota=8)
    return factories.queue("team-a", parent=dept, gpu_quota=8)


def test_the_loop_binds_a_pending_pod_and_explains_one_that_cannot_fit(
    loop, team_queue, emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
):
    make_node(core, "gpu-1", gpus=8, labels={"kai.scheduler/node-pool": "default"})
    make_pod(core, "fits", labels={"kai.scheduler/queue": "team-a"}, gpus=2)
    make_pod(core, "too-big", labels={"kai.scheduler/queue": "team-a"}, gpus=16)

    cycle = loop.run(backend=backend)

    assert cycle.status == "succeeded", cycle.error
    # The cluster's node and pods are now rows.
    assert Node.objects.get().name == "gpu-1" and Node.objects.get().gpus.count() == 8
    fits = Pod.objects.get(name="fits")
    assert fits.state == "bound" and fits.job.cluster_key == "team-a/Pod/fits"
    uid = backend.observe().pods["team-a", "fits"].uid
    binding = _posts(emulator, "/pods/fits/binding")
    assert binding == [{
        "apiVersion": "v1",
        "kind": "Binding",
        # KAI's binder's and podgrouper's annotations, in the bind's own write; no device for
        # whole GPUs (KAI writes none).
        "metadata": {"name": "fits", "namespace": "team-a", "uid": uid,
                     "annotations": {"received-resource-type": "Regular",
                                     "pod-group-name": f"pg-fits-{uid}"}},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"},
    }]  # fmt: skip
    assert _posts(emulator, "/pods/too-big/binding") == []

    events = _posts(emulator, "/namespaces/team-a/events")
    unschedulable = [
        e for e in events if e["reason"] == "Unschedulable" and e["involvedObject"]["kind"] == "Pod"
    ]
    assert len(unschedulable) == 1
    event = unschedulable[0]
    assert event["type"] == "Warning"
    assert event["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "too-big",
        "namespace": "team-a",
        "uid": backend.observe().pods["team-a", "too-big"].uid,  # a re-created pod gets its own events
    }
    too_big = Pod.objects.get(name="too-big")
    assert event["message"] == too_big.reason and too_big.state == "pending"
    assert "GPU" in event["message"]
    scheduled = [e for e in events if e["reason"] == "Scheduled"]
    assert [e["message"] for e in scheduled] == [
        "Successfully assigned pod team-a/fits to node gpu-1 at node-pool default"
    ]

    # Next cycle: the cluster reports the pod bound; nothing is bound twice.
    loop.run(5, backend=backend)
    assert len(_posts(emulator, "/pods/fits/binding")) == 1
    assert Pod.objects.get(name="fits").state == "bound"
    assert Job.objects.get(name="fits").state == "running"
