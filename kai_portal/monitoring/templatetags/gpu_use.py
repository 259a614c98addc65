"""``{% job_gpu_use job as use %}``: a job's stored GPU use for its page's fragment
(``templates/partials/monitoring/_job_gpu_use.html``), so the job page includes one fragment and its
view needs no change. Reads rows only; never Prometheus."""

from __future__ import annotations

from django import template

from kai_portal.monitoring.gpu_use import JobUse, job_gpu_use
from kai_portal.workloads.models import Job

register = template.Library()


@register.simple_tag(name="job_gpu_use")
def job_gpu_use_tag(job: Job) -> JobUse | None:
    return job_gpu_use(job)
