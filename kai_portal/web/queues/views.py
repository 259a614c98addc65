"""Queue pages: the tree with fair-share bars, one queue's history, and the admins' quota forms."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Avg, Count, DateTimeField, DurationField, F, Func, Sum, Value
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from kai_portal.core.access import get_visible_or_404, get_writable_or_403
from kai_portal.core.htmx import HtmxHttpRequest, page_or_fragment
from kai_portal.core.units import RESOURCES, UNLIMITED
from kai_portal.history.models import UsageSample
from kai_portal.history.queue_status import ResourceStatus, latest_status
from kai_portal.nodes.models import GpuDevice, Node
from kai_portal.previews.whatif import PREVIEW_FIELDS, preview_queue_change
from kai_portal.queues import cluster_writes
from kai_portal.queues.deletion import QueueInUse, delete_locked
from kai_portal.queues.forms import QueueForm
from kai_portal.queues.models import Queue
from kai_portal.workloads.choices import JobState


class DateBin(Func):
    """The start of the ``stride``-long bucket (counted from ``origin``) a timestamp falls in.

    PostgreSQL has ``date_bin``; SQLite (``make run``) has no such function, so there the
    bucket is computed on Unix seconds and turned back into SQLite's datetime text.
    """

    function = "date_bin"
    output_field = DateTimeField()

    def __init__(self, stride: timedelta, source: str, origin: datetime) -> None:
        self.stride, self.origin = stride, origin
        super().__init__(Value(stride, output_field=DurationField()), F(source), Value(origin))

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        source_sql, params = compiler.compile(self.get_source_expressions()[1])
        stride_us = max(1, int(self.stride / timedelta(microseconds=1)))
        origin_us = int(self.origin.timestamp() * 1_000_000)
        # julianday() keeps the microseconds that strftime('%s') drops.
        micros = f"CAST(ROUND((julianday({source_sql}) - 2440587.5) * 86400000000) AS INTEGER)"
        bucket = f"(({micros} - {origin_us}) / {stride_us}) * {stride_us} + {origin_us}"
        # %% because Django formats SQL with % (the debug cursor of `make run`'s DEBUG=1 does it literally).
        sql = f"strftime('%%Y-%%m-%%d %%H:%%M:%%f', ({bucket}) / 1000000.0, 'unixepoch')"
        return sql, params


RESOURCE_LABELS = {"gpu": "GPU", "cpu": "CPU", "memory": "Memory"}
WINDOWS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}
# Chart points per window: samples are averaged into this many buckets.
CHART_POINTS = 120


# --- Display helpers -------------------------------------------------------------------------------


def display_amount(resource: str, value: Decimal | int | float | None) -> str:
    """GPUs as devices, CPU in cores, memory in GiB; ``-1`` is unlimited."""
    if value is None:
        return "–"
    number = Decimal(str(value))
    if number == UNLIMITED:
        return "∞"
    if resource == "cpu":
        number = number / 1000
    elif resource == "memory":
        number = number / 1024
    text = f"{number:.2f}".rstrip("0").rstrip(".")
    return text or "0"


UNIT_SUFFIX = {"gpu": "GPU", "cpu": "cores", "memory": "GiB"}


@dataclass
class ShareBar:
    """Deserved, fair share, allocated and requested of one queue and resource, scaled for a bar."""

    resource: str
    quota: Decimal
    limit: Decimal
    deserved: Decimal | None = None
    fair_share: Decimal | None = None
    allocated: Decimal | None = None
    requested: Decimal | None = None
    weight: str = ""
    texts: dict[str, str] = field(default_factory=dict)
    pct: dict[str, float] = field(default_factory=dict)

    @property
    def has_data(self) -> bool:
        return self.fair_share is not None

    @property
    def standing(self) -> str:
        """over (allocated above fair share), starved (wants more than it has, below share), under, at."""
        if not self.has_data:
            return "nodata"
        assert self.allocated is not None and self.fair_share is not None and self.requested is not None
        if self.allocated > self.fair_share:
            return "over"
        if self.allocated < self.fair_share and self.requested > self.allocated:
            return "starved"
        if self.allocated < self.fair_share:
            return "under"
        return "at"

    @property
    def standing_label(self) -> str:
        return {
            "over": "over fair share",
            "starved": "below fair share, waiting",
            "under": "below fair share",
            "at": "at fair share",
            "nodata": "no cycle yet",
        }[self.standing]


def share_bar(queue: Queue, resource: str, sample: ResourceStatus | None) -> ShareBar:
    bar = ShareBar(
        resource=resource, quota=Decimal(queue.quota(resource)), limit=Decimal(queue.limit(resource))
    )
    bar.weight = display_amount("gpu", getattr(queue, f"{resource}_over_quota_weight"))
    if sample is not None and sample["fair_share"] is not None:
        bar.deserved, bar.fair_share = sample["deserved"], sample["fair_share"]
        bar.allocated, bar.requested = sample["allocated"], sample["requested"]
    values = {
        "quota": bar.quota,
        "limit": bar.limit,
        "deserved": bar.deserved,
        "fair_share": bar.fair_share,
        "allocated": bar.allocated,
        "requested": bar.requested,
    }
    bar.texts = {k: display_amount(resource, v) for k, v in values.items()}
    finite = [v for v in values.values() if v is not None and v != UNLIMITED and v > 0]
    scale = max(finite) if finite else Decimal(1)
    bar.pct = {
        k: round(float(min(v, scale) / scale) * 100, 1)
        for k, v in values.items()
        if v is not None and v != UNLIMITED and v >= 0
    }
    return bar


@dataclass
class QueueRow:
    queue: Queue
    depth: int
    is_leaf: bool
    bars: dict[str, ShareBar]
    current: ShareBar | None = None


def tree_rows(queues: list[Queue], status: dict[int, dict[str, ResourceStatus]]) -> list[QueueRow]:
    """Queues depth-first (departments, then their children), each with its share bars."""
    by_parent: dict[int | None, list[Queue]] = {}
    ids = {q.pk for q in queues}
    for q in queues:
        parent = q.parent_id if q.parent_id in ids else None
        by_parent.setdefault(parent, []).append(q)
    rows: list[QueueRow] = []

    def walk(parent: int | None, depth: int) -> None:
        for q in sorted(by_parent.get(parent, []), key=lambda x: (-x.priority, x.name)):
            samples = status.get(q.pk, {})
            bars = {r: share_bar(q, r, samples.get(r)) for r in RESOURCES}
            rows.append(QueueRow(q, depth, q.pk not in by_parent, bars))
            walk(q.pk, depth + 1)

    walk(None, 0)
    return rows


@dataclass
class PoolGroup:
    """One node pool's queue tree, with the pool's capacity and its departments' totals.

    A pool is a separate KAI shard: its departments' fair shares add up to at most its capacity."""

    name: str
    capacity: str
    rows: list[QueueRow]
    totals: dict[str, str]


def pool_groups(rows: list[QueueRow], resource: str) -> list[PoolGroup]:
    """``rows`` (the tree, depth-first) split by node pool, in pool name order."""
    capacity = _capacity_by_pool(resource)
    by_pool: dict[str, list[QueueRow]] = {}
    for row in rows:
        by_pool.setdefault(row.queue.node_pool.name, []).append(row)
    groups = []
    for name in sorted(by_pool):
        tops = [row.current for row in by_pool[name] if row.depth == 0 and row.current is not None]
        totals = {
            key: display_amount(resource, sum((getattr(bar, key) or Decimal(0) for bar in tops), Decimal(0)))
            for key in ("deserved", "fair_share", "allocated", "requested")
        }
        groups.append(PoolGroup(name, display_amount(resource, capacity.get(name, 0)), by_pool[name], totals))
    return groups


# --- Pages -----------------------------------------------------------------------------------------


@login_required
def queue_list(request: HttpRequest) -> HttpResponse:
    """The queue tree the user may see, with deserved / fair share / allocated per resource."""
    resource = request.GET.get("resource", "gpu")
    if resource not in RESOURCES:
        resource = "gpu"
    queues = list(Queue.objects.visible_to(request.user).select_related("team", "node_pool"))
    status = latest_status(queues)
    rows = tree_rows(queues, status)
    for row in rows:
        row.current = row.bars[resource]
    sampled = [s["sampled_at"] for per in status.values() for s in per.values() if s["sampled_at"]]
    context = {
        "rows": rows,
        "pools": pool_groups(rows, resource),
        "resource": resource,
        "resource_label": RESOURCE_LABELS[resource],
        "unit": UNIT_SUFFIX[resource],
        "resources": RESOURCE_LABELS,
        "sampled_at": max(sampled) if sampled else None,
        "can_manage": Queue.objects.manageable_by(request.user).exists(),
    }
    template = page_or_fragment(request, "queues/queue_list.html", "partials/queues/_tree.html")
    return render(request, template, context)


@login_required
def queue_detail(request: HtmxHttpRequest, name: str) -> HttpResponse:
    """One queue: its settings, current standing per resource, children and usage history."""
    queue = get_visible_or_404(
        Queue.objects.visible_to(request.user).select_related("parent", "team", "node_pool"), name=name
    )
    window = request.GET.get("window", "")
    if window not in WINDOWS:
        window = default_window(queue)
    resource = request.GET.get("resource", "gpu")
    if resource not in RESOURCES:
        resource = "gpu"
    history = usage_history(queue, resource, window)
    context = {"queue": queue, "window": window, "windows": list(WINDOWS), "resource": resource,
               "resources": RESOURCE_LABELS, "history": history, "unit": UNIT_SUFFIX[resource]}  # fmt: skip
    if request.htmx and not request.htmx.boosted:
        return render(request, "partials/queues/_history.html", context)
    children = list(
        Queue.objects.visible_to(request.user)
        .filter(parent=queue)
        .select_related("team", "node_pool")
        .order_by("name")
    )
    status = latest_status([queue, *children])
    samples = status.get(queue.pk, {})
    context.update(
        bars=[share_bar(queue, r, samples.get(r)) for r in RESOURCES],
        children=tree_rows(children, status),
        active_jobs=queue.jobs.filter(state__in=JobState.active()).count() if not children else None,
        can_manage=Queue.objects.manageable_by(request.user).filter(pk=queue.pk).exists(),
        can_submit=Queue.objects.submittable_by(request.user).filter(pk=queue.pk).exists(),
        preempt_min_runtime=queue.effective_preempt_min_runtime(),
    )
    return render(request, "queues/queue_detail.html", context)


# The day chart's buckets are 12 minutes: with less history than this it draws a dot or two.
SHORT_HISTORY = timedelta(hours=2)


def default_window(queue: Queue) -> str:
    """The window a queue page opens on: the day, unless the queue's samples are all younger than
    SHORT_HISTORY (a fresh deployment), when the hour shows them as a line instead of a dot."""
    since = timezone.now() - WINDOWS["day"]
    older = UsageSample.objects.filter(
        queue=queue, sampled_at__gte=since, sampled_at__lt=timezone.now() - SHORT_HISTORY
    )
    return "day" if older.exists() else "hour"


def half_life() -> timedelta | None:
    """The half-life time-based fair share decays usage with (kai-semantics §2.5); None = no decay."""
    hours = settings.FAIRSHARE_USAGE_HALF_LIFE_HOURS
    return timedelta(hours=float(hours)) if hours else None


def usage_history(queue: Queue, resource: str, window: str) -> dict[str, Any]:
    """Chart series for one queue over a window, averaged into at most CHART_POINTS buckets.

    ``decayed`` is the queue's allocation weighted by 0.5^(age / half-life) up to each
    point, the usage that time-based fair share compares between queues; ``decayed_share``
    divides it by the cluster's capacity the same way (U' in kai-semantics §2.5).
    """
    now = timezone.now()
    span = WINDOWS[window]
    start = now - span
    bucket = span / CHART_POINTS
    # Averaged per bucket in the database (DateBin), so a week of 5-second cycles stays one small result.
    rows = list(
        UsageSample.objects.filter(queue=queue, resource=resource, sampled_at__gte=start)
        .annotate(bucket=DateBin(bucket, "sampled_at", start))
        .values("bucket")
        .annotate(
            allocated_avg=Avg("allocated"),
            requested_avg=Avg("requested"),
            deserved_avg=Avg("deserved"),
            fair_share_avg=Avg("fair_share"),
            n=Count("id"),
        )
        .order_by("bucket")
    )
    scale = {"gpu": 1.0, "cpu": 1000.0, "memory": 1024.0}[resource]
    labels: list[str] = []
    series: dict[str, list[float | None]] = {
        k: [] for k in ("allocated", "requested", "deserved", "fair_share")
    }
    points: list[tuple[datetime, float]] = []
    for row in rows:
        at = row["bucket"] + bucket / 2
        labels.append(timezone.localtime(at).strftime("%a %H:%M" if window == "week" else "%H:%M"))
        for name in series:
            series[name].append(round(float(row[f"{name}_avg"]) / scale, 3))
        points.append((at, float(row["allocated_avg"])))
    # The whole cluster's schedulable capacity (GPU devices, millicores or MiB).
    capacity = sum(_capacity_by_pool(resource).values())
    decayed, share = _decayed(points, capacity)
    return {
        "labels": labels,
        "series": {**series, "decayed": [round(v / scale, 3) for v in decayed]},
        "decayed_share_pct": round(share * 100, 1) if share is not None else None,
        "capacity": round(capacity / scale, 2),
        "half_life": half_life(),
        "samples": sum(row["n"] for row in rows),
    }


def _capacity_by_pool(resource: str) -> dict[str, float]:
    """Schedulable capacity of a resource per node pool (one query)."""
    nodes = Node.objects.filter(schedulable=True, ready=True)
    if resource == "gpu":
        rows = GpuDevice.objects.filter(node__in=nodes).values("node__pool__name").annotate(total=Count("pk"))
        return {row["node__pool__name"]: float(row["total"]) for row in rows}
    field_name = "cpu_millicores" if resource == "cpu" else "memory_mib"
    totals = nodes.values("pool__name").annotate(total=Sum(field_name))
    return {row["pool__name"]: float(row["total"] or 0) for row in totals}


def _decayed(points: list[tuple[datetime, float]], capacity: float) -> tuple[list[float], float | None]:
    """Running decayed average allocation at each point, and U' at the last point."""
    life = half_life()
    used = weight = 0.0
    previous: datetime | None = None
    out: list[float] = []
    for at, allocated in points:
        if previous is not None:
            factor = math.pow(0.5, (at - previous).total_seconds() / life.total_seconds()) if life else 1.0
            used, weight = used * factor, weight * factor
        used += allocated
        weight += 1
        previous = at
        out.append(used / weight)
    share = (used / (weight * capacity)) if weight and capacity else None
    return out, share


@login_required
@require_http_methods(["GET", "POST"])
def queue_create(request: HttpRequest) -> HttpResponse:
    """Portal admins create a queue; everyone else is refused (403)."""
    if not getattr(request.user, "is_portal_admin", False):
        raise PermissionDenied("Only portal admins create queues.")
    initial = {"parent": request.GET.get("parent")} if request.GET.get("parent") else None
    form = QueueForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        refused = _save_and_publish(form, previous_name=None)
        if refused is None:
            messages.success(request, f"Queue {form.instance.name} created.")
            return redirect("queues:queue_detail", name=form.instance.name)
        return render(request, "queues/queue_form.html", {"form": form, "queue": None}, status=refused)
    return render(request, "queues/queue_form.html", {"form": form, "queue": None})


def _save_and_publish(form: QueueForm, previous_name: str | None) -> int | None:
    """Save the form and (kubernetes mode) write the queue to its Queue object, all or nothing.

    None when saved; else the HTTP status of the refusal (409 the object changed, 503 the cluster
    could not be asked), with the cluster's reason as a form error and the row rolled back.
    """
    try:
        with transaction.atomic():
            queue = form.save()
            cluster_writes.publish(queue, previous_name=previous_name, seen_version=form.seen_version())
    except cluster_writes.QueueWriteRefused as refused:
        form.add_error(None, str(refused))
        return 409 if refused.conflict else 503
    return None


@login_required
@require_http_methods(["GET", "POST"])
def queue_edit(request: HttpRequest, name: str) -> HttpResponse:
    """Edit quotas, limits, weights, priority or parent. 404 if not visible, 403 if read-only."""
    queue = get_writable_or_403(
        Queue.objects.visible_to(request.user), Queue.objects.manageable_by(request.user), name=name
    )
    # The form writes the posted values onto its instance even when they are invalid; give it a copy
    # so the page (links, title) keeps the stored name: a posted name such as "a/b" cannot be reversed
    # into a URL and used to answer 500.
    form = QueueForm(request.POST or None, instance=Queue.objects.get(pk=queue.pk))
    audit_url = reverse("audit:entry_list") + f"?queue={queue.pk}"
    context = {"form": form, "queue": queue, "audit_url": audit_url}
    if request.method == "POST" and form.is_valid():
        refused = _save_and_publish(form, previous_name=queue.name)
        if refused is not None:
            return render(request, "queues/queue_form.html", context, status=refused)
        messages.success(
            request, f"Queue {form.instance.name} saved. Fair shares change from the next scheduling cycle."
        )
        return redirect("queues:queue_detail", name=form.instance.name)
    return render(request, "queues/queue_form.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def queue_delete(request: HttpRequest, name: str) -> HttpResponse:
    """Confirm, then delete a queue with no child queues and no jobs (``deletion.delete_locked``,
    the API's rule). 404 if not visible, 403 if read-only; a refusal answers 409 (in use, or the
    Queue object changed in the cluster) or 503 (the cluster could not be asked), deleting nothing."""
    queue = get_writable_or_403(
        Queue.objects.visible_to(request.user), Queue.objects.manageable_by(request.user), name=name
    )
    context: dict[str, Any] = {"queue": queue, "kubernetes": settings.CLUSTER_BACKEND == "kubernetes"}
    if request.method == "POST":
        try:
            with transaction.atomic():
                delete_locked(Queue.objects.select_for_update().get(pk=queue.pk))
        except QueueInUse as in_use:
            context["error"] = str(in_use)
            return render(request, "queues/queue_delete.html", context, status=409)
        except cluster_writes.QueueWriteRefused as refused:
            context["error"] = str(refused)
            status = 409 if refused.conflict else 503
            return render(request, "queues/queue_delete.html", context, status=status)
        messages.success(request, f"Queue {queue.name} deleted.")
        return redirect("queues:queue_list")
    return render(request, "queues/queue_delete.html", context)


@login_required
@require_POST
def queue_preview(request: HttpRequest, name: str) -> HttpResponse:
    """htmx: the impact of the quota form's values on the next cycle, shown under the form; saves nothing."""
    queue = get_writable_or_403(
        Queue.objects.visible_to(request.user), Queue.objects.manageable_by(request.user), name=name
    )
    # A fresh copy: the form writes its values onto the instance, which is never saved.
    form = QueueForm(request.POST, instance=Queue.objects.select_related("parent").get(pk=queue.pk))
    context: dict[str, Any] = {"form": form, "queue": queue, "preview": None}
    if form.is_valid():
        changes = {f: form.cleaned_data[f] for f in PREVIEW_FIELDS if f in form.cleaned_data}
        context["preview"] = preview_queue_change(queue, changes, timezone.now())
    return render(request, "partials/queues/_preview.html", context)
