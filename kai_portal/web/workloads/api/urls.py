from __future__ import annotations

from rest_framework.routers import DefaultRouter

from kai_portal.web.workloads.api import views

app_name = "workloads-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("jobs", views.JobViewSet, basename="job")
router.register("pods", views.PodViewSet, basename="pod")
urlpatterns = router.urls
