from __future__ import annotations

from django.urls import path

from kai_portal.audit import views

app_name = "audit"

urlpatterns = [
    path("", views.entry_list, name="entry_list"),
]
