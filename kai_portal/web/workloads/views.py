"""Job pages: the filtered list, one job's pods and decision timeline, submission and cancel."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count
from django.forms import ModelChoiceField
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from kai_portal.core import units
from kai_portal.core.access import get_visible_or_404
from kai_portal.core.htmx import page_or_fragment
from kai_portal.core.write_throttle import throttle_writes
from kai_portal.history.models import Decision, JobMessage
from kai_portal.previews import forecast_store
from kai_portal.previews.fitcheck import check_fit
from kai_portal.previews.warnings import request_warnings, submit_warnings
from kai_portal.queues.models import Queue
from kai_portal.scheduling import waiting
from kai_portal.teams.models import Team
from kai_portal.web.workloads.waiting import answer as waiting_answer
from kai_portal.workloads import cluster_jobs, lifecycle, pod_security, submission
from kai_portal.workloads.choices import JobState, PodState
from kai_portal.workloads.copying import copy_initial
from kai_portal.workloads.filtersets import JobFilterSet
from kai_portal.workloads.forms import JobSubmitForm, ManifestSubmitForm
from kai_portal.workloads.manifests import EXAMPLE_MANIFEST, ManifestError, submit_manifest
from kai_portal.workloads.models import Job, Pod

PAGE_SIZE = 50
TIMELINE_DECISIONS = 400


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    """Jobs the user may see, filtered by team, queue and state; the table refreshes itself via htmx."""
    filterset = JobFilterSet(request.GET, queryset=Job.objects.visible_to(request.user), request=request)
    jobs = filterset.qs.select_related("queue__team", "submitter", "node_pool").order_by("-created_at", "-id")
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    counts: dict[int, Counter[str]] = {job.pk: Counter() for job in rows}
    for job_id, state, n in (
        Pod.objects.filter(job_id__in=counts)
        .values_list("job_id", "state")
        .annotate(n=Count("id"))
        .order_by()
    ):
        counts[job_id][state] = n
    pending = [job.pk for job in rows if job.state == JobState.PENDING]
    forecasts = forecast_store.stored(pending)  # stored by the scheduling worker; never computed here
    for job in rows:
        job.forecast = forecasts.get(job.pk)
        job.pod_counts = counts[job.pk]
        job.running_pods = counts[job.pk][PodState.RUNNING] + counts[job.pk][PodState.BOUND]
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "jobs": rows,
        "query": query.urlencode(),
        "selected": {k: request.GET.get(k, "") for k in ("team", "queue", "state", "name")},
        "teams": Team.objects.visible_to(request.user).order_by("name"),
        "queues": Queue.objects.visible_to(request.user).leaves().order_by("name"),
        "states": JobState.choices,
    }
    template = page_or_fragment(request, "workloads/job_list.html", "partials/workloads/_table.html")
    return render(request, template, context)


@dataclass
class TimelineEntry:
    """Consecutive cycles in which the scheduler decided the same things about a job."""

    first_cycle: Any
    last_cycle: Any
    cycles: int
    kind: str
    kind_label: str
    action: str
    reason: str
    message: str
    pods: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    evictor_job: str = ""
    evictor_job_uid: str = ""
    evictor_queue: str = ""


def decision_timeline(job: Job, user: Any) -> list[TimelineEntry]:
    """The job's recent decisions, newest first, with repeats across cycles folded into one entry."""
    decisions = list(
        Decision.objects.filter(job=job)
        .select_related("cycle", "node", "evictor_job", "evictor_queue")
        .order_by("-cycle_id", "kind", "pod_name")[:TIMELINE_DECISIONS]
    )
    visible_evictors = set(
        Job.objects.visible_to(user)
        .filter(pk__in={d.evictor_job_id for d in decisions if d.evictor_job_id})
        .values_list("pk", flat=True)
    )
    by_cycle: dict[int, dict[tuple[str, ...], TimelineEntry]] = {}
    for d in decisions:
        key = (d.kind, d.action, d.reason, d.message, str(d.evictor_job_id or ""))
        entries = by_cycle.setdefault(d.cycle_id, {})
        entry = entries.get(key)
        if entry is None:
            evictor = d.evictor_job
            entry = entries[key] = TimelineEntry(
                first_cycle=d.cycle,
                last_cycle=d.cycle,
                cycles=1,
                kind=d.kind,
                kind_label=d.get_kind_display(),
                action=d.get_action_display() if d.action else "",
                reason=d.reason,
                message=d.message,
                evictor_job=evictor.name if evictor else "",
                evictor_job_uid=str(evictor.uid) if evictor and evictor.pk in visible_evictors else "",
                evictor_queue=d.evictor_queue.name if d.evictor_queue else "",
            )
        entry.pods.append(d.pod_name)
        if d.node is not None and d.node.name not in entry.nodes:
            entry.nodes.append(d.node.name)
    timeline: list[TimelineEntry] = []
    previous_keys: frozenset[tuple[Any, ...]] | None = None
    for cycle_id in sorted(by_cycle, reverse=True):
        entries = by_cycle[cycle_id]
        keys = frozenset((k, tuple(e.pods)) for k, e in entries.items())
        if keys == previous_keys:
            # Same decisions as the (newer) cycle above: widen those entries back in time.
            for entry in timeline[-len(entries) :]:
                entry.first_cycle = next(iter(entries.values())).first_cycle
                entry.cycles += 1
            continue
        timeline.extend(entries.values())
        previous_keys = keys
    return timeline


def _job_context(job: Job, user: Any) -> dict[str, Any]:
    pods = list(
        Pod.objects.filter(job=job)
        .select_related("node", "node__pool")
        .prefetch_related("gpu_devices")
        .order_by("index")[:500]
    )
    latest_message = JobMessage.objects.filter(job=job).select_related("cycle").order_by("-cycle_id").first()
    if job.state != JobState.PENDING:
        # A JobMessage row says why the job waited; once it runs (or ended) only the job's own
        # message is current (the cycle clears it when the job starts).
        latest_message = None
    job_forecast = None
    if job.state == JobState.PENDING:
        job_forecast = forecast_store.describe(forecast_store.stored_or_not_yet(job), user)
    return {
        "job": job,
        "cpu_per_task": units.cores_text(job.cpu_millicores),
        "pods": pods,
        "pod_total": job.task_count,
        "timeline": decision_timeline(job, user),
        "latest_message": latest_message,
        "waiting_for": waiting.waiting_for(latest_message.reason) if latest_message else "",
        "forecast": job_forecast,
        "wait": waiting_answer(job, Job.objects.visible_to(user)),
        "now": timezone.now(),
        "can_cancel": not job.is_terminal and Job.objects.cancellable_by(user).filter(pk=job.pk).exists(),
    }


@login_required
def job_detail(request: HttpRequest, uid: str) -> HttpResponse:
    """One job: request, pods with nodes and GPU devices, and why it is where it is. Polls while active."""
    job = get_visible_or_404(
        Job.objects.visible_to(request.user).select_related("queue__team", "submitter", "node_pool"), uid=uid
    )
    context = _job_context(job, request.user)
    template = page_or_fragment(request, "workloads/job_detail.html", "partials/workloads/_job_live.html")
    response = render(request, template, context)
    if job.is_terminal and template.startswith("partials/"):
        response.status_code = 286  # htmx: stop polling, the job will not change any more
    return response


@login_required
@require_POST
def job_cancel(request: HttpRequest, uid: str) -> HttpResponse:
    """Cancel a job: 404 if not visible, 403 if visible but not the user's to cancel."""
    job = get_visible_or_404(Job.objects.visible_to(request.user), uid=uid)
    if not Job.objects.cancellable_by(request.user).filter(pk=job.pk).exists():
        raise PermissionDenied("Only the submitter, a team admin or a portal admin may cancel this job.")
    try:
        lifecycle.cancel_job(job, actor=request.user)
        messages.success(request, f"Job {job.name} cancelled.")
    except (lifecycle.TransitionError, cluster_jobs.ClusterRefused) as exc:
        messages.error(request, str(exc))
    return redirect("workloads:job_detail", uid=job.uid)


@login_required
@require_http_methods(["GET", "POST"])
@throttle_writes
def job_submit(request: HttpRequest) -> HttpResponse:
    """The submission form, limited to the leaf queues of the user's teams."""
    initial: dict[str, Any] | None = {"queue": request.GET.get("queue")} if request.GET.get("queue") else None
    if initial:
        initial["queue"] = Queue.objects.filter(name=initial["queue"]).values_list("pk", flat=True).first()
    initial = copy_initial(request.user, request.GET.get("copy")) or initial  # "copy and edit" a job
    form = JobSubmitForm(request.POST or None, user=request.user, initial=initial)
    warnings: list[str] = []
    if request.method == "POST" and form.is_valid():
        # A job that can never fit, or an implausible request, is submitted only once confirmed.
        warnings = [] if request.POST.get("confirmed") else submit_warnings(request.user, form.instance)
        if not warnings:
            try:
                job = submission.submit(form.instance)
            except cluster_jobs.ClusterRefused as exc:  # kubernetes mode: nothing was saved
                form.add_error(exc.path if exc.path in form.fields else None, exc.message)
            except pod_security.PodPolicyRefused as exc:  # the team's pod policy: nothing was saved
                for violation in exc.violations:
                    form.add_error(None, str(violation))
            except ValidationError as exc:  # a bound of pending tasks (nothing was saved)
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                messages.success(request, f"Job {job.name} submitted to {job.queue.name}.")
                return redirect("workloads:job_detail", uid=job.uid)
    queue_choices = cast("ModelChoiceField[Queue]", form.fields["queue"]).queryset
    has_queue = queue_choices is not None and queue_choices.exists()
    return render(request, "workloads/job_submit.html", {"form": form, "has_queue": has_queue,
                                                         "warnings": warnings})  # fmt: skip


@login_required
@require_POST
@throttle_writes
def job_fit_check(request: HttpRequest) -> HttpResponse:
    """htmx: the fit verdict for the submit form's current values (nothing is saved)."""
    data = request.POST.copy()
    if not data.get("name"):
        data["name"] = "new-job"  # the name does not change the verdict; let a draft without one be checked
    # The engine's verdict explains a task larger than every node; submitting refuses it.
    form = JobSubmitForm(data, user=request.user, refuse_oversized=False)
    context: dict[str, Any] = {"form": form, "verdict": None}
    if form.is_valid():
        context["verdict"] = check_fit(request.user, form.instance, timezone.now())
    return render(request, "partials/workloads/_fit_verdict.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@throttle_writes
def job_submit_yaml(request: HttpRequest) -> HttpResponse:
    """Submit a Kubernetes Pod or Job manifest carrying KAI's labels and annotations."""
    form = ManifestSubmitForm(request.POST or None)
    problems: list[str] = []
    if request.method == "POST" and form.is_valid():
        try:
            job, _ = submit_manifest(form.cleaned_data["manifest"], request.user)
        except ManifestError as exc:
            problems = [f"{path}: {message}" for path, message in exc.problems]
        except cluster_jobs.ClusterRefused as exc:
            problems = [str(exc)]
        else:
            messages.success(request, f"Job {job.name} submitted to {job.queue.name} from YAML.")
            for warning in request_warnings(job):
                messages.warning(request, warning)
            return redirect("workloads:job_detail", uid=job.uid)
    return render(request, "workloads/job_submit_yaml.html", {"form": form, "problems": problems,
                                                              "example": EXAMPLE_MANIFEST})  # fmt: skip
