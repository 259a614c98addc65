"""Jobs and their pods.

Members see their teams' jobs (admins all) and submit only to their teams'
leaf queues. Cancelling: your own jobs, your team's if you are its admin,
any if you are a portal admin; a finished job is a 409.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from kai_portal.core.api import TEXT_PARSERS, Conflict, JsonTextParser, body_text
from kai_portal.previews import forecast_store
from kai_portal.previews.fitcheck import check_fit
from kai_portal.previews.serializers import ForecastDetailSerializer, ForecastSerializer
from kai_portal.web.workloads.api.serializers import (
    FitVerdictSerializer,
    JobDetailSerializer,
    JobSerializer,
    ManifestErrorSerializer,
    PodSerializer,
    forecast_data,
)
from kai_portal.workloads import cluster_jobs, lifecycle, submission
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.filtersets import JobFilterSet, PodFilterSet
from kai_portal.workloads.manifest_values import ManifestTooLarge
from kai_portal.workloads.manifests import EXAMPLE_MANIFEST, ManifestError, submit_manifest
from kai_portal.workloads.models import Job, Pod

if TYPE_CHECKING:
    from kai_portal.accounts.models import User


def _pod_count(states: list[str] | None = None) -> Coalesce:
    """The job's pods (in ``states``), counted in a correlated subquery.

    A subquery per row, not ``COUNT(...) ... LEFT JOIN pods GROUP BY job``: PostgreSQL evaluates it
    only for the rows it returns (the page), and the paginator's ``COUNT(*)`` leaves it out, so a
    page costs the same however many pods the visible jobs have.
    """
    pods = Pod.objects.filter(job=OuterRef("pk"))
    if states is not None:
        pods = pods.filter(state__in=states)
    counted = pods.order_by().values("job").annotate(c=Count("*")).values("c")
    return Coalesce(Subquery(counted, output_field=IntegerField()), 0)


def _pod_counts() -> dict[str, Coalesce]:
    return {
        "pods_total": _pod_count(),
        "pods_pending": _pod_count([PodState.PENDING]),
        "pods_running": _pod_count([PodState.BOUND, PodState.RUNNING]),
        "pods_finished": _pod_count([PodState.SUCCEEDED, PodState.FAILED]),
    }


IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="Any unique string (a UUID) per submission, at most 255 characters. Retrying with the "
    "same key and the same body returns the job the first request created (with "
    "`Idempotent-Replayed: true`), never a duplicate, even when the first answer was lost; the same key "
    "with another body is a 409.",
)


def _refused(exc: cluster_jobs.ClusterRefused) -> Response:
    """What the cluster refused (kubernetes mode), with nothing saved: 400 for a request the
    cluster cannot take, 409 for a clash with what is there, 503 when it could not be reached."""
    return Response({"detail": exc.message, "path": exc.path}, status=exc.status)


def idempotency_key(request: Request) -> str:
    key = request.headers.get("Idempotency-Key", "").strip()
    if len(key) > submission.MAX_IDEMPOTENCY_KEY:
        raise exceptions.ValidationError(
            {"Idempotency-Key": [f"At most {submission.MAX_IDEMPOTENCY_KEY} characters (got {len(key)})."]}
        )
    return key


def _earlier(request: Request, key: str, digest: str) -> Job | None:
    """The job a retry with this key replays; 409 when the key came with another body."""
    try:
        return submission.earlier_submission(request.user, key, digest)
    except submission.KeyReused as exc:
        raise Conflict(str(exc)) from None


class JobViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):
    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    lookup_field = "uid"
    lookup_value_regex = "[0-9a-fA-F-]{32,36}"
    ordering_fields = ["created_at", "updated_at", "name", "state", "priority", "queue__name"]
    ordering = ["-created_at"]

    def get_queryset(self) -> QuerySet[Job]:
        return (
            Job.objects.visible_to(self.request.user)
            .select_related("queue__team", "submitter", "node_pool")
            .annotate(**_pod_counts())
        )

    def get_serializer_class(self) -> type[BaseSerializer]:
        # The detail adds what blocks a pending job (one more query; a list would pay it per row).
        return JobDetailSerializer if self.action == "retrieve" else JobSerializer

    def get_serializer(self, *args: Any, **kwargs: Any) -> BaseSerializer:
        if kwargs.get("many") and args:
            # A page of jobs: their forecasts in one batch, not one serializer per pending row.
            rows = list(args[0])
            context = kwargs.setdefault("context", self.get_serializer_context())
            context["forecast_data"] = forecast_data(rows)
            args = (rows, *args[1:])
        return super().get_serializer(*args, **kwargs)

    @extend_schema(parameters=[IDEMPOTENCY_KEY])
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Submit a job. With an ``Idempotency-Key`` header, a retry returns the first job."""
        key = idempotency_key(request)
        digest = submission.request_digest(request.data) if key else ""
        earlier = _earlier(request, key, digest)
        if earlier is not None:
            return self._replayed(earlier)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        submitter = cast("User", request.user)  # IsAuthenticated: never anonymous
        try:
            job, created = submission.submit_once(
                Job(**serializer.validated_data, submitter=submitter), key, digest=digest
            )
        except cluster_jobs.ClusterRefused as exc:
            return _refused(exc)
        except submission.KeyReused as exc:
            raise Conflict(str(exc)) from None
        if not created:
            return self._replayed(job)
        data = self.get_serializer(self.get_queryset().get(pk=job.pk)).data
        return Response(data, status=status.HTTP_201_CREATED)

    def _replayed(self, job: Job) -> Response:
        response = Response(self.get_serializer(self.get_queryset().get(pk=job.pk)).data, status=201)
        response["Idempotent-Replayed"] = "true"
        return response

    @extend_schema(
        request=None,
        responses={
            200: JobSerializer,
            403: OpenApiResponse(description="You may see the job but not cancel it."),
            409: OpenApiResponse(description="The job already finished or was cancelled."),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, uid: str | None = None) -> Response:
        job = self.get_object()
        if not Job.objects.cancellable_by(request.user).filter(pk=job.pk).exists():
            raise exceptions.PermissionDenied(
                "You may cancel your own jobs; team admins their team's jobs; portal admins any job."
            )
        try:
            lifecycle.cancel_job(job, actor=request.user)
        except lifecycle.TransitionError as exc:
            raise Conflict(str(exc)) from None
        except cluster_jobs.ClusterRefused as exc:
            return _refused(exc)
        return Response(self.get_serializer(self.get_queryset().get(pk=job.pk)).data)

    @extend_schema(
        filters=False,
        responses={
            200: ForecastDetailSerializer,
            409: OpenApiResponse(description="The job is not pending: it has no queue position."),
        },
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def forecast(self, request: Request, uid: str | None = None) -> Response:
        """Queue position, jobs ahead and estimated start of a pending job."""
        job = self.get_object()
        if job.state != JobState.PENDING:
            raise Conflict(f"Job {job.name} is {job.state}, not pending: it has no queue position.")
        fc = forecast_store.stored_or_not_yet(job)
        seen = forecast_store.describe(fc, request.user)
        data = {**ForecastSerializer(fc).data, "ahead_visible": seen["ahead_visible"],
                "ahead_other_teams": seen["ahead_hidden"]}  # fmt: skip
        return Response(ForecastDetailSerializer(data).data)

    @extend_schema(filters=False, responses={200: PodSerializer(many=True)})
    @action(detail=True, methods=["get"], filter_backends=[])
    def pods(self, request: Request, uid: str | None = None) -> Response:
        job = self.get_object()
        pods = Pod.objects.filter(job=job).select_related("job", "node").prefetch_related("gpu_devices")
        page = self.paginate_queryset(pods.order_by("index"))
        return self.get_paginated_response(PodSerializer(page, many=True).data)

    @extend_schema(
        summary="Submit a Kubernetes manifest",
        description="A `v1` Pod or `batch/v1` Job as YAML or JSON, with KAI's labels and annotations: "
        "`kai.scheduler/queue` (or legacy `runai/queue`), `gpu-fraction`, `gpu-memory`, "
        "`gpu-fraction-num-devices`, `nvidia.com/gpu` limits, `priorityClassName`, "
        "`kai.scheduler/preemptibility`, `kai.scheduler/batch-min-member`, `kai.scheduler/node-pool`. "
        "A bad manifest is a 400 naming the path that is wrong; nothing is created. A manifest over "
        "`MANIFEST_MAX_BYTES` is a 413, one with more than `MANIFEST_MAX_NODES` values a 400.",
        request={
            "application/yaml": OpenApiTypes.STR,
            "application/json": OpenApiTypes.OBJECT,
            "text/plain": OpenApiTypes.STR,
        },
        responses={201: JobSerializer, 400: ManifestErrorSerializer, 413: ManifestErrorSerializer},
        parameters=[IDEMPOTENCY_KEY],
        examples=[OpenApiExample("batch Job", value=EXAMPLE_MANIFEST, media_type="application/yaml")],
        filters=False,
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="manifest",
        parser_classes=[*TEXT_PARSERS, JsonTextParser],
        filter_backends=[],
    )
    def manifest(self, request: Request) -> Response:
        key = idempotency_key(request)
        text = body_text(request)
        earlier = _earlier(request, key, submission.request_digest(text) if key else "")
        if earlier is not None:
            return self._replayed(earlier)
        try:
            job, created = submit_manifest(text, request.user, idempotency_key=key)
        except ManifestError as exc:
            problems = [{"path": path, "message": message} for path, message in exc.problems]
            too_large = isinstance(exc, ManifestTooLarge)
            return Response(
                {"detail": str(exc), "path": exc.path, "message": exc.message, "problems": problems},
                status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE if too_large else status.HTTP_400_BAD_REQUEST,
            )
        except cluster_jobs.ClusterRefused as exc:
            return _refused(exc)
        except submission.KeyReused as exc:
            raise Conflict(str(exc)) from None
        if not created:
            return self._replayed(job)
        return Response(
            self.get_serializer(self.get_queryset().get(pk=job.pk)).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(
        summary="Fit check: would this job start now?",
        description="Send the same fields as a submission. Nothing is saved: the engine runs on the "
        "cluster as it is now plus this job and says whether it starts now, waits (and why), needs to "
        "evict running jobs (naming them), or can never fit (checked on an empty cluster of the same "
        "nodes: no node that big, above the queue's limit, non-preemptible above quota). "
        "The queue must be one you may submit to (400 otherwise).",
        request=JobSerializer,
        responses={200: FitVerdictSerializer},
        filters=False,
    )
    @action(detail=False, methods=["post"], url_path="fit-check", filter_backends=[])
    def fit_check(self, request: Request) -> Response:
        serializer = JobSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        try:
            verdict = check_fit(request.user, dict(serializer.validated_data), timezone.now())
        except DjangoValidationError as exc:
            raise exceptions.ValidationError(exc.message_dict) from None
        return Response(FitVerdictSerializer(verdict).data)


class PodViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = PodSerializer
    filterset_class = PodFilterSet
    ordering_fields = ["created_at", "updated_at", "name", "state", "reason_at"]
    ordering = ["job_id", "index"]

    def get_queryset(self) -> QuerySet[Pod]:
        return (
            Pod.objects.visible_to(self.request.user)
            .select_related("job", "node")
            .prefetch_related("gpu_devices")
        )
