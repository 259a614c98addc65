from __future__ import annotations

from rest_framework.routers import DefaultRouter

from kai_portal.web.teams.api import views

app_name = "teams-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("teams", views.TeamViewSet, basename="team")
router.register("memberships", views.MembershipViewSet, basename="membership")
urlpatterns = router.urls
