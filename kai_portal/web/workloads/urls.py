from __future__ import annotations

from django.urls import path

from kai_portal.web.workloads import views
from kai_portal.workloads import table_views

app_name = "workloads"

urlpatterns = [
    path("", views.job_list, name="job_list"),
    path("table/", table_views.workload_table, name="workload_table"),
    path("table.csv", table_views.workload_csv, name="workload_csv"),
    path("submit/", views.job_submit, name="job_submit"),
    path("submit/fit-check/", views.job_fit_check, name="job_fit_check"),
    path("submit/yaml/", views.job_submit_yaml, name="job_submit_yaml"),
    path("<uuid:uid>/", views.job_detail, name="job_detail"),
    path("<uuid:uid>/cancel/", views.job_cancel, name="job_cancel"),
    path("<uuid:uid>/yaml/", table_views.job_yaml_view, name="job_yaml"),
]
