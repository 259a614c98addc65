"""The portal drives the cluster (issue 16; issue 19's "YAML submit then scheduled" as one path).

In kubernetes mode a job submitted in the portal, through its own pages (Django's test client)
or its API (DRF's APIClient), becomes its pods in the team's namespace on a real API server,
created in the request as the portal's ServiceAccount (deploy/rbac/); the portal's scheduling
cycles then bind them (KWOK runs them) and the sync brings them back to the same job row.
Cancel deletes them. What the cluster refuses is the user's error and nothing is saved.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from rest_framework.test import APIClient

from kai_portal.accounts.models import User
from kai_portal.cluster import sync
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.cluster.backends.kubernetes import gpu_sharing as sharing
from kai_portal.teams.models import Membership
from kai_portal.workloads import cluster_jobs
from kai_portal.workloads.models import Job
from tests.kai_examples import kai_file
from tests.portal import factories

from . import test_gpu_sharing as gpu_sharing
from .conftest import REPO, Cluster, Nodes, cycle, pod_body, wait_until
from .test_gpu_sharing import GPU_MEMORY_LABEL, DevicePlugin, _configmap, _groups

# The GPU-sharing examples need test_gpu_sharing's webhook (over loopback TLS) and device plugin.
webhook_certs, webhook_server = gpu_sharing.webhook_certs, gpu_sharing.webhook_server
webhook, reservation_namespace = gpu_sharing.webhook, gpu_sharing.reservation_namespace
device_plugin = gpu_sharing.device_plugin

pytestmark = pytest.mark.django_db

OPTIONAL_RBAC = REPO / "deploy" / "rbac" / "optional" / "kai-portal-namespaces.yaml"


@pytest.fixture
def portal(
    portal_backend: KubernetesBackend, web_kubeconfig: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[KubernetesBackend]:
    """The portal in kubernetes mode; namespaces per team. Cycles run as the worker's ServiceAccount
    (``kai-portal``); submissions and cancels as the web pods' (``kai-portal-web``), as deployed."""
    settings.JOB_NAMESPACE_MODE, settings.JOB_NAMESPACE_PREFIX = "team", ""
    settings.JOB_NAMESPACE_CREATE = False
    portal_backend.gpu_sharing.allocation_timeout_seconds = 30
    web = KubernetesBackend(
        api_client=kube_config.new_client_from_config(config_file=str(web_kubeconfig)),
        scheduler_name=portal_backend.scheduler_name,
    )
    monkeypatch.setattr(cluster_jobs, "get_backend", lambda: web)
    yield portal_backend
    web.api_client.close()


def _member(team_slug: str, queue_name: str) -> tuple[User, Any]:
    """A team (slug = its namespace), one leaf queue of it and a member who submits there."""
    team = factories.team(team_slug)
    department = factories.queue(f"dept-{secrets.token_hex(3)}", gpu_quota=16)
    queue = factories.queue(queue_name, parent=department, team=team, gpu_quota=16)
    user = User.objects.create_user(f"dev-{secrets.token_hex(3)}", password="x")
    Membership(team=team, user=user).save()
    return user, queue


def _pods(core: client.CoreV1Api, namespace: str, job: str) -> list[client.V1Pod]:
    pods = core.list_namespaced_pod(namespace, label_selector=f"kai.scheduler/portal-job={job}").items
    return sorted(pods, key=lambda p: p.metadata.name)


def _running(core: client.CoreV1Api, namespace: str, job: Job) -> bool:
    cycle()
    pods = _pods(core, namespace, job.name)
    job.refresh_from_db()
    return bool(pods) and all(p.status.phase == "Running" for p in pods) and job.state == "running"


def _form(queue: Any, name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "queue": queue.pk, "task_count": 1, "min_member": 1, "gpu_mode": "whole",
            "gpu_count": 1, "cpu_cores": "1", "memory_mib": 1024, "priority_class": "train",
            "run_time": "30m", "image": "busybox", **fields}  # fmt: skip


def _login(user: User) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def _api(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


# ----- whole GPUs, gangs, cancel ---------------------------------------------------------------


def test_form_submit_creates_a_gang_in_the_team_namespace_that_a_cycle_binds_together(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI: a pod group (``pod-group-name``) with ``batch-min-member: 2`` starts whole; the portal's
    job is that pod group (its ``cluster_key``), never a second job found in the cluster."""
    core = cluster.core
    nodes.kwok("form", gpus=8)
    cycle()  # the node reaches the portal, so the form's fit check sees it
    user, queue = _member(namespace, f"q-{namespace}")

    form = _form(queue, "train", task_count=2, min_member=2, command='sh -c "sleep 3600"')
    response = _login(user).post("/jobs/submit/", form)

    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(name="train")
    assert (job.namespace, job.cluster_key) == (namespace, f"{namespace}/PodGroup/train")
    pods = _pods(core, namespace, "train")
    assert [p.metadata.name for p in pods] == ["train-0", "train-1"]
    assert list(job.pods.order_by("index").values_list("name", flat=True)) == ["train-0", "train-1"]
    for pod in pods:
        assert pod.spec.scheduler_name == scheduler_name
        assert pod.metadata.labels["kai.scheduler/queue"] == queue.name
        assert pod.metadata.labels["kai.scheduler/portal-job-uid"] == str(job.uid)
        assert pod.metadata.annotations["pod-group-name"] == "train"
        assert pod.metadata.annotations["kai.scheduler/batch-min-member"] == "2"
        assert pod.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
        assert pod.spec.containers[0].image == "busybox"
        assert pod.spec.containers[0].command == ["sh", "-c", "sleep 3600"]

    wait_until(lambda: _running(core, namespace, job), "the gang bound and running", timeout=60, every=0.5)

    assert Job.objects.count() == 1  # the sync mapped the pods to the portal's row
    cycle()  # the rows follow the pods' phase one cycle later
    bound = {p.metadata.name: p.spec.node_name for p in _pods(core, namespace, "train")}
    rows = {p.name: (p.state, p.node.name if p.node else None) for p in job.pods.all()}
    assert rows == {name: ("running", node) for name, node in bound.items()}


def test_cancel_in_the_portal_deletes_the_pods_and_the_job_stays_cancelled(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, nodes: Nodes
) -> None:
    """KAI: a deleted pod group's pods free their GPUs; the portal's cancel is that delete, and
    the sync ends the job as cancelled, not as 'pod no longer exists'."""
    core = cluster.core
    nodes.kwok("cancel", gpus=8)
    user, queue = _member(namespace, f"q-{namespace}")
    api = _api(user)
    body = {"name": "serve", "queue": queue.name, "image": "busybox", "task_count": 2, "min_member": 2,
            "gpu_count": 2}  # fmt: skip
    created = api.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == 201, created.content
    job = Job.objects.get(uid=created.data["uid"])
    wait_until(lambda: _running(core, namespace, job), "the job running", timeout=60, every=0.5)

    cancelled = api.post(f"/api/v1/jobs/{job.uid}/cancel/")

    assert cancelled.status_code == 200, cancelled.content
    assert cancelled.data["state"] == "cancelled"
    assert all(p.metadata.deletion_timestamp for p in _pods(core, namespace, "serve"))

    def gone() -> bool:
        cycle()
        return not _pods(core, namespace, "serve")

    wait_until(gone, "the pods deleted from the cluster", timeout=60, every=0.5)
    cycle()
    job.refresh_from_db()
    assert job.state == "cancelled" and Job.objects.count() == 1
    reasons = {p.state: p.reason for p in job.pods.all()}
    assert list(reasons) == ["failed"] and reasons["failed"].startswith("Job cancelled by")


# ----- KAI's GPU-sharing examples through the YAML submit (issue 19) -------------------------------


def test_kai_s_gpu_sharing_examples_submitted_as_yaml_are_scheduled_on_the_cluster(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, nodes: Nodes, webhook: str,
    device_plugin: DevicePlugin,
) -> None:  # fmt: skip
    """KAI's docs/gpu-sharing examples, unchanged, through the portal's YAML page and API: the
    pods are the manifests' own pods (containers, images, commands, the annotations the webhook
    and the binder read), scheduled by the portal onto a shared GPU held by a reservation pod.
    Two examples share the name ``gpu-sharing``: the second goes in once the first is cancelled."""
    core = cluster.core
    node = nodes.kwok("kai-yaml", gpus=4, labels=GPU_MEMORY_LABEL)
    device_plugin.gpus[node] = 4
    user, _ = _member(namespace, "default-queue")  # the examples' queue, owned by the team
    browser, api = _login(user), _api(user)

    def submit_page(example: str) -> Job:
        text = kai_file(f"docs/gpu-sharing/{example}")
        response = browser.post("/jobs/submit/yaml/", {"manifest": text})
        assert response.status_code == 302, response.content.decode()[:3000]
        return Job.objects.get(uid=response["Location"].rstrip("/").split("/")[-1])

    def scheduled(*jobs: Job) -> bool:
        cycle()
        return all(all(p.spec.node_name for p in _pods(core, namespace, j.name)) for j in jobs)

    def check(job: Job, manifest: dict[str, Any]) -> client.V1Pod:
        [pod] = _pods(core, namespace, job.name)
        assert pod.metadata.name == f"{job.name}-0" and pod.spec.node_name == node
        assert [(c.name, c.image, c.command, c.args) for c in pod.spec.containers] == [
            (c["name"], c["image"], c.get("command"), c.get("args")) for c in manifest["spec"]["containers"]]
        for key, value in manifest["metadata"]["annotations"].items():
            assert pod.metadata.annotations[key] == value
        assert sharing.CONFIGMAP_ANNOTATION in pod.metadata.annotations  # the webhook mutated it
        wanted = manifest["metadata"]["annotations"].get("gpu-fraction-container-name")
        [gpu_container] = [c for c in pod.spec.containers if c.env]
        assert gpu_container.name == (wanted or manifest["spec"]["containers"][0]["name"])
        visible = _configmap(core, namespace, pod)["NVIDIA_VISIBLE_DEVICES"]
        assert _groups(pod) and visible.startswith(f"GPU-{node}-")
        return pod

    fraction = submit_page("gpu-sharing.yaml")
    other_text = kai_file("docs/gpu-sharing/gpu-sharing-non-default-container.yaml")
    response = api.post("/api/v1/jobs/manifest/", other_text, content_type="application/yaml")
    assert response.status_code == 201, response.content
    other = Job.objects.get(uid=response.data["uid"])
    wait_until(lambda: scheduled(fraction, other), "both examples scheduled", timeout=120, every=0.5)

    half = check(fraction, yaml.safe_load(kai_file("docs/gpu-sharing/gpu-sharing.yaml")))
    assert _configmap(core, namespace, half)["GPU_PORTION"] == "0.5"
    check(other, yaml.safe_load(other_text))
    wait_until(lambda: _running(core, namespace, fraction), "the portal job running", timeout=30)

    # gpu-memory.yaml is also named gpu-sharing: cancel the first (its pod goes), then submit it.
    assert browser.post(f"/jobs/{fraction.uid}/cancel/").status_code == 302
    wait_until(lambda: not _pods(core, namespace, fraction.name), "the first gpu-sharing pod gone")
    memory = submit_page("gpu-memory.yaml")
    assert memory.pk != fraction.pk and memory.cluster_key == fraction.cluster_key
    wait_until(lambda: scheduled(memory), "the gpu-memory example scheduled", timeout=120, every=0.5)
    pod = check(memory, yaml.safe_load(kai_file("docs/gpu-sharing/gpu-memory.yaml")))
    assert _configmap(core, namespace, pod)["CUDA_DEVICE_MEMORY_LIMIT"] == "2000m"
    wait_until(lambda: _running(core, namespace, memory), "the gpu-memory job running", timeout=30)

    fraction.refresh_from_db()
    assert fraction.state == "cancelled"  # the new job's pod went to the new row, not the cancelled one
    assert sorted(Job.objects.values_list("name", "state")) == [
        ("gpu-sharing", "cancelled"), ("gpu-sharing", "running"), ("gpu-sharing-non-default", "running")]


# ----- the user's pod spec; refusals -----------------------------------------------------------


def test_a_batch_job_manifest_becomes_its_template_s_pods(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI: a batch Job's pods are one pod group with the Job's ``batch-min-member``; the pods are
    the user's template (env, tolerations, nodeSelector, its own labels and annotations), with
    the scheduler name set to the portal's."""
    core = cluster.core
    nodes.kwok("tmpl", gpus=8, labels={"team": "vision"})
    user, queue = _member(namespace, f"q-{namespace}")
    manifest = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "resnet", "labels": {"kai.scheduler/queue": queue.name},
                     "annotations": {"kai.scheduler/batch-min-member": "2"}},
        "spec": {"parallelism": 2, "template": {
            "metadata": {"labels": {"app": "resnet"}, "annotations": {"example.com/owner": "vision"}},
            "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never",
                     "nodeSelector": {"team": "vision"},
                     "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                     "env": [{"name": "EPOCHS", "value": "3"}],
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}},
    }  # fmt: skip

    response = _api(user).post("/api/v1/jobs/manifest/", manifest, format="json")

    assert response.status_code == 201, response.content
    job = Job.objects.get(uid=response.data["uid"])
    pods = _pods(core, namespace, "resnet")
    assert [p.metadata.name for p in pods] == ["resnet-0", "resnet-1"]
    for pod in pods:
        assert pod.spec.scheduler_name == scheduler_name
        assert pod.spec.node_selector == {"team": "vision"}
        assert [(t.key, t.operator, t.effect) for t in pod.spec.tolerations if t.key == "gpu"] == [
            ("gpu", "Exists", "NoSchedule")]
        [container] = pod.spec.containers
        assert (container.name, container.env[0].name, container.env[0].value) == ("trainer", "EPOCHS", "3")
        assert pod.metadata.labels["app"] == "resnet"
        assert pod.metadata.labels["kai.scheduler/queue"] == queue.name
        assert pod.metadata.annotations["example.com/owner"] == "vision"
        assert pod.metadata.annotations["kai.scheduler/batch-min-member"] == "2"
    wait_until(lambda: _running(core, namespace, job), "the Job's pods running", timeout=60, every=0.5)
    assert Job.objects.count() == 1


def test_a_missing_team_namespace_is_refused_naming_it_and_nothing_is_saved(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, settings: Any
) -> None:
    """The API server's admission refuses a pod in a namespace that does not exist: the form, the
    YAML page and the API say which namespace, and no job row is left. With
    JOB_NAMESPACE_CREATE (and the optional RBAC rule) the portal creates it instead."""
    missing = f"{namespace[:40]}-absent"
    user, queue = _member(missing, f"q-{namespace}")
    api, browser = _api(user), _login(user)

    lost = {"name": "lost", "queue": queue.name, "image": "busybox", "gpu_count": 1}
    response = api.post("/api/v1/jobs/", lost, format="json")
    assert response.status_code == 400, response.content
    assert f"Namespace '{missing}' does not exist" in response.data["detail"]

    page = browser.post("/jobs/submit/", {**_form(queue, "lost"), "confirmed": "1"})
    assert page.status_code == 200
    assert f"Namespace '{missing}' does not exist" in page.context["form"].non_field_errors()[0]

    text = yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "lost", "labels": {"kai.scheduler/queue": queue.name}},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]}})  # fmt: skip
    page = browser.post("/jobs/submit/yaml/", {"manifest": text})
    assert page.status_code == 200 and f"Namespace '{missing}' does not exist" in page.context["problems"][0]
    assert not Job.objects.exists()

    # Allowed to create it: the same submission goes through, into the new namespace.
    settings.JOB_NAMESPACE_CREATE = True
    cluster.kubectl("apply", "-f", str(OPTIONAL_RBAC))
    try:

        def created() -> bool:
            # The ServiceAccount admission plugin refuses pods until the namespace's default account exists.
            answer = api.post("/api/v1/jobs/", {**lost, "name": "found"}, format="json")
            return answer.status_code == 201

        wait_until(created, "the job accepted in a namespace the portal created", timeout=60, every=1)
        assert Job.objects.get(name="found").namespace == missing
        assert [p.metadata.name for p in _pods(cluster.core, missing, "found")] == ["found-0"]
    finally:
        cluster.kubectl("delete", "-f", str(OPTIONAL_RBAC))
        try:
            cluster.core.delete_namespace(missing, propagation_policy="Background")
        except ApiException as error:
            if error.status != 404:
                raise


def test_pods_of_a_submission_not_yet_committed_wait_for_their_row_then_are_adopted(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A submission creates its pods before its transaction commits: a cycle in between must not
    make them a second job (KAI would see one pod group; so does the portal). Pods whose row never
    comes (the commit failed, and so did the cleanup) are adopted like any pod group after the grace."""
    _member(namespace, f"q-{namespace}")
    labels = {"kai.scheduler/queue": f"q-{namespace}", "kai.scheduler/portal-job-uid": str(uuid.uuid4())}
    cluster.core.create_namespaced_pod(namespace, pod_body(
        "orphan-0", scheduler_name, labels=labels, annotations={"pod-group-name": "orphan"}))  # fmt: skip

    def observed() -> bool:
        cycle()
        return (namespace, "orphan-0") in portal.observe().pods

    wait_until(observed, "the pod observed by a cycle")
    assert not Job.objects.filter(name="orphan").exists()

    monkeypatch.setattr(sync, "UNCLAIMED_GRACE", timedelta(0))
    cycle()
    [adopted] = Job.objects.filter(name="orphan")
    assert adopted.cluster_key == f"{namespace}/PodGroup/orphan" and adopted.namespace == namespace


def test_a_job_submitted_while_a_cycle_runs_is_neither_gone_nor_bound_blind(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, nodes: Nodes, webhook: str,
    device_plugin: DevicePlugin, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A submission landing between a cycle's observation and its sync: its pods are not in the
    observation, so that cycle must neither end them as gone nor bind the shared-GPU pod before
    its annotations are seen (KAI reserves a shared GPU only for a pod it has read); the next
    cycle schedules it with its reservation pod and ConfigMap."""
    core = cluster.core
    node = nodes.kwok("race", gpus=4, labels=GPU_MEMORY_LABEL)
    device_plugin.gpus[node] = 4
    user, queue = _member(namespace, f"q-{namespace}")
    cycle()
    observe = portal.observe
    submitted: list[Job] = []

    def observe_then_submit() -> Any:
        state = observe()
        if not submitted:
            made = _api(user).post("/api/v1/jobs/", {"name": "late", "queue": queue.name, "image": "busybox",
                                                     "gpu_fraction": "0.5"}, format="json")  # fmt: skip
            assert made.status_code == 201, made.content
            submitted.append(Job.objects.get(uid=made.data["uid"]))
        return state

    monkeypatch.setattr(portal, "observe", observe_then_submit)
    cycle()
    [job] = submitted
    job.refresh_from_db()
    [row] = job.pods.all()
    assert (job.state, row.state) == ("pending", "pending") and "no longer exists" not in row.reason
    [pod] = _pods(core, namespace, "late")
    assert pod.spec.node_name is None

    monkeypatch.setattr(portal, "observe", observe)
    wait_until(lambda: _running(core, namespace, job), "the late job running", timeout=90, every=0.5)
    [pod] = _pods(core, namespace, "late")
    assert _configmap(core, namespace, pod)["GPU_PORTION"] == "0.5"


def test_a_job_applied_to_the_cluster_is_not_cancelled_from_the_portal(
    cluster: Cluster, portal: KubernetesBackend, namespace: str, scheduler_name: str, nodes: Nodes
) -> None:
    """KAI: pods applied with kubectl belong to their owner; the portal shows them as a job but
    does not delete them (a controller would re-create them): the cancel says so and changes
    nothing."""
    nodes.kwok("kubectl", gpus=8)
    _, queue = _member(namespace, f"q-{namespace}")
    admin = User.objects.create_superuser(f"root-{secrets.token_hex(3)}", password="x")
    cluster.core.create_namespaced_pod(namespace, pod_body(
        "applied", scheduler_name, gpus=1, labels={"kai.scheduler/queue": queue.name}))  # fmt: skip
    wait_until(lambda: cycle() or Job.objects.filter(name="applied", state="running").exists(),
               "the applied pod running as a job")  # fmt: skip
    job = Job.objects.get(name="applied")

    refused = _api(admin).post(f"/api/v1/jobs/{job.uid}/cancel/")

    assert refused.status_code == 409, refused.content
    assert "created in the cluster" in refused.data["detail"] and namespace in refused.data["detail"]
    job.refresh_from_db()
    assert job.state == "running"
    assert cluster.core.read_namespaced_pod("applied", namespace).metadata.deletion_timestamp is None
