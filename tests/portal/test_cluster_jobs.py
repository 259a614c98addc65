"""Portal jobs and the cluster (workloads/cluster_jobs.py) without a control plane.

Simulated mode (the default, ``make run``) never touches a cluster backend from a request;
kubernetes mode picks each job's namespace by the configured rule, refuses what would escape
it before calling the cluster, and answers 503 with nothing saved (or changed, for a cancel)
when the API server cannot be reached. Creating pods on a real API server is the cluster
tier's (tests/cluster/test_portal_submits.py).
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client
from rest_framework.test import APIClient

from kai_portal.accounts.models import User
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.teams.models import Membership
from kai_portal.workloads import cluster_jobs, configured_backend, lifecycle
from kai_portal.workloads.manifests import ManifestError, submit_manifest
from kai_portal.workloads.models import Job
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def team_queue(db: Any) -> Any:
    team = factories.team("Vision_Lab")
    department = factories.queue("research", gpu_quota=8, team=team)
    return factories.queue("vision", parent=department, gpu_quota=8)  # its team is its parent's


@pytest.fixture
def member(team_queue: Any) -> User:
    user = User.objects.create_user("dev", password="x")
    Membership(team=team_queue.parent.team, user=user).save()
    team_queue.team = team_queue.parent.team
    team_queue.save()
    return user


def _manifest(queue: str, **spec: Any) -> str:
    metadata = {"name": "train", "labels": {"kai.scheduler/queue": queue}}
    containers = [{"name": "main", "image": "busybox"}]
    return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                           "spec": {"containers": containers, **spec}})  # fmt: skip


def test_simulated_mode_never_calls_a_cluster_backend(team_queue: Any, member: User, settings: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`make run`: form, API and YAML submissions and cancel work on rows alone."""
    settings.CLUSTER_BACKEND = "simulated"

    def no_backend() -> None:
        raise AssertionError("a request called the cluster backend in simulated mode")

    monkeypatch.setattr(cluster_jobs, "get_backend", no_backend)
    api = APIClient()
    api.force_authenticate(member)
    made = api.post("/api/v1/jobs/", {"name": "api-job", "queue": "vision", "gpu_count": 1}, format="json")
    assert made.status_code == 201, made.content
    job, created = submit_manifest(_manifest("vision"), member)
    assert created
    for row in Job.objects.all():
        assert (row.namespace, row.cluster_key) == ("", "")
    cancelled = api.post(f"/api/v1/jobs/{made.data['uid']}/cancel/")
    assert cancelled.status_code == 200 and cancelled.data["state"] == "cancelled"
    lifecycle.cancel_job(job)
    assert set(job.pods.values_list("state", flat=True)) == {"failed"}


@pytest.mark.parametrize(
    ("mode", "prefix", "expected"),
    [("team", "", "vision-lab"), ("team", "runai-", "runai-vision-lab"), ("queue", "", "vision"),
     ("fixed", "ignored-", "shared-jobs")],
)  # fmt: skip
def test_the_namespace_follows_the_configured_rule(team_queue: Any, settings: Any, mode: str, prefix: str,
                                                   expected: str) -> None:  # fmt: skip
    """A team's slug (inherited from the parent queue's team, made a DNS label), the queue's name,
    or one fixed namespace; the cluster key is the sync's pod-group key in it."""
    settings.CLUSTER_BACKEND = "kubernetes"
    settings.JOB_NAMESPACE_MODE, settings.JOB_NAMESPACE_PREFIX = mode, prefix
    settings.JOB_NAMESPACE = "shared-jobs"
    job = Job(name="train", queue=team_queue, image="busybox")
    cluster_jobs.place(job)
    assert (job.namespace, job.cluster_key) == (expected, f"{expected}/PodGroup/train")


def test_a_queue_without_a_team_has_no_namespace_in_team_mode(db: Any, settings: Any) -> None:
    settings.CLUSTER_BACKEND, settings.JOB_NAMESPACE_MODE = "kubernetes", "team"
    queue = factories.queue("orphan", gpu_quota=1)
    with pytest.raises(cluster_jobs.ClusterRefused, match="belongs to no team") as refused:
        cluster_jobs.place(Job(name="train", queue=queue, image="busybox"))
    assert refused.value.path == "queue"


def test_a_manifest_cannot_leave_its_team_namespace_or_pick_its_node(member: User, settings: Any) -> None:
    """Refused before the cluster is called, at the manifest path at fault, nothing saved."""
    settings.CLUSTER_BACKEND, settings.JOB_NAMESPACE_MODE = "kubernetes", "team"
    elsewhere = yaml.safe_load(_manifest("vision"))
    elsewhere["metadata"]["namespace"] = "kube-system"
    with pytest.raises(ManifestError) as refused:
        submit_manifest(elsewhere, member)
    assert refused.value.path == "metadata.namespace" and "'vision-lab'" in refused.value.message
    with pytest.raises(ManifestError) as pinned:
        submit_manifest(_manifest("vision", nodeName="gpu-node-1"), member)
    assert pinned.value.path == "spec.nodeName"
    assert not Job.objects.exists()


def test_an_unreachable_cluster_is_a_503_and_nothing_is_saved_or_cancelled(
    team_queue: Any, member: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kubernetes mode with the API server down (a closed loopback port): the submission is refused
    with 503 and leaves no job; a cancel is refused with 503 and the job stays as it was."""
    settings.CLUSTER_BACKEND, settings.JOB_NAMESPACE_MODE = "kubernetes", "team"
    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing listens
    configuration.retries = 0
    down = KubernetesBackend(api_client=client.ApiClient(configuration), scheduler_name="kai-test")
    monkeypatch.setattr(configured_backend, "_kubernetes_backend", down)
    api = APIClient()
    api.force_authenticate(member)

    no_image = api.post("/api/v1/jobs/", {"name": "train", "queue": "vision", "gpu_count": 1}, format="json")
    assert no_image.status_code == 400 and no_image.data["path"] == "image"
    assert "image is required" in no_image.data["detail"]
    job_body = {"name": "train", "queue": "vision", "image": "busybox", "gpu_count": 1}
    refused = api.post("/api/v1/jobs/", job_body, format="json")

    assert refused.status_code == 503, refused.content
    assert "could not be reached" in refused.data["detail"] and not Job.objects.exists()
    yaml_refused = api.post("/api/v1/jobs/manifest/", _manifest("vision"), content_type="application/yaml")
    assert yaml_refused.status_code == 503 and not Job.objects.exists()

    # A job the cluster took earlier (its key set): cancelling it needs the cluster too.
    settings.CLUSTER_BACKEND = "simulated"
    job = factories.job(team_queue, submitter=member)
    Job.objects.filter(pk=job.pk).update(namespace="vision-lab", cluster_key="vision-lab/PodGroup/train")
    settings.CLUSTER_BACKEND = "kubernetes"
    cancel = api.post(f"/api/v1/jobs/{job.uid}/cancel/")
    assert cancel.status_code == 503, cancel.content
    assert "not cancelled" in cancel.data["detail"]
    job.refresh_from_db()
    assert job.state == "pending" and set(job.pods.values_list("state", flat=True)) == {"pending"}
