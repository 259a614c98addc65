"""Bounds on what a member, a team and a queue may have pending (issue 26).

Issue 26: 60 jobs of 10,000 tasks from one member (45 s of API calls) made every cycle hit
Celery's hard limit. A submission that would cross a bound is refused before anything is
saved, on every path (API, YAML, form), naming the bound, the count now and the limit; a
portal admin raises a bound, audited; concurrent submissions cannot cross one together.
"""

from __future__ import annotations

import pytest
from django.test import Client

from kai_portal.audit.models import AuditEntry
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job, Pod
from tests.portal.concurrency import at_once
from tests.portal.web.api_world import World


@pytest.fixture(autouse=True)
def small_bounds(settings) -> None:  # type: ignore[no-untyped-def]
    settings.MAX_PENDING_TASKS_PER_MEMBER = 30
    settings.MAX_PENDING_TASKS_PER_TEAM = 50
    settings.MAX_PENDING_TASKS_PER_QUEUE = 1000


def _post_job(world: World, persona: str, name: str, tasks: int, queue: str = "ml-train") -> object:
    return world.client(persona).post(
        "/api/v1/jobs/",
        {"name": name, "queue": queue, "gpu_count": 1, "task_count": tasks, "min_member": 1},
        format="json",
    )


def test_the_api_refuses_a_job_past_the_members_bound_naming_bound_count_and_limit(world: World) -> None:
    # The world's member already has one pending task ("ml-by-member").
    assert _post_job(world, "member", "first", 20).status_code == 201  # 21 pending
    jobs, pods = Job.objects.count(), Pod.objects.count()

    response = _post_job(world, "member", "second", 10)  # 31 > 30

    assert response.status_code == 400, response.content
    message = " ".join(response.json()["task_count"])
    assert "member 'ml-dev' in team 'ml' has 21 pending" in message, message
    assert "would make 31, over the bound of 30 (MAX_PENDING_TASKS_PER_MEMBER)" in message, message
    assert (Job.objects.count(), Pod.objects.count()) == (jobs, pods)  # nothing saved
    assert _post_job(world, "member", "second", 9).status_code == 201  # exactly at the bound


def test_tasks_that_started_no_longer_count(world: World) -> None:
    job = Job.objects.get(name="ml-by-member")
    assert _post_job(world, "member", "big", 29).status_code == 201
    assert _post_job(world, "member", "more", 1).status_code == 400
    Pod.objects.filter(job=job).update(state="running")
    assert _post_job(world, "member", "more", 1).status_code == 201


def test_the_teams_bound_counts_every_member(world: World) -> None:
    # ml has 2 pending (one each for member and team admin); each member stays within 30.
    assert _post_job(world, "member", "a", 28).status_code == 201  # team: 30
    response = _post_job(world, "team_admin", "b", 21)  # team: 51 > 50

    assert response.status_code == 400
    message = " ".join(response.json()["task_count"])
    assert "team 'ml' has 30 pending" in message and "bound of 50 (MAX_PENDING_TASKS_PER_TEAM)" in message
    assert not Job.objects.filter(name="b").exists()
    assert _post_job(world, "team_admin", "b", 20).status_code == 201  # team: 50


def test_a_queues_own_bound_is_named_and_other_queues_are_not_affected(world: World) -> None:
    queue = Queue.objects.get(name="ml-train")
    queue.max_pending_tasks = 5
    queue.save()
    response = _post_job(world, "member", "q", 5)  # ml-train holds 2 pending: 7 > 5

    assert response.status_code == 400
    message = " ".join(response.json()["task_count"])
    assert "queue 'ml-train' has 2 pending" in message and "bound of 5 (the queue's bound)" in message
    assert _post_job(world, "member", "q", 5, queue="ml-spare").status_code == 201


def test_a_yaml_manifest_past_the_bound_is_refused_with_its_path(world: World) -> None:
    manifest = """apiVersion: batch/v1
kind: Job
metadata: {name: many, labels: {kai.scheduler/queue: ml-train}}
spec:
  parallelism: 40
  completions: 40
  template:
    spec:
      containers:
        - name: main
          resources: {limits: {nvidia.com/gpu: 1}}
"""
    response = world.client("member").post(
        "/api/v1/jobs/manifest/", manifest, content_type="application/yaml"
    )

    assert response.status_code == 400, response.content
    body = response.json()
    assert "over the bound of 30" in body["message"] and "has 1 pending" in body["message"], body
    assert not Job.objects.filter(name="many").exists()


def test_the_form_refuses_on_the_task_count_field(world: World) -> None:
    client = Client()
    client.force_login(world.users["member"])
    form = {"name": "f", "queue": world.objects["ml_q"].pk, "task_count": "40", "min_member": "1",
            "gpu_mode": "whole", "gpu_count": "1", "cpu_cores": "1", "memory_mib": "0",
            "priority_class": "train", "gpu_fraction_devices": "1", "confirmed": "1"}  # fmt: skip

    response = client.post("/jobs/submit/", form)

    assert response.status_code == 200
    errors = " ".join(response.context["form"].errors.get("task_count", []))
    assert "over the bound of 30" in errors, response.context["form"].errors
    assert not Job.objects.filter(name="f").exists()


def test_a_portal_admin_raises_a_teams_per_member_bound_audited_and_a_team_admin_cannot(world: World) -> None:
    denied = world.client("team_admin").patch(
        "/api/v1/teams/ml/", {"max_pending_tasks_per_member": 1000}, format="json"
    )
    assert denied.status_code == 200 and denied.json()["max_pending_tasks_per_member"] is None  # read-only
    assert _post_job(world, "member", "big", 40).status_code == 400

    raised = world.client("admin").patch(
        "/api/v1/teams/ml/", {"max_pending_tasks_per_member": 1000, "max_pending_tasks": 1000}, format="json"
    )

    assert raised.status_code == 200, raised.content
    entry = AuditEntry.objects.filter(action="update", content_type__model="team").latest("pk")
    assert entry.actor_name == "root"
    assert (
        entry.after["max_pending_tasks_per_member"] == 1000
        and entry.before["max_pending_tasks_per_member"] is None
    )
    assert _post_job(world, "member", "big", 40).status_code == 201


def test_a_bound_below_one_is_refused_on_the_field(world: World) -> None:
    response = world.client("admin").patch(
        "/api/v1/queues/ml-train/", {"max_pending_tasks": 0}, format="json"
    )
    assert response.status_code == 400
    assert "max_pending_tasks" in response.json()


@pytest.mark.postgres_only("row locks: SQLite serialises every write anyway")
@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_submissions_never_cross_the_members_bound_together(world: World) -> None:
    token = world.secrets["member"]

    def submit(i: int) -> int:
        client = World(secrets={"member": token}).client("member")
        return client.post(  # type: ignore[no-any-return]
            "/api/v1/jobs/",
            {"name": f"c{i}", "queue": "ml-train" if i % 2 else "ml-spare", "gpu_count": 1, "task_count": 7},
            format="json",
        ).status_code

    codes = at_once(8, submit)

    # 1 pending + 4 x 7 = 29 <= 30; a fifth would make 36.
    assert sorted(codes) == [201] * 4 + [400] * 4, codes
    member = world.users["member"]
    assert Pod.objects.filter(job__submitter=member, state="pending").count() == 29




def test_a_team_less_child_queue_counts_toward_its_ancestors_team(world: World) -> None:
    """A queue without a team of its own belongs to its nearest ancestor's team, as for the pod
    policy and the namespaces: its pending tasks count toward that team's bounds."""
    Queue.objects.create(name="ml-sub", parent=Queue.objects.get(name="ml-spare"))  # no team of its own
    assert _post_job(world, "admin", "below", 28, queue="ml-sub").status_code == 201  # team ml: 30

    response = _post_job(world, "team_admin", "over", 21)  # team ml: 51 > 50
    assert response.status_code == 400, response.content
    assert "team 'ml' has 30 pending" in " ".join(response.json()["task_count"])
    response = _post_job(world, "admin", "mine-over", 3, queue="ml-sub")  # admin's own in ml: 31 > 30
    assert response.status_code == 400, response.content
    assert "member 'root' in team 'ml' has 28 pending" in " ".join(response.json()["task_count"])
    assert not Job.objects.filter(name__in=["over", "mine-over"]).exists()
