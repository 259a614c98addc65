"""Job submission forms: the full form and "submit from YAML".

Forms check shape and convert units (CPU cores to millicores, "30m" to a
duration); ``Job.clean()`` checks the rules (leaf queue, one GPU request form,
gang within tasks) and its errors land on the fields they name.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError

from kai_portal.queues.durations import format_go_duration, parse_go_duration
from kai_portal.queues.models import Queue
from kai_portal.workloads import limits
from kai_portal.workloads.capacity import oversized_task_errors
from kai_portal.workloads.models import Job


class GpuMode:
    NONE, WHOLE, FRACTION, MEMORY = "none", "whole", "fraction", "memory"
    CHOICES = [
        (NONE, "No GPU"),
        (WHOLE, "Whole GPUs"),
        (FRACTION, "GPU fraction"),
        (MEMORY, "GPU memory"),
    ]


class JobSubmitForm(forms.ModelForm):
    """A job for one of the user's leaf queues. ``user`` limits the queue choices."""

    gpu_mode = forms.ChoiceField(
        label="GPU per task", choices=GpuMode.CHOICES, initial=GpuMode.WHOLE, widget=forms.RadioSelect
    )
    cpu_cores = forms.DecimalField(
        label="CPU per task (cores)", min_value=0, max_value=limits.MAX_CPU_MILLICORES // 1000,
        max_digits=8, decimal_places=3, initial=1,
        help_text="0.5 = 500 millicores.",
    )  # fmt: skip
    run_time = forms.CharField(
        label="Declared duration", required=False, initial=format_go_duration(limits.DEFAULT_DURATION),
        help_text="How long each task runs on the simulated cluster: 90s, 30m, 2h.",
    )  # fmt: skip

    class Meta:
        model = Job
        fields = [
            "name",
            "queue",
            "task_count",
            "min_member",
            "gpu_count",
            "gpu_fraction",
            "gpu_memory_mib",
            "gpu_fraction_devices",
            "memory_mib",
            "priority_class",
            "image",
            "command",
        ]
        labels = {
            "task_count": "Tasks (pods)",
            "min_member": "Gang minimum",
            "gpu_count": "Whole GPUs per task",
            "gpu_fraction": "GPU fraction per task",
            "gpu_memory_mib": "GPU memory per task (MiB)",
            "gpu_fraction_devices": "Devices per task (fraction / memory)",
            "memory_mib": "Memory per task (MiB)",
        }
        help_texts = {
            "min_member": "Pods that must start together; 0 = elastic.",
            "gpu_fraction": "Strictly between 0 and 1, e.g. 0.5.",
        }
        widgets = {"command": forms.Textarea(attrs={"rows": 2})}

    def __init__(self, *args: Any, user: Any, refuse_oversized: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.refuse_oversized = refuse_oversized
        queue_field = cast("forms.ModelChoiceField[Queue]", self.fields["queue"])
        queue_field.queryset = (
            Queue.objects.submittable_by(user).select_related("team", "node_pool").order_by("name")
        )
        # A per-instance override of the method: the stubs only allow subclassing. The job runs
        # in its queue's node pool, so the choice names it.
        queue_field.label_from_instance = (  # type: ignore[method-assign]
            lambda obj: (
                f"{obj.name} ({obj.team.name}) · pool {obj.node_pool.name}"
                if obj.team
                else f"{obj.name} · pool {obj.node_pool.name}"
            )
        )
        queue_field.empty_label = "Choose a queue"
        queue_field.help_text = "The job runs in its queue's node pool."
        for name in ("gpu_count", "gpu_fraction", "gpu_memory_mib", "gpu_fraction_devices", "memory_mib"):
            self.fields[name].required = False
        # The form opens on "Whole GPUs": with the model's default of 0 beside it, the defaults as
        # shown could not be submitted.
        self.fields["gpu_count"].initial = 1

    def clean_cpu_cores(self) -> int:
        cores: Decimal = self.cleaned_data["cpu_cores"]
        return int(cores * 1000)

    def clean_run_time(self) -> Any:
        text = (self.cleaned_data.get("run_time") or "").strip()
        if not text:
            return None
        try:
            duration = parse_go_duration(text)
        except ValueError as exc:
            raise forms.ValidationError(f"{exc}.") from None
        problem = limits.duration_error(duration)
        if problem:
            raise forms.ValidationError(problem)
        return duration

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        assert data is not None  # ModelForm.clean() returns cleaned_data
        mode = data.get("gpu_mode")
        needed = {
            GpuMode.WHOLE: "gpu_count",
            GpuMode.FRACTION: "gpu_fraction",
            GpuMode.MEMORY: "gpu_memory_mib",
        }
        if mode in needed and data.get(needed[mode]) in (None, 0):
            self.add_error(needed[mode], "Enter an amount for the GPU request you chose.")
        # Only the chosen request form reaches the model; the others are cleared.
        if mode != GpuMode.WHOLE:
            data["gpu_count"] = 0
        if mode != GpuMode.FRACTION:
            data["gpu_fraction"] = None
        if mode != GpuMode.MEMORY:
            data["gpu_memory_mib"] = None
        if mode not in (GpuMode.FRACTION, GpuMode.MEMORY) or not data.get("gpu_fraction_devices"):
            data["gpu_fraction_devices"] = 1
        if data.get("memory_mib") is None:
            data["memory_mib"] = 0
        return data

    def _update_errors(self, errors: Any) -> None:
        # The model names CPU in millicores; this form asks for cores.
        if hasattr(errors, "error_dict") and "cpu_millicores" in errors.error_dict:
            errors.error_dict["cpu_cores"] = errors.error_dict.pop("cpu_millicores")
        super()._update_errors(errors)  # type: ignore[misc]  # stubs omit BaseModelForm._update_errors

    def _post_clean(self) -> None:
        self.instance.cpu_millicores = self.cleaned_data.get("cpu_cores", 0) or 0
        self.instance.duration = self.cleaned_data.get("run_time")
        self.instance.submitter = self.user
        super()._post_clean()  # type: ignore[misc]  # stubs omit BaseModelForm._post_clean
        if self.refuse_oversized and not self.errors:
            # The same refusal as ``submission.submit``, shown on the fields it names.
            oversized = oversized_task_errors(self.instance)
            if oversized:
                self._update_errors(ValidationError({f: [m] for f, m in oversized.items()}))


class ManifestSubmitForm(forms.Form):
    """A Kubernetes Pod or batch/v1 Job manifest with KAI's labels and annotations."""

    manifest = forms.CharField(
        label="Manifest (YAML)",
        widget=forms.Textarea(attrs={"rows": 22, "spellcheck": "false", "class": "code"}),
    )
