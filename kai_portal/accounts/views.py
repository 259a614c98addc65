"""The signed-in user's own pages: API tokens (list, create, revoke)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from kai_portal.accounts import tokens
from kai_portal.accounts.models import ApiToken, User
from kai_portal.core.access import get_visible_or_404


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. 'airflow'.")
    read_only = forms.BooleanField(required=False, label="Read-only (GET requests only)")
    expires_in_days = forms.IntegerField(
        required=False, min_value=1, max_value=3650, label="Expires after (days)",
        help_text="Empty: the token works until you revoke it.",
    )  # fmt: skip


@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """The user's tokens; a new token's secret is shown once, on the page that created it."""
    form = TokenCreateForm(request.POST or None)
    secret = None
    if request.method == "POST" and form.is_valid():
        token, secret = tokens.create_token(
            request.user,
            form.cleaned_data["name"],
            read_only=form.cleaned_data["read_only"],
            expires_at=timezone.now() + timedelta(days=days)
            if (days := form.cleaned_data["expires_in_days"])
            else None,
        )
        messages.success(request, f"Token {token.name} created. Copy the secret now: it is not shown again.")
        form = TokenCreateForm()
    context = {"tokens": tokens.tokens_of(request.user), "form": form, "secret": secret}
    return render(request, "accounts/token_list.html", context)


@login_required
@require_POST
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of the user's own tokens (another user's token is a 404)."""
    user = cast(User, request.user)  # @login_required: never anonymous here
    token = get_visible_or_404(ApiToken.objects.filter(user=user), pk=token_id)
    if tokens.revoke_token(token):
        messages.success(request, f"Token {token.name} revoked.")
    return redirect("accounts:token_list")
