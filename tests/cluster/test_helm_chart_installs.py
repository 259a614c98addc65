"""The Helm chart on a real, RBAC-enforcing API server (issue 18's done-when).

``helm template`` renders the chart (with its CRDs); ``kubectl apply --server-side`` applies
every object with strict field validation, so an unknown field or a wrong type is an error.
Then the portal's backend runs a full cycle as the chart's own ServiceAccount, with a token
from the TokenRequest API: every call it makes (observe, bind, evict, pod status, events) must
be allowed, and a call outside its role must be denied.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from django.utils import timezone
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.history.models import Decision
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.scheduling.lock import LOCK_NAME
from kai_portal.workloads.models import Pod
from tests.deploy.test_helm_chart import CHART, HELM, REQUIRED
from tests.portal import factories

from .conftest import Cluster, Nodes, kubeconfig_for, pod_body, wait_until

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(HELM is None, reason="helm is not built (make helm builds it from its Go module)"),
]


CLUSTER_SCOPED = {
    "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "PriorityClass",
}  # fmt: skip


@pytest.fixture
def release(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """The chart installed as release ``kai`` in a fresh namespace: (namespace, ServiceAccount)."""
    namespace = f"kai-chart-{secrets.token_hex(3)}"
    # A helm built from its module defaults to Kubernetes v1.20; the test server is v1.35.
    args = [str(HELM), "template", "kai", str(CHART), "--namespace", namespace, "--include-crds",
            "--kube-version", "1.35.4"]  # fmt: skip
    for setting in REQUIRED:
        args += ["--set", setting]
    rendered = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True).stdout
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    # As `helm install -n`: namespaced objects without a namespace of their own go to the release's
    # (the GPU-sharing objects name kai-resource-reservation themselves).
    for doc in docs:
        if doc["kind"] not in CLUSTER_SCOPED:
            doc["metadata"].setdefault("namespace", namespace)
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    # Strict server-side apply: the API server validates every field of every object.
    cluster.kubectl("apply", "--server-side", "--field-manager=kai-portal-test", "--validate=strict",
                    "-f", "-", stdin=yaml.safe_dump_all(docs))  # fmt: skip
    # The scheduler's account: the one the chart's ClusterRoleBinding names.
    # (the other binding is the web pods' account: Queue objects, portal jobs' pods)
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    [binding] = [d for d in bindings if not d["metadata"]["name"].endswith("-web")]
    [subject] = binding["subjects"]
    account = subject["name"]
    yield namespace, account
    # Cluster-wide objects of this release go; the CRDs and the reservation namespace stay (other
    # tests of the session use that namespace).
    for doc in (d for d in docs if d["kind"] in CLUSTER_SCOPED - {"CustomResourceDefinition", "Namespace"}):
        cluster.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found")
    cluster.core.delete_namespace(namespace, propagation_policy="Background")


def test_the_chart_applies_and_its_service_account_runs_a_full_cycle(
    cluster: Cluster, release: tuple[str, str], namespace: str, scheduler_name: str, nodes: Nodes,
    settings: Any, tmp_path: Path,
) -> None:  # fmt: skip
    chart_namespace, account = release
    # What the chart made is really there: the CRDs KAI users apply Queues with, and the role.
    crds = cluster.kubectl("get", "crd", "-o", "name")
    assert "queues.scheduling.run.ai" in crds and "podgroups.scheduling.run.ai" in crds
    # KAI's PriorityClasses, as KAI's chart installs them: a pod naming one in its spec is admitted
    # (the Priority admission plugin refuses a missing class) with KAI's value.
    named = cluster.core.create_namespaced_pod(
        namespace, pod_body("build-class", scheduler_name, priorityClassName="build"), dry_run="All")
    assert named.spec.priority == 100
    assert cluster.can_i("create", "pods", subresource="binding", namespace="x",
                         user=f"system:serviceaccount:{chart_namespace}:{account}")  # fmt: skip
    # The web pods' account writes KAI Queue objects (a portal quota edit) and creates and deletes
    # portal jobs' pods; it never binds, evicts or reads secrets.
    web = f"system:serviceaccount:{chart_namespace}:kai-kai-portal-web"
    assert cluster.can_i("patch", "queues.scheduling.run.ai", user=web)
    assert cluster.can_i("create", "pods", user=web, namespace="x")
    assert not cluster.can_i("create", "pods", subresource="binding", namespace="x", user=web)
    assert not cluster.can_i("create", "pods", subresource="eviction", namespace="x", user=web)
    assert not cluster.can_i("get", "secrets", user=web, namespace="x")
    scheduler = f"system:serviceaccount:{chart_namespace}:{account}"
    assert cluster.can_i("watch", "queues.scheduling.run.ai", user=scheduler)
    # The objects KAI's tooling reads: PodGroups and their status, Queue.status (and nothing more of them).
    assert cluster.can_i("create", "podgroups.scheduling.run.ai", user=scheduler, namespace="x")
    assert cluster.can_i("patch", "podgroups.scheduling.run.ai", subresource="status", user=scheduler,
                         namespace="x")  # fmt: skip
    assert cluster.can_i("patch", "queues.scheduling.run.ai", subresource="status", user=scheduler)
    assert not cluster.can_i("delete", "podgroups.scheduling.run.ai", user=scheduler, namespace="x")
    assert not cluster.can_i("patch", "queues.scheduling.run.ai", user=scheduler)

    api = config.new_client_from_config(config_file=str(kubeconfig_for(
        cluster, chart_namespace, account, tmp_path / "chart.kubeconfig")))  # fmt: skip
    backend = KubernetesBackend(api_client=api, scheduler_name=scheduler_name)
    review = client.AuthenticationV1Api(api).create_self_subject_review(client.V1SelfSubjectReview())
    assert review.status.user_info.username == f"system:serviceaccount:{chart_namespace}:{account}"
    settings.SCHEDULER_NAME = scheduler_name
    settings.LEADER_ELECTION_NAMESPACE = chart_namespace  # as the chart's ConfigMap says
    redis.Redis.from_url(settings.REDIS_URL).delete(LOCK_NAME)
    dept = factories.queue("dept", gpu_quota=8)
    factories.queue("team-a", parent=dept, gpu_quota=8)
    factories.queue("team-b", parent=dept, gpu_quota=0)

    node = nodes.kwok("chart-gpu", gpus=8)
    core = cluster.core
    low = {"kai.scheduler/queue": "team-b"}
    core.create_namespaced_pod(namespace, pod_body("borrower", scheduler_name, gpus=8, labels=low))
    cycle = run_scheduling_cycle(now=timezone.now(), backend=backend)  # observe, bind, events
    assert cycle.status == "succeeded", cycle.error
    assert cycle.counters["apply_failures"] == 0, "a call of the cycle was refused"
    assert core.read_namespaced_pod("borrower", namespace).spec.node_name == node
    borrower = core.read_namespaced_pod("borrower", namespace)
    borrower_uid = borrower.metadata.uid
    # KAI's binder's and podgrouper's marks on the pod, under the chart's role (no new verb: the
    # annotations ride on the Binding, PodBound is a pods/status patch like PodScheduled).
    assert borrower.metadata.annotations["pod-group-name"] == f"pg-borrower-{borrower_uid}"
    assert borrower.metadata.annotations["received-resource-type"] == "Regular"
    assert [c.reason for c in borrower.status.conditions if c.type == "PodBound"] == ["Bound"]
    # KAI's podgrouper's and controllers' objects, written under the chart's role: a PodGroup per
    # workload (owned by the pod: it goes with it), with its status as of the cycle that bound it.
    group = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "scheduling.run.ai", "v2alpha2", namespace, "podgroups", f"pg-borrower-{borrower_uid}"
    )
    assert group["spec"]["queue"] == "team-b"
    assert group["status"]["resourcesStatus"] == {"allocated": {"nvidia.com/gpu": "8"},
                                                  "requested": {"nvidia.com/gpu": "8"}}  # fmt: skip
    wait_until(lambda: core.read_namespaced_pod("borrower", namespace).status.phase == "Running", "KWOK")

    # team-a wants its quota back: reclaim evicts the borrower through the Eviction API, and the
    # waiting pod gets PodScheduled=False meanwhile.
    owner = {"kai.scheduler/queue": "team-a"}
    core.create_namespaced_pod(namespace, pod_body("owner", scheduler_name, gpus=8, labels=owner))
    for _ in range(3):
        cycle = run_scheduling_cycle(now=timezone.now(), backend=backend)
        assert cycle.status == "succeeded", cycle.error
        assert cycle.counters["apply_failures"] == 0, "a call of the cycle was refused"
        if Pod.objects.filter(name="borrower", state__in=["releasing", "succeeded", "failed"]).exists():
            break
    assert Pod.objects.get(name="borrower").state in ("releasing", "succeeded", "failed")
    # No FailedBinding / FailedEviction in any cycle: every call the backend made was allowed.
    failed = Decision.objects.filter(reason__in=["FailedBinding", "FailedEviction"])
    assert not failed.exists(), list(failed.values_list("reason", "message"))
    reasons = {e.reason for e in core.list_namespaced_event(namespace).items}
    assert {"Scheduled", "Evict", "Bound"} <= reasons, reasons
    # Leader election ran on the chart's Role: the worker holds its Lease in the release's namespace.
    lease = client.CoordinationV1Api(cluster.api).read_namespaced_lease(f"kai-portal-{scheduler_name}",
                                                                         chart_namespace)  # fmt: skip
    assert lease.spec.holder_identity and lease.spec.lease_duration_seconds == 15

    # Outside the role: the chart's account cannot read secrets or change nodes.
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(api).list_namespaced_secret(chart_namespace)
    assert denied.value.status == 403
    with pytest.raises(ApiException) as denied:
        client.CoreV1Api(api).patch_node(node, {"metadata": {"labels": {"x": "y"}}})
    assert denied.value.status == 403
    api.close()
