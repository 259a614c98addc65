from __future__ import annotations

from rest_framework.routers import DefaultRouter

from kai_portal.audit.api import views

app_name = "audit-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("audit", views.AuditEntryViewSet, basename="auditentry")
urlpatterns = router.urls
