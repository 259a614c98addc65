from __future__ import annotations

from rest_framework.routers import DefaultRouter

from kai_portal.cluster.api import views

app_name = "cluster-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("node-pools", views.NodePoolViewSet, basename="nodepool")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("gpus", views.GpuDeviceViewSet, basename="gpudevice")
urlpatterns = router.urls
