from __future__ import annotations

from django.urls import path

from kai_portal.cluster import views

app_name = "cluster"

urlpatterns = [
    path("", views.cluster_overview, name="overview"),
]
