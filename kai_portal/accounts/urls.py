from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from kai_portal.accounts import views

app_name = "accounts"

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("tokens/", views.token_list, name="token_list"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]
