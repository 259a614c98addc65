"""The YAML page counts a pod's init containers as Kubernetes does (issue 26)."""

from __future__ import annotations

from typing import Any

from kai_portal.workloads.models import Job


def test_the_yaml_page_counts_an_init_containers_gpus(world: dict, client_for: Any) -> None:
    manifest = """
apiVersion: v1
kind: Pod
metadata:
  name: init-gpus
  labels: {kai.scheduler/queue: alpha-train}
spec:
  initContainers:
    - name: fetch
      image: loader
      resources: {limits: {nvidia.com/gpu: 8}}
  containers:
    - name: main
      image: pytorch
      resources: {requests: {cpu: 500m, memory: 1Gi}}
"""
    response = client_for("member").post("/jobs/submit/yaml/", {"manifest": manifest})
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get(name="init-gpus")
    assert (job.gpu_count, job.cpu_millicores, job.memory_mib) == (8, 500, 1024)
