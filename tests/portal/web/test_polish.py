"""Issue 31's polish list: each item the walk-through found, held by a test (page tests post
what the page renders)."""

from __future__ import annotations

import contextlib
import io
import logging
import re
from datetime import timedelta
from decimal import Decimal
from html import unescape
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone
from django.utils.log import configure_logging

from kai_portal.accounts import tokens
from kai_portal.accounts.models import ApiToken
from kai_portal.history.models import UsageSample
from kai_portal.teams.models import Membership
from kai_portal.workloads import limits
from kai_portal.workloads.models import Job
from tests.portal import factories
from tests.portal.web.rendered_form import rendered_form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model: Any) -> dict[str, Any]:
    factories.node("gpu-node-1", gpus=8)
    team = factories.team("alpha", name="Alpha")
    users = {
        "admin": django_user_model.objects.create_superuser("root", "root@example.com", "pw"),
        "member": django_user_model.objects.create_user("alice", password="pw"),
        "team_admin": django_user_model.objects.create_user("anna", password="pw"),
    }
    Membership(team=team, user=users["member"]).save()
    Membership(team=team, user=users["team_admin"], role=Membership.Role.ADMIN).save()
    research = factories.queue("research", gpu_quota=8)
    leaf = factories.queue("alpha-train", parent=research, team=team, gpu_quota=2)
    return {"users": users, "team": team, "leaf": leaf, "research": research}


def _client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_expected_403_prints_one_line_and_no_traceback(people: dict[str, Any], settings: Any) -> None:
    """`make run` (DEBUG on): a member opening the audit log printed the same traceback twice."""
    names = ("", "django", "django.request", "django.server")
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in map(logging.getLogger, names)]
    err = io.StringIO()
    settings.DEBUG = True
    try:
        with contextlib.redirect_stderr(err):  # the console handlers are made on this stream
            configure_logging(django_settings.LOGGING_CONFIG, django_settings.LOGGING)
            assert _client(people["users"]["member"]).get("/audit/").status_code == 403
            forbidden = err.getvalue()
            try:
                raise ValueError("boom")
            except ValueError:
                logging.getLogger("django.request").error("Internal Server Error: /x/", exc_info=True)
            fault = err.getvalue()[len(forbidden) :]
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(level)
    assert forbidden.count("Forbidden (Permission denied): /audit/") == 1, forbidden
    assert "Traceback" not in forbidden, forbidden
    assert fault.count("Traceback") == 1, fault  # a real fault still logs its traceback, once


def _sample(queue: Any, at: Any) -> None:
    UsageSample.objects.create(
        queue=queue, resource="gpu", sampled_at=at, allocated=Decimal(2), requested=Decimal(4),
        deserved=Decimal(2), fair_share=Decimal(3),
    )  # fmt: skip


def test_a_fresh_queue_page_opens_on_a_window_whose_chart_has_a_line(people: dict[str, Any]) -> None:
    """Ten minutes of samples drew one dot on the day's 12-minute buckets."""
    leaf = people["leaf"]
    now = timezone.now()
    for i in range(20):
        _sample(leaf, now - timedelta(seconds=30 * i + 5))
    response = _client(people["users"]["member"]).get(f"/queues/{leaf.name}/")
    assert response.context["window"] == "hour"
    assert len(response.context["history"]["labels"]) >= 10
    # A queue with a day of history still opens on the day.
    for hours in range(3, 20):
        _sample(leaf, now - timedelta(hours=hours))
    assert _client(people["users"]["member"]).get(f"/queues/{leaf.name}/").context["window"] == "day"
    # An explicit window is kept.
    week = _client(people["users"]["member"]).get(f"/queues/{leaf.name}/?window=week")
    assert week.context["window"] == "week"


def test_every_page_has_a_skip_link_to_the_main_content(people: dict[str, Any]) -> None:
    html = _client(people["users"]["member"]).get("/jobs/").content.decode()
    body = html.split("<body", 1)[1]
    first_link = body.split("<a ", 1)[1]
    assert first_link.startswith('class="skip-link" href="#main"')
    assert '<main class="page" id="main"' in html


def test_the_team_page_role_selects_and_remove_buttons_have_names(people: dict[str, Any]) -> None:
    html = _client(people["users"]["team_admin"]).get("/teams/alpha/").content.decode()
    assert '<select name="role" data-autosubmit aria-label="Role of alice">' in html
    assert '<select name="role" data-autosubmit aria-label="Role of anna">' in html
    assert 'aria-label="Remove alice"' in html


def test_scrolling_tables_are_focusable_named_regions(people: dict[str, Any]) -> None:
    client = _client(people["users"]["admin"])
    for url in ("/queues/", "/cluster/nodes/", "/jobs/table/", "/showback/", "/audit/"):
        html = client.get(url).content.decode()
        region = r'<div (id="[\w-]+" )?class="table-scroll" tabindex="0" role="region" aria-label="'
        assert re.search(region, html), url


def test_links_in_text_are_underlined_and_dark_mode_follows_the_system() -> None:
    css = (django_settings.BASE_DIR / "static" / "css" / "portal.css").read_text()
    assert ".crumbs a, .page p a" in css
    assert "text-decoration: underline" in css.split(".crumbs a, .page p a")[1][:80]
    assert "@media (prefers-color-scheme: dark)" in css
    dark = css.split("@media (prefers-color-scheme: dark)", 1)[1]
    assert "--bg: #0b1120" in dark and "--ink: #e2e8f0" in dark and "color-scheme: dark" in dark


def test_gpu_counts_in_the_audit_log_are_whole_numbers(people: dict[str, Any]) -> None:
    leaf = people["leaf"]
    leaf.gpu_quota = Decimal(4)
    leaf.save()
    html = unescape(_client(people["users"]["admin"]).get("/audit/").content.decode())
    assert "<del>2</del> → <ins>4</ins>" in html
    assert "2.00" not in html and "4.00" not in html


def test_the_submit_form_as_it_opens_submits(people: dict[str, Any]) -> None:
    """The form opened on "Whole GPUs" with 0 beside it: its own defaults were refused."""
    client = _client(people["users"]["member"])
    html = client.get("/jobs/submit/").content.decode()
    data = rendered_form_data(html, "gpu_mode")
    assert data["gpu_mode"] == "whole" and data["gpu_count"] == "1"
    # What a user must still choose: a name and a queue.
    data.update(name="defaults", queue=str(people["leaf"].pk))
    response = client.post("/jobs/submit/", data)
    assert response.status_code == 302, unescape(response.content.decode())[-3000:]
    job = Job.objects.get(name="defaults")
    assert (job.gpu_count, job.duration) == (1, limits.DEFAULT_DURATION)


def test_an_api_job_without_a_duration_gets_the_forms_default(people: dict[str, Any]) -> None:
    client = _client(people["users"]["member"])
    made = client.post("/api/v1/jobs/", {"name": "api-default", "queue": "alpha-train", "gpu_count": 1},
                       content_type="application/json")  # fmt: skip
    assert made.status_code == 201, made.content
    assert Job.objects.get(name="api-default").duration == timedelta(minutes=30) == limits.DEFAULT_DURATION
    assert made.json()["duration"] == "00:30:00"
    # An explicit null still means "until cancelled".
    made = client.post("/api/v1/jobs/", {"name": "api-none", "queue": "alpha-train", "duration": None},
                       content_type="application/json")  # fmt: skip
    assert made.status_code == 201, made.content
    assert Job.objects.get(name="api-none").duration is None


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        ("kind: Pod\nmetadata: name: x\n", "line 2, column 15: a ':' where no key can start"),
        ("kind: Pod\nmetadata:\n\tname: x\n", "line 3, column 1: a tab: YAML indents with spaces only"),
        ("kind: Pod\nmetadata:\n  name: x\n labels: {}\n", "line 4, column 2: a key indented differently"),
        ("kind: Pod\nspec: {containers: [{name: c}\n", "a list in [ ] that is not closed"),
    ],
)
def test_pod_yaml_syntax_errors_are_said_in_words(people: dict[str, Any], manifest: str, said: str) -> None:
    html = unescape(
        _client(people["users"]["member"]).post("/jobs/submit/yaml/", {"manifest": manifest}).content.decode()
    )
    assert said in html
    for parser_text in ("while scanning", "while parsing", "<unicode string>", "<block mapping start>"):
        assert parser_text not in html, parser_text


def test_the_token_page_has_a_copy_button_and_an_optional_expiry(people: dict[str, Any]) -> None:
    client = _client(people["users"]["member"])
    html = client.get("/accounts/tokens/").content.decode()
    data = rendered_form_data(html, "expires_in_days")
    data.update(name="ci", expires_in_days="7")
    page = client.post("/accounts/tokens/", data).content.decode()
    secret = page.split('id="new-secret-value">', 1)[1].split("<", 1)[0]
    assert secret.startswith("kai_")
    assert 'data-copy="new-secret-value"' in page and "js/copy.js" in page
    assert "<script>" not in page  # the CSP runs no inline script: the button's code is a file
    token = ApiToken.objects.get(name="ci")
    assert token.expires_at is not None
    assert timedelta(days=7) - (token.expires_at - timezone.now()) < timedelta(minutes=1)
    # Without an expiry: never.
    data.update(name="forever", expires_in_days="")
    client.post("/accounts/tokens/", data)
    assert ApiToken.objects.get(name="forever").expires_at is None


def test_an_expired_token_is_refused_with_what_to_do(people: dict[str, Any]) -> None:
    soon = timezone.now() + timedelta(hours=1)
    token, secret = tokens.create_token(people["users"]["member"], "short", expires_at=soon)
    api = Client()
    assert api.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Bearer {secret}").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    refused = api.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert refused.status_code == 401
    assert "expired" in refused.json()["detail"] and "/accounts/tokens/" in refused.json()["detail"]
    # The API takes an expiry too, and refuses one in the past.
    client = _client(people["users"]["member"])
    past = client.post("/api/v1/tokens/", {"name": "x", "expires_at": "2000-01-01T00:00:00Z"},
                       content_type="application/json")  # fmt: skip
    assert past.status_code == 400 and "expires_at" in past.json()


@pytest.mark.parametrize(("url", "region", "every"), [
    ("/cluster/nodes/", "nodes-live", "10s"), ("/jobs/table/", "workloads-live", "5s"),
    ("/showback/", "showback-live", "30s"),
])  # fmt: skip
def test_nodes_workloads_and_showback_refresh_like_the_other_pages(
    people: dict[str, Any], url: str, region: str, every: str
) -> None:
    client = _client(people["users"]["admin"])
    html = client.get(url + "?x=1").content.decode()
    assert (f'<div id="{region}" hx-get="{url}?x=1" hx-trigger="every {every}" hx-select="#{region}" '
            'hx-swap="outerHTML">') in html  # fmt: skip
    # The poll gets the page again: the region is in it, with the data as of now.
    factories.node("gpu-node-new", gpus=8)
    factories.job(people["leaf"], "fresh-job")
    again = client.get(url + "?x=1", HTTP_HX_REQUEST="true").content.decode()
    assert f'id="{region}"' in again
    if region == "nodes-live":
        assert "gpu-node-new" in again.split(f'id="{region}"', 1)[1]
    if region == "workloads-live":
        assert "fresh-job" in again.split(f'id="{region}"', 1)[1]


def test_the_readme_names_every_page() -> None:
    readme = (django_settings.BASE_DIR / "README.md").read_text()
    using = readme.split("## Using it", 1)[1].split("\n## ", 1)[0]
    for url in ("/cluster/", "/cluster/nodes/", "/queues/", "/queues/new/import/", "/jobs/", "/jobs/table/",
                "/jobs/submit/", "/jobs/submit/yaml/", "/teams/", "/showback/", "/audit/", "/fairness/",
                "/accounts/tokens/", "/admin/", "/api/docs/"):  # fmt: skip
        assert f"`{url}`" in using, url
