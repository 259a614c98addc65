"""Team admins add people to their team and change or remove their roles."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model

from kai_portal.teams.models import Membership, Team


class MemberAddForm(forms.Form):
    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=Membership.Role.choices, initial=Membership.Role.MEMBER)

    def __init__(self, *args: Any, team: Team, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.team = team

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"].strip()
        user = get_user_model().objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"No active user named '{username}'.")
        if Membership.objects.filter(team=self.team, user=user).exists():
            raise forms.ValidationError(f"{username} is already in {self.team.name}.")
        return user


class MemberRoleForm(forms.Form):
    role = forms.ChoiceField(choices=Membership.Role.choices)


class PodSecurityForm(forms.Form):
    """A portal admin's choice of what the team's pods may ask for."""

    pod_security = forms.ChoiceField(choices=Team.PodSecurity.choices, label="Pod security level")
