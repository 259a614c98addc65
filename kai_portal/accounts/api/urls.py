from __future__ import annotations

from django.urls import path
from rest_framework.routers import DefaultRouter

from kai_portal.accounts.api import views

app_name = "accounts-api"

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("tokens", views.ApiTokenViewSet, basename="apitoken")
urlpatterns = [path("me/", views.me, name="me"), *router.urls]
