"""Who am I, and my API tokens (list, create: the secret is shown once, revoke)."""

from __future__ import annotations

from typing import cast

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from kai_portal.accounts import tokens
from kai_portal.accounts.api.serializers import ApiTokenSerializer, MeSerializer, NewApiTokenSerializer
from kai_portal.accounts.models import ApiToken, User


@extend_schema(responses=MeSerializer)
@api_view(["GET"])
def me(request: Request) -> Response:
    """The signed-in user (or the token's owner) with their team roles."""
    current = cast(User, request.user)  # IsAuthenticated (the default permission): never anonymous
    user = User.objects.prefetch_related("memberships__team").get(pk=current.pk)
    return Response(MeSerializer(user).data)


class ApiTokenViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Your own tokens. DELETE revokes (the row stays, with ``revoked_at``)."""

    serializer_class = ApiTokenSerializer
    queryset = ApiToken.objects.none()  # for the schema; get_queryset is the real one
    ordering_fields = ["created_at", "last_used_at", "name"]
    ordering = ["-created_at"]
    filterset_fields = ["read_only"]

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return tokens.tokens_of(self.request.user)

    @extend_schema(request=ApiTokenSerializer, responses={201: NewApiTokenSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        serializer = ApiTokenSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        token, secret = tokens.create_token(
            request.user,
            values["name"],
            read_only=values.get("read_only", False),
            expires_at=values.get("expires_at"),
        )
        data = {**ApiTokenSerializer(token).data, "token": secret}
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        tokens.revoke_token(instance)
