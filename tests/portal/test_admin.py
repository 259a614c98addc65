from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib import admin
from django.core.management import call_command
from django.urls import reverse

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_passwords")]

MODELS = sorted(admin.site._registry, key=lambda m: m._meta.label)


def test_every_portal_model_is_in_the_admin() -> None:
    from django.apps import apps

    ours = {m for m in apps.get_models() if m.__module__.startswith("kai_portal.")}
    assert ours <= set(admin.site._registry)


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_admin_pages_work_with_demo_data(client: Any, model: Any) -> None:
    call_command("seed_demo", stdout=StringIO())
    from kai_portal.core.actor import acting_as

    with acting_as(None, "test"):
        user = model._meta.apps.get_model("accounts.User").objects.get(username="admin")
    client.force_login(user)
    info = (model._meta.app_label, model._meta.model_name)
    changelist = client.get(reverse("admin:{}_{}_changelist".format(*info)), {"q": "a"})
    assert changelist.status_code == 200
    obj = model._default_manager.first()
    if obj is not None:
        assert client.get(reverse("admin:{}_{}_change".format(*info), args=[obj.pk])).status_code == 200


def test_home_sends_strangers_to_sign_in_and_health_answers(client: Any) -> None:
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.get("/healthz").json() == {"status": "ok"}
