"""Issue 31: once a job runs, the pending-time scheduler message is no longer shown as current."""

from __future__ import annotations

from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from django.test import Client

from kai_portal.history.models import JobMessage
from tests.portal import factories

pytestmark = pytest.mark.django_db


def test_a_started_job_shows_no_pending_time_message(loop: Any, leaf: Any, django_user_model: Any) -> None:
    factories.node("n1", gpus=2)
    factories.job(leaf, "first", gpu_count=2, duration=timedelta(seconds=20))
    # A gang of two that cannot start while the first holds the GPUs: the engine gives it a job message.
    second = factories.job(leaf, "second", task_count=2, min_member=2, duration=timedelta(minutes=1))
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)

    loop.run()
    second.refresh_from_db()
    assert second.state == "pending" and second.message
    pending_text = JobMessage.objects.filter(job=second).latest("cycle_id").message
    page = unescape(client.get(f"/jobs/{second.uid}/").content.decode())
    assert "Why it is still pending" in page and pending_text.splitlines()[0] in page

    for _ in range(8):
        loop.run(5)
        second.refresh_from_db()
        if second.state == "running":
            break
    assert second.state == "running"

    page = unescape(client.get(f"/jobs/{second.uid}/").content.decode())
    assert 'data-testid="job-why"' not in page, "a running job shows the message of its pending time"
    assert pending_text.splitlines()[0] not in page.split('data-testid="timeline"')[0]
    table = unescape(client.get("/jobs/table/").content.decode())
    assert pending_text.splitlines()[0][:60] not in table
    api = client.get(f"/api/v1/jobs/{second.uid}/").json()
    assert api["state"] == "running" and api["message"] == ""
