from __future__ import annotations

from django.urls import path

from kai_portal.planning import views

app_name = "planning"

urlpatterns = [
    path("", views.planner, name="planner"),
    path("<int:pk>/", views.plan_detail, name="plan_detail"),
    path("<int:pk>/progress/", views.plan_progress, name="plan_progress"),
    path("<int:pk>/status.json", views.plan_status, name="plan_status"),
    path("<int:pk>/plan.csv", views.plan_csv, name="plan_csv"),
]
