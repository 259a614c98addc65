"""Job names are Kubernetes names (DNS-1123 labels, as queue names are) and unique among a queue's
live jobs: in the submit form, the REST API and a YAML manifest."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from kai_portal.workloads.lifecycle import cancel_job
from kai_portal.workloads.manifests import ManifestError, submit_manifest
from kai_portal.workloads.models import Job
from tests.portal import factories

BAD_NAMES = ["<script>", "trainé", "x" * 64, "Train", "-train", "train-", "a/b", "a.b"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_model_refuses_names_that_are_not_kubernetes_labels(leaf: Any, name: str) -> None:
    with pytest.raises(ValidationError) as exc:
        factories.job(leaf, name)
    assert "name" in exc.value.message_dict
    assert not Job.objects.exists()


def test_a_63_character_name_is_fine(leaf: Any) -> None:
    assert factories.job(leaf, "a" * 63).name == "a" * 63


def test_duplicate_live_name_in_a_queue_is_refused_but_a_finished_one_may_be_reused(
    leaf: Any, portal_admin: Any
) -> None:
    first = factories.job(leaf, "train")
    with pytest.raises(ValidationError) as exc:
        factories.job(leaf, "train")
    assert "already has a pending or running job named 'train'" in exc.value.message_dict["name"][0]
    cancel_job(first, actor=portal_admin)
    assert factories.job(leaf, "train").pk != first.pk


def test_same_name_in_another_queue_is_fine(leaf: Any, department: Any) -> None:
    other = factories.queue("other", parent=department, gpu_quota=1)
    factories.job(leaf, "train")
    factories.job(other, "train")
    assert Job.objects.filter(name="train").count() == 2


def _form(queue: Any, name: str) -> dict[str, Any]:
    return {"name": name, "queue": queue.pk, "task_count": 1, "min_member": 1, "gpu_mode": "whole",
            "gpu_count": 1, "cpu_cores": "1", "memory_mib": 0, "priority_class": "train",
            "run_time": "30m"}  # fmt: skip


def test_submit_form_shows_name_errors_inline(world: dict, client_for: Any) -> None:
    client = client_for("member")
    queue = world["queues"]["alpha"]
    response = client.post("/jobs/submit/", _form(queue, "<script>"))
    assert response.status_code == 200
    assert "Kubernetes names" in response.context["form"].errors["name"][0]
    response = client.post("/jobs/submit/", _form(queue, "alpha-job"))
    assert response.status_code == 200
    assert (
        "already has a pending or running job named 'alpha-job'" in response.context["form"].errors["name"][0]
    )
    assert Job.objects.filter(name="alpha-job").count() == 1


def test_api_refuses_bad_and_duplicate_names_with_400(world: dict, client_for: Any) -> None:
    client = client_for("member")
    body = {"name": "x" * 300, "queue": "alpha-train", "gpu_count": 1}
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400 and "name" in response.json(), response.content
    body["name"] = "alpha-job"
    response = client.post("/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400 and "already has" in str(response.json()), response.content


def test_manifest_names_the_metadata_name_path(world: dict) -> None:
    manifest = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "Bad_Name", "labels": {"kai.scheduler/queue": "alpha-train"}},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }  # fmt: skip
    with pytest.raises(ManifestError) as exc:
        submit_manifest(manifest, world["users"]["member"])
    assert exc.value.path == "metadata.name" and "Kubernetes names" in exc.value.message
