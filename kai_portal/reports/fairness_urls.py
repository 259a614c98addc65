from __future__ import annotations

from django.urls import path

from kai_portal.reports import fairness_views

# The namespace the page had before the split (templates and tests reverse "scheduling:fairness_audit").
app_name = "scheduling"

urlpatterns = [
    path("", fairness_views.fairness_audit_page, name="fairness_audit"),
]
