"""The scheduling API's routes (namespace ``scheduling-api``, unchanged by the split): the
scheduler's record from kai_portal/history and the fairness audit from this package."""

from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from kai_portal.history.api import views
from kai_portal.reports.api_views import FairnessAuditView, JobGpuUseViewSet

app_name = "scheduling-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("cycles", views.CycleViewSet, basename="cycle")
router.register("decisions", views.DecisionViewSet, basename="decision")
router.register("job-messages", views.JobMessageViewSet, basename="jobmessage")
router.register("gpu-use", JobGpuUseViewSet, basename="gpu-use")
urlpatterns = [
    *router.urls,
    path("fairness-audit/", FairnessAuditView.as_view(), name="fairness-audit"),
]
