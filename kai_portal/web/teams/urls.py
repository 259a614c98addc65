from __future__ import annotations

from django.urls import path

from kai_portal.web.teams import views

app_name = "teams"

urlpatterns = [
    path("", views.team_list, name="team_list"),
    path("<slug:slug>/", views.team_detail, name="team_detail"),
    path("<slug:slug>/pod-security/", views.pod_security_update, name="pod_security_update"),
    path("<slug:slug>/members/<int:membership_id>/", views.member_update, name="member_update"),
]
