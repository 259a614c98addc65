from __future__ import annotations

from django.urls import path

from kai_portal.cluster import node_pages
from kai_portal.web.cluster import views

app_name = "cluster"

urlpatterns = [
    path("", views.cluster_overview, name="overview"),
    path("nodes/", node_pages.node_list, name="node_list"),
]
