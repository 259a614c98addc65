"""The plan form: a window of history and a change (queues' GPU quota, limit and over-quota
weight; extra nodes), bounded so one plan stays a few minutes of the worker's time.

Every refusal names the field and says what to do; a refused form keeps what was typed."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.utils import timezone

from kai_portal.nodes.models import GpuDevice, NodePool
from kai_portal.planning.history import count_in_window
from kai_portal.planning.replay import ExtraNodes, PlanInputs
from kai_portal.queues.models import Queue

MAX_WINDOW = timedelta(days=14)
MIN_WINDOW = timedelta(hours=1)
MAX_JOBS = 3000
MAX_EXTRA_NODES = 64
MAX_GPUS_PER_NODE = 16
MAX_GPU_AMOUNT = Decimal(100_000)
MAX_WEIGHT = Decimal(1000)
# (form field suffix, engine key, label)
QUEUE_FIELDS = (
    ("gpu_quota", "gpu_quota", "GPU quota"),
    ("gpu_limit", "gpu_limit", "GPU limit"),
    ("gpu_weight", "gpu_over_quota_weight", "GPU over-quota weight"),
)
LOCAL_INPUT = "%Y-%m-%dT%H:%M"


def _count(label: str, initial: int, least: int, most: int, most_note: str = "") -> forms.IntegerField:
    """An optional whole-number field whose refusals name the field and the bound crossed."""
    return forms.IntegerField(
        label=label, required=False, initial=initial, min_value=least, max_value=most,
        error_messages={
            "min_value": f"{label}: enter {least} or more.",
            "max_value": f"{label}: at most {most}{most_note}.",
            "invalid": f"{label}: enter a whole number.",
        },
    )  # fmt: skip


def _when(label: str, initial: datetime) -> forms.DateTimeField:
    return forms.DateTimeField(
        label=label,
        initial=timezone.localtime(initial).strftime(LOCAL_INPUT),
        input_formats=[LOCAL_INPUT, "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL_INPUT),
        error_messages={
            "required": f"{label}: enter a date and time.",
            "invalid": f"{label}: enter a date and time (YYYY-MM-DD HH:MM).",
        },
    )  # fmt: skip


class PlanForm(forms.Form):
    def __init__(self, *args: Any, now: datetime, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.now = now
        self.fields["window_start"] = _when("Window start", now - timedelta(days=7))
        self.fields["window_end"] = _when("Window end", now)
        self.queues = list(Queue.objects.select_related("team").order_by("name"))
        for q in self.queues:
            for suffix, _key, label in QUEUE_FIELDS:
                self.fields[f"q{q.pk}_{suffix}"] = forms.DecimalField(
                    label=f"{q.name} {label}",
                    required=False,
                    initial=_today(q, suffix),
                    max_digits=12,
                    decimal_places=2,
                    widget=forms.NumberInput(attrs={"step": "any", "class": "num"}),
                    error_messages={"invalid": f"{q.name} {label}: enter a number (-1 = unlimited)."},
                )
        self.fields["extra_count"] = _count("Extra nodes", 0, 0, MAX_EXTRA_NODES, " per plan")
        self.fields["extra_gpus_per_node"] = _count("GPUs per node", 8, 1, MAX_GPUS_PER_NODE)
        types = sorted(set(GpuDevice.objects.values_list("model", "memory_mib")))
        self.gpu_types = {f"{m}|{mem}": (m, int(mem)) for m, mem in types} or {"GPU|81920": ("GPU", 81920)}
        self.fields["extra_gpu_type"] = forms.ChoiceField(
            label="GPU type",
            required=False,
            choices=[(k, f"{m} ({mem // 1024} GiB)") for k, (m, mem) in self.gpu_types.items()],
        )
        pools = list(NodePool.objects.order_by("name").values_list("name", flat=True)) or ["default"]
        self.fields["extra_pool"] = forms.ChoiceField(
            label="Node pool", required=False, choices=[(p, p) for p in pools]
        )

    # --- the template's groups -------------------------------------------------------------
    def queue_rows(self) -> list[tuple[Queue, list[forms.BoundField]]]:
        return [(q, [self[f"q{q.pk}_{suffix}"] for suffix, _k, _l in QUEUE_FIELDS]) for q in self.queues]

    # --- validation ----------------------------------------------------------------------------
    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self._check_window(data)
        self.queue_changes = self._check_queues(data)
        self.extra_nodes = self._check_nodes(data)
        if not self.errors and not self.queue_changes and self.extra_nodes is None:
            raise forms.ValidationError(
                "Nothing changes: set another GPU quota, limit or over-quota weight on a queue, "
                "or add extra nodes, then run the plan."
            )
        return data

    def _check_window(self, data: dict[str, Any]) -> None:
        start, end = data.get("window_start"), data.get("window_end")
        if start is None or end is None:
            return
        if end > self.now + timedelta(minutes=5):
            self.add_error("window_end", "Window end: the history ends now; choose a time in the past.")
            return
        if end - start < MIN_WINDOW:
            self.add_error("window_end", "Window end: must be at least an hour after the window start.")
            return
        if end - start > MAX_WINDOW:
            self.add_error(
                "window_end",
                f"Window end: a plan replays at most {MAX_WINDOW.days} days; "
                f"this window is {(end - start).days} days. Move the start or the end closer.",
            )
            return
        jobs = count_in_window(start, end)
        if jobs == 0:
            self.add_error(
                "window_start", "Window start: no job was submitted in this window; choose another."
            )
        elif jobs > MAX_JOBS:
            self.add_error(
                "window_start",
                f"Window start: the window holds {jobs} jobs; a plan replays at most {MAX_JOBS}. "
                "Choose a shorter window.",
            )

    def _check_queues(self, data: dict[str, Any]) -> dict[str, dict[str, float]]:
        changes: dict[str, dict[str, float]] = {}
        for q in self.queues:
            values: dict[str, Decimal] = {}
            for suffix, key, label in QUEUE_FIELDS:
                name = f"q{q.pk}_{suffix}"
                value = data.get(name)
                if value is None:
                    value = _today(q, suffix)
                if suffix == "gpu_weight":
                    if value < 0 or value > MAX_WEIGHT:
                        self.add_error(name, f"{q.name} {label}: enter 0 to {MAX_WEIGHT} (got {value}).")
                        continue
                elif value != -1 and (value < 0 or value > MAX_GPU_AMOUNT):
                    self.add_error(
                        name,
                        f"{q.name} {label}: enter 0 to {MAX_GPU_AMOUNT} GPUs, "
                        f"or -1 for unlimited (got {value}).",
                    )
                    continue
                values[key] = value
            quota, limit = values.get("gpu_quota"), values.get("gpu_limit")
            if quota is not None and limit is not None and limit != -1 and (quota == -1 or limit < quota):
                self.add_error(
                    f"q{q.pk}_gpu_limit",
                    f"{q.name} GPU limit: {limit} is below the quota {quota}; raise the limit "
                    "(or -1 for unlimited) or lower the quota.",
                )
                continue
            changed = {
                key: float(values[key])
                for suffix, key, _l in QUEUE_FIELDS
                if key in values and values[key] != _today(q, suffix)
            }
            if changed:
                changes[q.name] = changed
        return changes

    def _check_nodes(self, data: dict[str, Any]) -> ExtraNodes | None:
        count = data.get("extra_count") or 0
        if not count:
            return None
        gpus = data.get("extra_gpus_per_node")
        kind = data.get("extra_gpu_type") or next(iter(self.gpu_types))
        pool = data.get("extra_pool")
        if gpus is None:
            if "extra_gpus_per_node" not in self.errors:
                self.add_error(
                    "extra_gpus_per_node", "GPUs per node: enter how many GPUs each extra node has."
                )
            return None
        if not pool:
            self.add_error("extra_pool", "Node pool: choose the pool the extra nodes join.")
            return None
        model, memory = self.gpu_types[kind]
        return ExtraNodes(count=count, gpus_per_node=gpus, gpu_model=model, gpu_memory_mib=memory, pool=pool)

    def plan_inputs(self) -> PlanInputs:
        return PlanInputs(
            start=self.cleaned_data["window_start"],
            end=self.cleaned_data["window_end"],
            queue_changes=self.queue_changes,
            extra_nodes=self.extra_nodes,
        )


def _today(q: Queue, suffix: str) -> Decimal:
    field = {"gpu_quota": "gpu_quota", "gpu_limit": "gpu_limit", "gpu_weight": "gpu_over_quota_weight"}[
        suffix
    ]
    return Decimal(getattr(q, field)).quantize(Decimal("0.01"))
