"""Personas and a small world for page tests: two teams, a department, one node."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from kai_portal.teams.models import Membership
from tests.portal import factories


@pytest.fixture
def world(db: None, django_user_model: Any) -> dict[str, Any]:
    factories.node("gpu-node-1", gpus=8)
    alpha, beta = factories.team("alpha", name="Alpha"), factories.team("beta", name="Beta")
    users = {
        "admin": django_user_model.objects.create_superuser("root", "root@example.com", "pw"),
        "team_admin": django_user_model.objects.create_user("anna", password="pw"),
        "member": django_user_model.objects.create_user("alice", password="pw"),
        "outsider": django_user_model.objects.create_user("bob", password="pw"),
    }
    Membership(team=alpha, user=users["team_admin"], role=Membership.Role.ADMIN).save()
    Membership(team=alpha, user=users["member"]).save()
    Membership(team=beta, user=users["outsider"]).save()
    research = factories.queue("research", gpu_quota=8)
    queues = {
        "research": research,
        "alpha": factories.queue("alpha-train", parent=research, team=alpha, gpu_quota=2),
        "beta": factories.queue("beta-train", parent=research, team=beta, gpu_quota=2, gpu_limit=4),
    }
    jobs = {
        "alpha": factories.job(queues["alpha"], "alpha-job", submitter=users["member"]),
        "beta": factories.job(queues["beta"], "beta-job", submitter=users["outsider"]),
    }
    return {"users": users, "queues": queues, "jobs": jobs, "teams": {"alpha": alpha, "beta": beta}}


@pytest.fixture
def client_for(world: dict[str, Any]) -> Any:
    def make(persona: str | None) -> Client:
        client = Client()
        if persona is not None:
            client.force_login(world["users"][persona])
        return client

    return make
