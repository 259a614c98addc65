"""Queues: the capacity tree.

Everyone signed in reads the queues they can see (their teams' queues and the
departments above them; admins all), with the computed status. Only portal
admins create, change, delete and import queues: quotas are capacity.
Changes use optimistic concurrency: a stale ``If-Match``/``updated_at`` is a 409.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from kai_portal.core.api import (
    TEXT_PARSERS,
    Conflict,
    PayloadTooLarge,
    api_actor,
    body_text,
    check_not_stale,
    etag_for,
)
from kai_portal.history.filtersets import UsageSampleFilterSet
from kai_portal.history.models import UsageSample
from kai_portal.history.queue_status import latest_status
from kai_portal.previews.whatif import preview_queue_change
from kai_portal.queues import cluster_writes, kai_yaml
from kai_portal.queues.deletion import QueueInUse, delete_locked
from kai_portal.queues.filtersets import QueueFilterSet
from kai_portal.queues.models import Queue
from kai_portal.web.queues.api.serializers import (
    QueueImportResultSerializer,
    QueuePreviewSerializer,
    QueueSerializer,
    UsageSampleSerializer,
)

IF_MATCH = OpenApiParameter(
    "If-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description="The ETag you read. If the queue changed since, the answer is 409 and nothing is saved.",
)
CONFLICT = OpenApiResponse(description="The queue changed since you read it (stale If-Match or updated_at).")


class ClusterUnavailable(exceptions.APIException):
    """503: the cluster's Queue object could not be written; nothing was saved."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The cluster could not be reached; nothing was saved."
    default_code = "cluster_unavailable"


@contextmanager
def _cluster_refusals() -> Iterator[None]:
    """A refused Queue object write (kubernetes mode) as 409 (it changed in the cluster) or 503.

    Inside the request's transaction, so the row is rolled back with it."""
    try:
        yield
    except cluster_writes.QueueWriteRefused as refused:
        if refused.conflict:
            raise Conflict(str(refused)) from None
        raise ClusterUnavailable(str(refused)) from None


@extend_schema_view(
    update=extend_schema(parameters=[IF_MATCH], responses={200: QueueSerializer, 409: CONFLICT}),
    partial_update=extend_schema(parameters=[IF_MATCH], responses={200: QueueSerializer, 409: CONFLICT}),
    destroy=extend_schema(
        parameters=[IF_MATCH],
        responses={204: None, 409: OpenApiResponse(description="Stale, or still has child queues or jobs.")},
    ),
)
class QueueViewSet(viewsets.ModelViewSet):
    serializer_class = QueueSerializer
    filterset_class = QueueFilterSet
    lookup_field = "name"
    lookup_value_regex = "[-a-z0-9]+"
    ordering_fields = [
        "name",
        "priority",
        "created_at",
        "updated_at",
        "gpu_quota",
        "cpu_quota",
        "memory_quota",
    ]
    ordering = ["name"]

    def get_queryset(self) -> QuerySet[Queue]:
        return (
            Queue.objects.visible_to(self.request.user)
            .select_related("parent", "team", "node_pool")
            .prefetch_related("children")
        )

    def get_serializer(self, *args: Any, **kwargs: Any) -> Any:
        """Attach the computed status of exactly the queues being printed (one query)."""
        if args and not kwargs.get("data") and "data" not in kwargs:
            subject = args[0]
            queues = list(subject) if kwargs.get("many") else [subject]
            if kwargs.get("many"):
                args = (queues, *args[1:])
            kwargs["context"] = {**self.get_serializer_context(), "status": latest_status(queues)}
        return super().get_serializer(*args, **kwargs)

    def _require_admin(self, queue: Queue | None = None) -> None:
        user = self.request.user
        if queue is not None:
            allowed = Queue.objects.manageable_by(user).filter(pk=queue.pk).exists()
        else:
            allowed = getattr(user, "is_portal_admin", False)
        if not allowed:
            raise exceptions.PermissionDenied("Only portal admins change queues and quotas.")

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().retrieve(request, *args, **kwargs)
        response["ETag"] = etag_for(self.get_object())
        return response

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self._require_admin()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic(), api_actor(request), _cluster_refusals():
            queue = serializer.save()
            cluster_writes.publish(queue)
        response = Response(self.get_serializer(queue).data, status=status.HTTP_201_CREATED)
        response["ETag"] = etag_for(queue)
        return response

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queue = self.get_object()  # 404 before 403: a queue you cannot see does not exist for you
        self._require_admin(queue)
        with transaction.atomic(), api_actor(request), _cluster_refusals():
            locked = (
                Queue.objects.select_for_update(of=("self",))
                .select_related("parent", "team", "node_pool")
                .get(pk=queue.pk)
            )
            check_not_stale(request, locked)
            previous_name = locked.name
            serializer = self.get_serializer(locked, data=request.data, partial=kwargs.get("partial", False))
            serializer.is_valid(raise_exception=True)
            queue = serializer.save()
            cluster_writes.publish(queue, previous_name=previous_name)
        queue = self.get_queryset().get(pk=queue.pk)
        response = Response(self.get_serializer(queue).data)
        response["ETag"] = etag_for(queue)
        return response

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        queue = self.get_object()
        self._require_admin(queue)
        with transaction.atomic(), api_actor(request), _cluster_refusals():
            locked = Queue.objects.select_for_update().get(pk=queue.pk)
            check_not_stale(request, locked)
            try:
                delete_locked(locked)
            except QueueInUse as in_use:
                raise Conflict(str(in_use)) from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Export queues as KAI Queue YAML",
        description="Every queue you can see, as multi-document `scheduling.run.ai/v2` Queue YAML, "
        "parents first. Memory is in MB as KAI writes it.",
        filters=False,
        responses={(200, "application/yaml"): OpenApiResponse(description="Multi-document Queue YAML.")},
    )
    @action(detail=False, methods=["get"], url_path="export", pagination_class=None, filter_backends=[])
    def export(self, request: Request) -> HttpResponse:
        queues = self.get_queryset()
        text = kai_yaml.export_queues(list(queues))
        return HttpResponse(text, content_type="application/yaml; charset=utf-8")

    @extend_schema(
        summary="Import KAI Queue YAML",
        description="Create or update queues from multi-document `scheduling.run.ai/v2` Queue YAML. "
        "All or nothing: the first bad document is reported (400) and nothing is saved. Portal admins only.",
        request={"application/yaml": OpenApiTypes.STR, "text/plain": OpenApiTypes.STR},
        responses={200: QueueImportResultSerializer},
        filters=False,
    )
    @action(
        detail=False, methods=["post"], url_path="import", parser_classes=TEXT_PARSERS, filter_backends=[]
    )
    def import_yaml(self, request: Request) -> Response:
        self._require_admin()
        text = body_text(request)
        try:
            with transaction.atomic(), api_actor(request), _cluster_refusals():
                result = kai_yaml.import_queues(text)
                cluster_writes.publish_imported(result.created + result.updated)
        except kai_yaml.QueueYamlTooLarge as exc:
            raise PayloadTooLarge(str(exc)) from None
        except kai_yaml.QueueYamlError as exc:
            raise exceptions.ValidationError(
                # DRF turns every leaf into a string anyway; str() only makes that visible to the stubs.
                {"detail": str(exc), "document": str(exc.index), "key": exc.key, "queue": exc.queue,
                 "line": str(exc.line or "")}
            ) from None
        return Response(QueueImportResultSerializer(result).data)

    @extend_schema(
        summary="Usage history of one queue",
        description="Samples written by the scheduling loop, newest first. The window defaults to the "
        "last 24 hours; `since`/`until` are ISO 8601 timestamps.",
        parameters=[
            OpenApiParameter("resource", OpenApiTypes.STR, enum=["gpu", "cpu", "memory"]),
            OpenApiParameter("since", OpenApiTypes.DATETIME),
            OpenApiParameter("until", OpenApiTypes.DATETIME),
        ],
        filters=False,
        responses={200: UsageSampleSerializer(many=True)},
    )
    @action(detail=True, methods=["get"], url_path="usage", filter_backends=[])
    def usage(self, request: Request, name: str | None = None) -> Response:
        queue = self.get_object()
        params = request.query_params.copy()
        if not params.get("since"):
            params["since"] = (timezone.now() - timedelta(hours=24)).isoformat()
        samples = UsageSample.objects.filter(queue=queue).order_by("-sampled_at", "resource")
        filterset = UsageSampleFilterSet(params, queryset=samples, request=request)
        if not filterset.is_valid():
            raise exceptions.ValidationError(filterset.errors)
        page = self.paginate_queryset(filterset.qs)
        serializer = UsageSampleSerializer(page, many=True)
        return self.get_paginated_response(serializer.data)

    @extend_schema(
        summary="Preview a quota change (what-if)",
        description="Send the same fields as PATCH. Nothing is saved: the answer is what the next "
        "scheduling cycle would do with the change, computed by the engine on the current cluster — new "
        "deserved and fair shares of every affected queue, running jobs that would be evicted or become "
        "reclaimable, pending jobs that would start, and warnings when a quota or limit is set below what "
        "the queue uses now. Invalid changes are a 400 with field errors. Portal admins only.",
        request=QueueSerializer,
        responses={200: QueuePreviewSerializer},
        filters=False,
    )
    @action(detail=True, methods=["post"], url_path="preview", filter_backends=[])
    def preview(self, request: Request, name: str | None = None) -> Response:
        queue = self.get_object()  # 404 before 403
        self._require_admin(queue)
        context = self.get_serializer_context()
        serializer = QueueSerializer(queue, data=request.data, partial=True, context=context)
        serializer.is_valid(raise_exception=True)
        preview = preview_queue_change(queue, dict(serializer.validated_data), timezone.now())
        if not preview.ok:
            raise exceptions.ValidationError(preview.errors)
        return Response(QueuePreviewSerializer(preview).data)
