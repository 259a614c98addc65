"""The workloads table: every job the user may see, sortable, filtered by queue, team, state and
pool, with a CSV of exactly what the page shows (same filterset, same ordering, every page);
and each job's manifest as YAML.

Fixed query count per page: jobs with their queue, team, pool and submitter in one query, the
running-pod counts as an annotation on it, plus the filter choices.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import Any

import django_filters
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, F, Q, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render

from kai_portal.core.access import get_visible_or_404
from kai_portal.nodes.models import NodePool
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Team
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.filtersets import JobFilterSet
from kai_portal.workloads.manifest_export import job_yaml
from kai_portal.workloads.models import Job

PAGE_SIZE = 100
COLUMNS = [  # (sort key, model path, header)
    ("name", "name", "Name"),
    ("namespace", "shown_namespace", "Namespace"),
    ("queue", "queue__name", "Queue"),
    ("team", "queue__team__name", "Team"),
    ("state", "state", "State"),
    ("pool", "node_pool__name", "Pool"),
    ("tasks", "task_count", "Tasks"),
    ("gpus", "gpu_count", "GPUs / task"),
    ("priority", "priority", "Priority"),
    ("submitter", "submitter__username", "Submitter"),
    ("created", "created_at", "Created"),
]


class WorkloadFilterSet(JobFilterSet):
    """The job list's filters plus ``?sort=-created`` (any column, ``-`` for descending)."""

    sort = django_filters.OrderingFilter(fields=[(path, key) for key, path, _ in COLUMNS])

    class Meta(JobFilterSet.Meta):
        fields = [*JobFilterSet.Meta.fields, "sort"]


def filtered_jobs(request: HttpRequest) -> tuple[WorkloadFilterSet, QuerySet[Job]]:
    # Sorted and shown as Job.pod_namespace: the cluster's namespace, else the queue's name.
    visible = Job.objects.visible_to(request.user).annotate(
        shown_namespace=Coalesce(NullIf(F("namespace"), Value("")), F("queue__name"))
    )
    filterset = WorkloadFilterSet(request.GET, queryset=visible, request=request)
    jobs = filterset.qs.select_related("queue__team", "submitter", "node_pool").annotate(
        pods_running=Count("pods", filter=Q(pods__state__in=[PodState.RUNNING, PodState.BOUND]))
    )
    if not request.GET.get("sort"):
        jobs = jobs.order_by("-created_at", "-id")
    else:
        jobs = jobs.order_by(*jobs.query.order_by, "-id")  # a stable order across pages
    return filterset, jobs


def _gpu_text(job: Job) -> str:
    if job.gpu_fraction is not None:
        return f"{job.gpu_fraction.normalize()} × {job.gpu_fraction_devices}"
    if job.gpu_memory_mib is not None:
        return f"{job.gpu_memory_mib} MiB × {job.gpu_fraction_devices}"
    return str(job.gpu_count)


@login_required
def workload_table(request: HttpRequest) -> HttpResponse:
    filterset, jobs = filtered_jobs(request)
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    for job in rows:
        job.gpu_text = _gpu_text(job)
    query = request.GET.copy()
    query.pop("page", None)
    unsorted = query.copy()
    unsorted.pop("sort", None)
    current = request.GET.get("sort", "")
    headers = [
        {"key": key, "label": label, "next": key if current != key else f"-{key}",
         "arrow": "▲" if current == key else "▼" if current == f"-{key}" else ""}
        for key, _path, label in COLUMNS
    ]  # fmt: skip
    context = {
        "page": page,
        "jobs": rows,
        "headers": headers,
        "query": query.urlencode(),
        "unsorted": unsorted.urlencode(),
        "selected": {k: request.GET.get(k, "") for k in ("team", "queue", "state", "node_pool", "name")},
        "teams": Team.objects.visible_to(request.user).order_by("name"),
        "queues": Queue.objects.visible_to(request.user).leaves().order_by("name"),
        "pools": NodePool.objects.order_by("name"),
        "states": JobState.choices,
        "errors": filterset.errors,
    }
    return render(request, "workloads/workload_table.html", context)


class _Echo:
    def write(self, value: str) -> str:
        return value


@login_required
def workload_csv(request: HttpRequest) -> StreamingHttpResponse:
    """The table as CSV, every matching row (not one page), streamed."""
    _filterset, jobs = filtered_jobs(request)
    writer = csv.writer(_Echo())

    def lines() -> Iterator[str]:
        yield writer.writerow(["uid", "name", "namespace", "queue", "team", "state", "pool", "tasks",
                               "running_pods", "gang_minimum", "gpu_request", "cpu_millicores",
                               "memory_mib", "priority", "submitter", "created_at", "started_at",
                               "finished_at"])  # fmt: skip
        for job in jobs.iterator(chunk_size=500):
            yield writer.writerow([
                job.uid, job.name, job.pod_namespace, job.queue.name,
                job.queue.team.name if job.queue.team else "", job.state,
                job.node_pool.name if job.node_pool else "", job.task_count, getattr(job, "pods_running", 0),
                job.min_member, _gpu_text(job), job.cpu_millicores, job.memory_mib, job.priority,
                job.submitter.username if job.submitter else "", _iso(job.created_at), _iso(job.started_at),
                _iso(job.finished_at),
            ])  # fmt: skip

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="workloads.csv"'
    return response


def _iso(value: Any) -> str:
    return value.isoformat() if value else ""


@login_required
def job_yaml_view(request: HttpRequest, uid: str) -> HttpResponse:
    """The job as a KAI-style Pod or batch/v1 Job manifest (404 if not visible)."""
    job = get_visible_or_404(
        Job.objects.visible_to(request.user).select_related("queue", "node_pool"), uid=uid
    )
    return HttpResponse(job_yaml(job), content_type="text/plain; charset=utf-8")
