from __future__ import annotations

from django.urls import path

from kai_portal.reports import showback_views

app_name = "showback"

urlpatterns = [
    path("", showback_views.showback_page, name="showback"),
    path("showback.csv", showback_views.showback_csv, name="showback_csv"),
]
