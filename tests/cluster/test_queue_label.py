"""The queue label key, as KAI reads it (issue 29, item 4).

KAI reads one pod label for the queue, ``kai.scheduler/queue`` unless its ``--queue-label-key``
(``global.queueLabelKey``) says otherwise; the legacy ``runai/queue`` is read only when set
there. A pod naming no queue under that key goes to ``default-queue`` (KAI's podgrouper,
``defaultgrouper.CalcPodGroupQueue``). The portal's setting is ``QUEUE_LABEL_KEY``.
"""

from __future__ import annotations

from typing import Any

import pytest

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.workloads import configured_backend
from kai_portal.workloads.models import Job
from tests.portal import factories

from .conftest import Cluster, Nodes, cycle, pod_body

pytestmark = pytest.mark.django_db


def _legacy_pod(cluster: Cluster, namespace: str, scheduler: str) -> None:
    body = pod_body("legacy", scheduler, gpus=1, labels={"runai/queue": "team-a"})
    cluster.core.create_namespaced_pod(namespace, body)


def test_a_pod_labelled_only_runai_queue_goes_to_default_queue_by_default(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    factories.queue("default-queue", gpu_quota=8)
    node = nodes.kwok("gpu", gpus=1)
    _legacy_pod(cluster, namespace, scheduler_name)

    cycle()

    assert Job.objects.get(name="legacy").queue.name == "default-queue"
    assert cluster.core.read_namespaced_pod("legacy", namespace).spec.node_name == node


def test_with_queue_label_key_runai_queue_the_legacy_label_names_the_queue(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes,
    settings: Any, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    factories.queue("default-queue", gpu_quota=8)
    settings.QUEUE_LABEL_KEY = "runai/queue"
    monkeypatch.setattr(configured_backend, "_kubernetes_backend", None)  # made again with the setting
    backend = configured_backend.get_backend()
    assert isinstance(backend, KubernetesBackend) and backend.queue_label_keys == ("runai/queue",)
    node = nodes.kwok("gpu", gpus=1)
    _legacy_pod(cluster, namespace, scheduler_name)

    try:
        cycle()
    finally:
        backend.api_client.close()

    assert Job.objects.get(name="legacy").queue.name == "team-a"
    assert cluster.core.read_namespaced_pod("legacy", namespace).spec.node_name == node
