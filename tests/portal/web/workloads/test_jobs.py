"""Job submission (form and YAML), the job page with its timeline, cancel, and the htmx fragments."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from kai_portal.history.models import Decision, JobMessage, SchedulingCycle
from kai_portal.workloads.models import Job

FORM = {
    "name": "notebook",
    "task_count": "1",
    "min_member": "1",
    "gpu_mode": "fraction",
    "gpu_fraction": "0.5",
    "gpu_fraction_devices": "1",
    "cpu_cores": "2",
    "memory_mib": "4096",
    "priority_class": "train",
    "run_time": "30m",
    "image": "pytorch:24.05",
    "command": "python train.py",
}


def test_member_submits_a_fractional_gpu_job(world: dict, client_for: Any) -> None:
    data = {**FORM, "queue": world["queues"]["alpha"].pk}
    response = client_for("member").post("/jobs/submit/", data)
    job = Job.objects.get(name="notebook")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.uid}/"
    assert job.gpu_fraction == 0.5 and job.gpu_count == 0 and job.gpu_memory_mib is None
    assert job.cpu_millicores == 2000 and job.duration.total_seconds() == 1800
    assert job.submitter == world["users"]["member"] and job.pods.count() == 1


def test_form_errors_are_shown_and_nothing_is_saved(world: dict, client_for: Any) -> None:
    data = {**FORM, "queue": world["queues"]["alpha"].pk, "gpu_fraction": "1.5", "min_member": "3",
            "run_time": "soon"}  # fmt: skip
    response = client_for("member").post("/jobs/submit/", data)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "run_time" in errors and "gpu_fraction" in errors or "min_member" in errors
    assert "Nothing was saved" in response.content.decode()
    assert not Job.objects.filter(name="notebook").exists()


def test_model_rules_land_on_their_fields(world: dict, client_for: Any) -> None:
    data = {**FORM, "queue": world["queues"]["alpha"].pk, "gpu_mode": "whole", "gpu_count": "1",
            "task_count": "2", "min_member": "3"}  # fmt: skip
    response = client_for("member").post("/jobs/submit/", data)
    assert (
        "Gang minimum (3) cannot be more than the number of tasks (2)."
        in response.context["form"].errors["min_member"]
    )
    assert not Job.objects.filter(name="notebook").exists()


def test_member_cannot_submit_to_another_teams_queue_or_a_department(world: dict, client_for: Any) -> None:
    for queue in (world["queues"]["beta"], world["queues"]["research"]):
        response = client_for("member").post("/jobs/submit/", {**FORM, "queue": queue.pk})
        assert "queue" in response.context["form"].errors
    assert not Job.objects.filter(name="notebook").exists()


def test_submit_from_yaml(world: dict, client_for: Any) -> None:
    manifest = """
apiVersion: v1
kind: Pod
metadata:
  name: yaml-notebook
  labels: {kai.scheduler/queue: alpha-train}
  annotations: {gpu-fraction: "0.25"}
spec:
  containers:
    - name: main
      image: pytorch
      resources: {requests: {cpu: 500m, memory: 1Gi}}
"""
    response = client_for("member").post("/jobs/submit/yaml/", {"manifest": manifest})
    job = Job.objects.get(name="yaml-notebook")
    assert response.status_code == 302 and job.gpu_fraction == 0.25 and job.cpu_millicores == 500


def test_yaml_for_another_teams_queue_is_refused_with_the_path(world: dict, client_for: Any) -> None:
    manifest = "kind: Pod\nmetadata: {name: x, labels: {kai.scheduler/queue: beta-train}}\n"
    manifest += "spec: {containers: [{name: c, image: i}]}\n"
    response = client_for("member").post("/jobs/submit/yaml/", {"manifest": manifest})
    assert response.status_code == 200
    assert "kai.scheduler/queue" in response.content.decode()
    assert not Job.objects.filter(name="x").exists()


def _decide(job: Job, kind: str, **fields: Any) -> SchedulingCycle:
    cycle = SchedulingCycle.objects.create(started_at=timezone.now(), status="succeeded", duration_ms=3)
    for pod in job.pods.all():
        Decision.objects.create(cycle=cycle, pod=pod, job=job, kind=kind, **fields)
    return cycle


def test_job_page_shows_pending_reason_and_folds_repeated_cycles(world: dict, client_for: Any) -> None:
    job = world["jobs"]["beta"]
    message = "beta-train quota has reached the allowable limit of GPUs. Limit is 4 GPUs"
    for _ in range(3):
        cycle = _decide(job, "unschedulable", reason="OverLimit", message=message)
    JobMessage.objects.create(cycle=cycle, job=job, reason="OverLimit", message=message)
    response = client_for("outsider").get(f"/jobs/{job.uid}/")
    html = response.content.decode()
    assert "Why it is still pending" in html and "OverLimit" in html and "beta-train quota" in html
    assert len(response.context["timeline"]) == 1 and response.context["timeline"][0].cycles == 3


def test_timeline_shows_the_reason_code_only_when_it_adds_to_the_kind(world: dict, client_for: Any) -> None:
    job = world["jobs"]["beta"]
    _decide(job, "unschedulable", reason="Unschedulable", message="no nodes with enough GPUs")
    _decide(job, "unschedulable", reason="OverLimit", message="beta-train quota is at its limit")
    html = client_for("outsider").get(f"/jobs/{job.uid}/").content.decode()
    timeline = html.split('data-testid="timeline"', 1)[1].split("</ol>", 1)[0]
    newer, older = timeline.split("<li", 2)[1:]
    assert "OverLimit" in newer and newer.count("Unschedulable") == 1  # kind badge, then the differing code
    assert older.count("Unschedulable") == 1  # the code repeats the kind: badge only


def test_eviction_names_the_evictor_only_as_far_as_the_user_may_see(world: dict, client_for: Any) -> None:
    victim, evictor = world["jobs"]["alpha"], world["jobs"]["beta"]
    _decide(victim, "evicted", action="reclaim", evictor_job=evictor, evictor_queue=evictor.queue,
            message="Pod was preempted by workload beta-job.")  # fmt: skip
    html = client_for("member").get(f"/jobs/{victim.uid}/").content.decode()
    assert "Evicted" in html and "beta-job" in html and "beta-train" in html
    assert f"/jobs/{evictor.uid}/" not in html  # named, but no link into another team's job
    assert f"/jobs/{evictor.uid}/" in client_for("admin").get(f"/jobs/{victim.uid}/").content.decode()


def test_htmx_requests_get_only_the_live_fragment(world: dict, client_for: Any) -> None:
    job = world["jobs"]["alpha"]
    response = client_for("member").get(f"/jobs/{job.uid}/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html and 'data-testid="pod-table"' in html
    table = client_for("member").get("/jobs/?state=pending", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in table and "alpha-job" in table


def test_member_cancels_own_job_but_not_a_teammates(
    world: dict, client_for: Any, django_user_model: Any
) -> None:
    job = world["jobs"]["alpha"]
    response = client_for("member").post(f"/jobs/{job.uid}/cancel/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert client_for("outsider").post(f"/jobs/{job.uid}/cancel/").status_code == 404


def test_terminal_job_fragment_stops_htmx_polling(world: dict, client_for: Any) -> None:
    job = world["jobs"]["alpha"]
    client_for("member").post(f"/jobs/{job.uid}/cancel/")
    assert client_for("member").get(f"/jobs/{job.uid}/", HTTP_HX_REQUEST="true").status_code == 286


def test_job_list_filters_by_team_queue_and_state(world: dict, client_for: Any) -> None:
    admin = client_for("admin")
    assert "beta-job" not in admin.get("/jobs/?team=alpha").content.decode()
    assert "alpha-job" not in admin.get("/jobs/?queue=beta-train").content.decode()
    assert "alpha-job" not in admin.get("/jobs/?state=running").content.decode()


def test_job_page_shows_cpu_per_task_in_cores_as_submitted(world: dict, client_for: Any) -> None:
    """Half a core was shown as "0 cores (500m)" and 1.5 cores as "2 cores" (a rounding template tag)."""
    client = client_for("member")
    for cores, shown in [("0.5", "0.5 cores (500m)"), ("1", "1 core (1000m)"), ("1.5", "1.5 cores (1500m)"),
                         ("0.01", "0.01 cores (10m)")]:  # fmt: skip
        name = f"cpu-{cores.replace('.', '-')}"
        data = {**FORM, "name": name, "queue": world["queues"]["alpha"].pk, "cpu_cores": cores}
        assert client.post("/jobs/submit/", data).status_code == 302
        page = client.get(f"/jobs/{Job.objects.get(name=name).uid}/").content.decode()
        assert f"· {shown} · 4096 MiB" in page, (cores, page[page.find("Per task") :][:300])
