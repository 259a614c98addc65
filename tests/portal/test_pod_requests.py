"""A pod's request counted as Kubernetes counts it, init containers, sidecars and overhead
included, on every path a pod spec enters the portal (issue 26): a manifest on the YAML page,
the API and the CLI, and pods read from the cluster (its own and other schedulers')."""

from __future__ import annotations

import io
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from kai_portal.cli.main import main
from kai_portal.cluster.backends.kubernetes.objects import parse_foreign_pod, parse_pod
from kai_portal.workloads.manifests import ManifestError, parse_manifest
from kai_portal.workloads.models import Job
from tests.portal import factories
from tests.portal.web.api_world import World, build_world

GPU = "nvidia.com/gpu"
QUEUE = "kai.scheduler/queue"


def _c(name: str, sidecar: bool = False, **resources: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "busybox", "resources": resources}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def _spec(containers: list[Any], inits: list[Any] | None = None, overhead: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if inits is not None:
        spec["initContainers"] = inits
    if overhead is not None:
        spec["overhead"] = overhead
    return spec


def _cluster_pod(spec: dict[str, Any], node: str | None = None) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "team-a", "name": "p-0", "uid": "u1", "labels": {QUEUE: "q"}},
        "spec": {**spec, "schedulerName": "kai-scheduler", **({"nodeName": node} if node else {})},
        "status": {"phase": "Running" if node else "Pending"},
    }


# (pod spec, expected GPUs, CPU cores, memory bytes), each worked by Kubernetes' PodRequests.
CASES = [
    pytest.param(
        _spec([_c("main")], [_c("init", limits={GPU: 8})]),
        8,
        0,
        0,
        id="issue-26: an init container's 8 GPUs with none in the containers",
    ),
    pytest.param(
        _spec(
            [_c("a", requests={"cpu": "1", "memory": "1Gi"}), _c("b", requests={"cpu": "1"})],
            [
                _c("i1", requests={"cpu": "2", "memory": "1Gi"}),
                _c("i2", requests={"cpu": "2", "memory": "3Gi"}),
            ],
        ),
        0,
        2,
        3 * 2**30,
        id="plain init containers: the largest per resource, not their sum",
    ),
    pytest.param(
        _spec(
            [_c("main", requests={"cpu": "2"})],
            [_c("proxy", sidecar=True, requests={"cpu": "1"}), _c("warm", requests={"cpu": "2500m"})],
        ),
        0,
        Decimal("3.5"),
        0,
        id="a sidecar started before an init container adds to its peak",
    ),
    pytest.param(
        _spec(
            [_c("main", requests={"cpu": "2"})],
            [_c("warm", requests={"cpu": "2500m"}), _c("proxy", sidecar=True, requests={"cpu": "1"})],
        ),
        0,
        3,
        0,
        id="a sidecar started after it does not; it runs with the containers",
    ),
    pytest.param(
        _spec([_c("main", limits={GPU: 1})], [_c("agent", sidecar=True, limits={GPU: 1})]),
        2,
        0,
        0,
        id="a sidecar's GPU adds to the containers'",
    ),
    pytest.param(
        _spec(
            [_c("main", limits={"cpu": "1", "memory": "1Gi"})], overhead={"cpu": "250m", "memory": "120Mi"}
        ),
        0,
        Decimal("1.25"),
        2**30 + 120 * 2**20,
        id="limits stand for missing requests; overhead on top",
    ),
]


@pytest.mark.parametrize(("spec", "gpus", "cpu", "memory"), CASES)
def test_a_cluster_pod_asks_what_kubernetes_counts(
    spec: dict[str, Any], gpus: int, cpu: Decimal, memory: int
) -> None:
    observed = parse_pod(_cluster_pod(spec), [QUEUE])
    assert (observed.gpu.whole, observed.cpu_millis, observed.memory_mib) == (
        gpus, cpu * 1000, memory // 2**20,
    )  # fmt: skip
    foreign = parse_foreign_pod(_cluster_pod(spec, node="n1"))
    assert foreign is not None and (foreign.gpus, foreign.cpu_millis, foreign.memory_mib) == (
        gpus, cpu * 1000, memory // 2**20,
    )  # fmt: skip


def _pod_manifest(name: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {QUEUE: "ml-train"}}, "spec": spec,
    })  # fmt: skip


@pytest.mark.parametrize(("spec", "gpus", "cpu", "memory"), CASES)
def test_a_manifest_job_asks_what_its_pod_asks(
    db: None, spec: dict[str, Any], gpus: int, cpu: Decimal, memory: int
) -> None:
    build_world()
    job = parse_manifest(_pod_manifest("counted", spec))
    assert (job.gpu_count, job.cpu_millicores, job.memory_mib) == (gpus, cpu * 1000, memory // 2**20)


@pytest.fixture
def world(db: None) -> World:
    return build_world()


def test_an_init_containers_gpus_are_counted_through_the_api(world: World) -> None:
    factories.node("big-node", gpus=8)
    spec = _spec([_c("main", requests={"cpu": "1"})], [_c("fetch", limits={GPU: 8})])
    response = world.client("member").post(
        "/api/v1/jobs/manifest/", _pod_manifest("init-gpus", spec), content_type="application/yaml"
    )
    assert response.status_code == 201, response.content
    assert response.json()["gpu_count"] == 8
    assert Job.objects.get(name="init-gpus").gpu_count == 8


@pytest.mark.django_db(transaction=True)
def test_an_init_containers_gpus_are_counted_through_the_cli(live_server: Any, tmp_path: Path) -> None:
    people = build_world()
    path = tmp_path / "job.yaml"
    path.write_text(_pod_manifest("cli-init-gpus", _spec([_c("main")], [_c("fetch", limits={GPU: 2})])))
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", live_server.url, "--token", people.secrets["member"], "submit", "-f", str(path)],
                out=out, err=err)  # fmt: skip
    assert code == 0, err.getvalue()
    assert Job.objects.get(name="cli-init-gpus").gpu_count == 2


@pytest.mark.parametrize(
    ("spec", "path", "words"),
    [
        (
            _spec([_c("main")], [_c("fetch", limits={GPU: "lots"})]),
            'spec.initContainers[0].resources.limits["nvidia.com/gpu"]',
            "whole number",
        ),
        (
            _spec([_c("main")], [_c("fetch", limits={GPU: 2}, requests={GPU: 1})]),
            'spec.initContainers[0].resources.requests["nvidia.com/gpu"]',
            "must equal the limit (2)",
        ),
        (
            _spec([_c("main")], [_c("fetch", requests={"cpu": "much"})]),
            'spec.initContainers[0].resources.requests["cpu"]',
            "quantity",
        ),
        (_spec([_c("main")], overhead={"memory": "x"}), 'spec.overhead["memory"]', "quantity"),
        ({**_spec([_c("main")]), "initContainers": {"a": 1}}, "spec.initContainers", "list"),
    ],
)
def test_a_bad_init_container_or_overhead_is_refused_at_its_path(
    db: None, spec: dict[str, Any], path: str, words: str
) -> None:
    build_world()
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_pod_manifest("bad", spec))
    assert caught.value.path == path and words in caught.value.message


def test_a_cluster_pod_with_an_init_container_asking_8_gpus_asks_8() -> None:
    spec = _spec([_c("main", requests={"cpu": "500m"})], [_c("fetch", limits={GPU: 8}, requests={GPU: 8})])
    observed = parse_pod(_cluster_pod(spec), [QUEUE])
    assert (observed.gpu.whole, observed.cpu_millis) == (8, 500)
    foreign = parse_foreign_pod(_cluster_pod(spec, node="n1"))
    assert foreign is not None and (foreign.gpus, foreign.cpu_millis) == (8, 500)


def test_a_cluster_pods_sidecar_and_overhead_count() -> None:
    spec = _spec(
        [_c("main", requests={"cpu": "1", "memory": "1Gi"}, limits={GPU: 1})],
        [_c("mesh", sidecar=True, requests={"cpu": "500m", "memory": "256Mi"})],
        overhead={"cpu": "100m", "memory": "64Mi"},
    )
    observed = parse_pod(_cluster_pod(spec), [QUEUE])
    assert (observed.gpu.whole, observed.cpu_millis, observed.memory_mib) == (1, 1600, 1024 + 256 + 64)
