from __future__ import annotations

from django.urls import path

from kai_portal.workloads import views

app_name = "workloads"

urlpatterns = [
    path("", views.job_list, name="job_list"),
    path("submit/", views.job_submit, name="job_submit"),
    path("submit/fit-check/", views.job_fit_check, name="job_fit_check"),
    path("submit/yaml/", views.job_submit_yaml, name="job_submit_yaml"),
    path("<uuid:uid>/", views.job_detail, name="job_detail"),
    path("<uuid:uid>/cancel/", views.job_cancel, name="job_cancel"),
]
