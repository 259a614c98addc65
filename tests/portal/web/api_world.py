"""Personas and a small seeded world for the REST API tests (imported where a test needs it).

Personas: ``admin`` (portal admin), ``team_admin`` (admin of team ml),
``member`` (member of ml), ``other`` (member of team cv), ``anon``.
Every persona but ``anon`` calls the API with a real token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from kai_portal.accounts import tokens
from kai_portal.accounts.models import User
from kai_portal.history.models import Decision, JobMessage, SchedulingCycle, UsageSample
from kai_portal.teams.models import Membership
from tests.portal import factories

PERSONAS = ["admin", "team_admin", "member", "other", "anon"]


@dataclass
class World:
    users: dict[str, User] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    objects: dict[str, Any] = field(default_factory=dict)

    def client(self, persona: str) -> APIClient:
        client = APIClient()
        if persona != "anon":
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.secrets[persona]}")
        return client


def build_world() -> World:
    world = World()
    ml, cv = factories.team("ml"), factories.team("cv")
    research = factories.queue("research", gpu_quota=16, cpu_quota=64_000, memory_quota=262_144)
    ml_q = factories.queue("ml-train", parent=research, team=ml, gpu_quota=8, cpu_quota=32_000)
    factories.queue("ml-spare", parent=research, team=ml, gpu_quota=0)
    cv_q = factories.queue("cv-train", parent=research, team=cv, gpu_quota=4)
    users = {
        "admin": User.objects.create_superuser("root", password="x"),
        "team_admin": User.objects.create_user("ml-lead", password="x"),
        "member": User.objects.create_user("ml-dev", password="x"),
        "other": User.objects.create_user("cv-dev", password="x"),
    }
    User.objects.create_user("loner", password="x")
    Membership(team=ml, user=users["team_admin"], role="admin").save()
    Membership(team=ml, user=users["member"]).save()
    Membership(team=cv, user=users["other"]).save()
    world.users = users
    world.secrets = {name: tokens.create_token(user, f"{name} tests")[1] for name, user in users.items()}
    node = factories.node("node-1", pool="default", gpus=2)
    ml_job = factories.job(ml_q, "ml-by-member", submitter=users["member"])
    ml_lead_job = factories.job(ml_q, "ml-by-lead", submitter=users["team_admin"])
    cv_job = factories.job(cv_q, "cv-job", submitter=users["other"])
    now = timezone.now()
    cycle = SchedulingCycle.objects.create(started_at=now, finished_at=now, status="succeeded", duration_ms=3)
    pod = ml_job.pods.get()
    decision = Decision.objects.create(
        cycle=cycle,
        pod=pod,
        job=ml_job,
        kind="unschedulable",
        reason="OverQuota",
        message="Queue over quota.",
    )
    Decision.objects.create(cycle=cycle, pod=cv_job.pods.get(), job=cv_job, kind="allocated", node=node)
    JobMessage.objects.create(cycle=cycle, job=ml_job, reason="NotEnoughResources", message="Waiting.")
    for minutes in (90, 30):
        UsageSample.objects.create(
            queue=ml_q, resource="gpu", sampled_at=now - timedelta(minutes=minutes), cycle=cycle,
            allocated=2, requested=3, deserved=8, fair_share=9,
        )  # fmt: skip
    world.objects = {
        "ml": ml, "cv": cv, "ml_q": ml_q, "cv_q": cv_q, "node": node, "ml_job": ml_job,
        "ml_lead_job": ml_lead_job, "cv_job": cv_job, "ml_pod": pod, "cycle": cycle, "decision": decision,
    }  # fmt: skip
    return world


@pytest.fixture
def world(db: None) -> World:
    return build_world()
