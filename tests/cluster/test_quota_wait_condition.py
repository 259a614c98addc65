"""Issue 31: a pod held back only by its queue's quota or limit must not make a cluster autoscaler add
nodes; a pod waiting for room on a node must.

cluster-autoscaler and Karpenter treat a pod as demand for a new node only when its
``PodScheduled`` condition is ``False`` with reason ``Unschedulable`` (so does KAI's own
node-scale-adjuster). The portal writes that reason for a pod the engine could not fit, and the
engine's quota code (``OverLimit``, ``NonPreemptibleOverQuota``) for a pod only its queue holds back.
The job page says which.
"""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.test import Client
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job
from tests.portal import factories

from .conftest import Cluster, Nodes, cycle, pod_body

pytestmark = pytest.mark.django_db


def _scheduled_condition(core: client.CoreV1Api, namespace: str, name: str) -> tuple[str, str]:
    pod = core.read_namespaced_pod(name, namespace)
    [condition] = [c for c in pod.status.conditions or [] if c.type == "PodScheduled"]
    return condition.status, condition.reason


def test_a_quota_blocked_pod_is_not_unschedulable_to_autoscalers_a_capacity_blocked_one_is(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    django_user_model: Any,
) -> None:  # fmt: skip
    core = cluster.core
    nodes.kwok("gpu-1", gpus=8)
    dept = factories.queue("dept-capped", gpu_quota=0)
    factories.queue("capped", parent=dept, gpu_quota=0, gpu_limit=2)
    team_a = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("first", scheduler_name, gpus=6, labels=team_a))
    # Room on the node (8 GPUs, 6 taken, 2 free) is not what stops this one: its queue's limit is 2.
    capped = {"kai.scheduler/queue": "capped"}
    core.create_namespaced_pod(namespace, pod_body("over-limit", scheduler_name, gpus=4, labels=capped))
    core.create_namespaced_pod(namespace, pod_body("second", scheduler_name, gpus=6, labels=team_a))

    cycle()
    cycle()

    # One of the two 6-GPU pods runs; the other waits for room.
    bound = {n for n in ("first", "second") if core.read_namespaced_pod(n, namespace).spec.node_name}
    assert len(bound) == 1
    [no_room] = {"first", "second"} - bound
    assert _scheduled_condition(core, namespace, "over-limit") == ("False", "OverLimit")
    assert _scheduled_condition(core, namespace, no_room) == ("False", "Unschedulable")

    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    web = Client()
    web.force_login(admin)
    pages = {
        name: unescape(web.get(f"/jobs/{Job.objects.get(name=pod).uid}/").content.decode())
        for name, pod in (("over-limit", "over-limit"), ("no-room", no_room))
    }
    assert "Waiting for quota." in pages["over-limit"] and "Waiting for capacity" not in pages["over-limit"]
    assert "Waiting for capacity." in pages["no-room"] and "Waiting for quota" not in pages["no-room"]

    # The limit is raised: the pod now waits for room on the node, and says so to autoscalers.
    Queue.objects.filter(name="capped").update(gpu_limit=8)
    cycle()
    assert _scheduled_condition(core, namespace, "over-limit") == ("False", "Unschedulable")
