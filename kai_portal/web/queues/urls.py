from __future__ import annotations

from django.urls import path

from kai_portal.queues import yaml_pages
from kai_portal.web.queues import views

app_name = "queues"

urlpatterns = [
    path("", views.queue_list, name="queue_list"),
    path("new/", views.queue_create, name="queue_create"),
    path("new/import/", yaml_pages.queue_import, name="queue_import"),
    path("<str:name>/", views.queue_detail, name="queue_detail"),
    path("<str:name>/edit/", views.queue_edit, name="queue_edit"),
    path("<str:name>/delete/", views.queue_delete, name="queue_delete"),
    path("<str:name>/yaml/", yaml_pages.queue_yaml, name="queue_yaml"),
    path("<str:name>/edit/preview/", views.queue_preview, name="queue_preview"),
]
