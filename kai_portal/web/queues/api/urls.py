from __future__ import annotations

from rest_framework.routers import DefaultRouter

from kai_portal.web.queues.api import views

app_name = "queues-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("queues", views.QueueViewSet, basename="queue")
urlpatterns = router.urls
