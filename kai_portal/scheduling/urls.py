from __future__ import annotations

from django.urls import path

from kai_portal.scheduling import views

app_name = "scheduling"

urlpatterns = [
    path("", views.fairness_audit_page, name="fairness_audit"),
]
