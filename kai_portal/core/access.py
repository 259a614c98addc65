"""Page access helpers: 404 for what is not yours, 403 for what is yours but read-only.

Every rule itself lives in the model's queryset (``visible_to``, ``manageable_by``,
...); these helpers only turn "not in the queryset" into the right HTTP answer.
"""

from __future__ import annotations

from typing import Any, TypeVar

from django.contrib.auth.mixins import LoginRequiredMixin
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest

M = TypeVar("M", bound=models.Model)


def get_visible_or_404(visible: models.QuerySet[M], **lookup: Any) -> M:
    """The object from the user's visible queryset, or 404 (another team's object does not exist for them)."""
    try:
        return visible.get(**lookup)
    except ObjectDoesNotExist:  # the model's DoesNotExist; only get() can raise it here
        raise Http404(f"No {visible.model._meta.verbose_name} matches the given query.") from None


def get_writable_or_403(visible: models.QuerySet[M], writable: models.QuerySet[M], **lookup: Any) -> M:
    """404 when the user cannot see the object, 403 when they see it but may not change it."""
    obj = get_visible_or_404(visible, **lookup)
    if not writable.filter(pk=obj.pk).exists():
        raise PermissionDenied("You may view this but not change it.")
    return obj


class PortalAdminRequiredMixin(LoginRequiredMixin):
    """Signed-in portal admins only; everyone else signed in gets 403."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.user.is_authenticated and not getattr(request.user, "is_portal_admin", False):
            raise PermissionDenied("Portal admins only.")
        return super().dispatch(request, *args, **kwargs)
