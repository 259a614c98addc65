"""The one access rule per model: who sees which team, queue and job."""

from __future__ import annotations

import pytest

from kai_portal.accounts.models import User
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Membership, Team
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict:
    ml, cv = factories.team("ml"), factories.team("cv")
    research = factories.queue("research", gpu_quota=8)
    ml_q = factories.queue("ml-train", parent=research, team=ml, gpu_quota=4)
    cv_q = factories.queue("cv-train", parent=research, team=cv, gpu_quota=4)
    users = {
        "admin": User.objects.create_superuser("root", password="x"),
        "ml_admin": User.objects.create_user("ml-lead", password="x"),
        "ml_member": User.objects.create_user("ml-dev", password="x"),
        "cv_member": User.objects.create_user("cv-dev", password="x"),
        "loner": User.objects.create_user("loner", password="x"),
    }
    Membership(team=ml, user=users["ml_admin"], role="admin").save()
    Membership(team=ml, user=users["ml_member"]).save()
    Membership(team=cv, user=users["cv_member"]).save()
    jobs = {
        "ml_mine": factories.job(ml_q, "ml-mine", submitter=users["ml_member"]),
        "ml_other": factories.job(ml_q, "ml-other", submitter=users["ml_admin"]),
        "cv": factories.job(cv_q, "cv-job", submitter=users["cv_member"]),
    }
    return {"users": users, "jobs": jobs}


def names(qs) -> set[str]:
    return set(qs.values_list("name", flat=True))


def test_members_see_only_their_teams_jobs_and_pods(world):
    u = world["users"]
    assert names(Job.objects.visible_to(u["ml_member"])) == {"ml-mine", "ml-other"}
    assert names(Job.objects.visible_to(u["cv_member"])) == {"cv-job"}
    assert names(Job.objects.visible_to(u["loner"])) == set()
    assert names(Job.objects.visible_to(u["admin"])) == {"ml-mine", "ml-other", "cv-job"}
    assert {p.job.name for p in Pod.objects.visible_to(u["cv_member"])} == {"cv-job"}


def test_members_see_their_queues_with_ancestors_and_submit_only_to_their_leaves(world):
    u = world["users"]
    assert names(Queue.objects.visible_to(u["ml_member"])) == {"research", "ml-train"}
    assert names(Queue.objects.submittable_by(u["ml_member"])) == {"ml-train"}
    assert names(Queue.objects.submittable_by(u["admin"])) == {"ml-train", "cv-train"}
    assert names(Queue.objects.submittable_by(u["loner"])) == set()


def test_only_portal_admins_manage_quotas(world):
    u = world["users"]
    assert names(Queue.objects.manageable_by(u["ml_admin"])) == set()
    assert names(Queue.objects.manageable_by(u["admin"])) == {"research", "ml-train", "cv-train"}


def test_team_admins_cancel_team_jobs_members_only_their_own(world):
    u = world["users"]
    assert names(Job.objects.cancellable_by(u["ml_member"])) == {"ml-mine"}
    assert names(Job.objects.cancellable_by(u["ml_admin"])) == {"ml-mine", "ml-other"}
    assert names(Job.objects.cancellable_by(u["cv_member"])) == {"cv-job"}


def test_team_visibility_and_management(world):
    u = world["users"]
    assert set(Team.objects.visible_to(u["ml_member"]).values_list("slug", flat=True)) == {"ml"}
    assert set(Team.objects.manageable_by(u["ml_member"]).values_list("slug", flat=True)) == set()
    assert set(Team.objects.manageable_by(u["ml_admin"]).values_list("slug", flat=True)) == {"ml"}
