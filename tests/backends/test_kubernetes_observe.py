"""observe(): parsing nodes and pods, and following changes without re-listing."""

from __future__ import annotations

from kubernetes import client

from kai_portal.cluster.backends import TaskStatus
from kai_portal.cluster.backends.kubernetes import KubernetesBackend

from .conftest import make_node, make_pod
from .emulator import KubeApiEmulator


def _gets(emulator: KubeApiEmulator, path: str) -> list[dict[str, str]]:
    return [dict(r.params) for r in emulator.request_log if r.method == "GET" and r.url.path == path]


def test_node_labels_and_allocatable_are_parsed(core: client.CoreV1Api, backend: KubernetesBackend) -> None:
    make_node(core, "gpu-1", gpus=8, labels={
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "kai.scheduler/node-pool": "training",
    })
    make_node(core, "gpu-bytes", labels={"nvidia.com/gpu.memory": str(40 * 2**30 + 12345)},
              spec={"unschedulable": True})
    make_node(core, "cpu-1", gpus=0, conditions=[{"type": "Ready", "status": "False"},
                                                 {"type": "MemoryPressure", "status": "True"}])

    nodes = backend.observe().nodes

    gpu = nodes["gpu-1"]
    assert (gpu.pool, gpu.gpu_count, gpu.gpu_product) == ("training", 8, "NVIDIA-H100-80GB-HBM3")
    assert gpu.gpu_memory_mib == 81500  # rounded down to 100 MiB
    assert (gpu.cpu_millis, gpu.memory_mib, gpu.max_pods) == (64000, 512 * 1024, 110)
    assert gpu.schedulable
    assert nodes["gpu-bytes"].gpu_memory_mib == 40900  # bytes converted to MiB, then rounded
    assert nodes["gpu-bytes"].unschedulable and not nodes["gpu-bytes"].schedulable
    cpu = nodes["cpu-1"]
    assert cpu.gpu_memory_mib is None and cpu.gpu_count == 0
    assert not cpu.ready and cpu.pressure_conditions == ("MemoryPressure",)


def test_pod_labels_annotations_and_quantities_are_parsed(
    core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_pod(core, "frac", labels={"kai.scheduler/queue": "team-a", "priorityClassName": "inference",
                                   "kai.scheduler/preemptibility": "non-preemptible"},
             annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "2",
                          "pod-group-name": "pg-train"},
             requests={"cpu": "1500m", "memory": "2Gi"})
    make_pod(core, "legacy", labels={"runai/queue": "old-team"}, annotations={"gpu-memory": "20000"},
             spec={"priorityClassName": "train"})
    make_pod(core, "bad-fraction", annotations={"gpu-fraction": "1.5"}, gpus=2,
             labels={"kai.scheduler/preemptibility": "sometimes"})
    make_pod(core, "owned", metadata={"ownerReferences": [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train-42", "uid": "u1", "controller": True}]})
    # A finalizer keeps a deleted pod around, as a kubelet's grace period does.
    make_pod(core, "leaving", metadata={"deletionTimestamp": "2026-01-01T00:00:00Z",
                                        "finalizers": ["example.com/hold"]},
             spec={"nodeName": "gpu-1"}, status={"phase": "Running"})
    make_pod(core, "running", spec={"nodeName": "gpu-1"}, status={"phase": "Running"})
    make_pod(core, "bound", spec={"nodeName": "gpu-1"})
    make_pod(core, "gated", spec={"schedulingGates": [{"name": "wait"}]})
    make_pod(core, "other-scheduler", scheduler="default-scheduler")

    pods = backend.observe().pods

    frac = pods["team-a", "frac"]
    assert (frac.queue, frac.priority_class) == ("team-a", "inference")
    assert frac.preemptibility == "non-preemptible"
    assert (frac.gpu.fraction, frac.gpu.num_devices, frac.gpu.whole) == (0.5, 2, 0)
    assert (frac.job.kind, frac.job.name) == ("PodGroup", "pg-train")
    assert (frac.cpu_millis, frac.memory_mib) == (1500, 2048)
    assert frac.status is TaskStatus.PENDING and frac.created_at is not None and frac.uid
    legacy = pods["team-a", "legacy"]
    assert (legacy.queue, legacy.gpu.memory_mib, legacy.priority_class) == ("old-team", 20000, "train")
    bad = pods["team-a", "bad-fraction"]
    assert (bad.gpu.fraction, bad.gpu.whole, bad.queue, bad.preemptibility) == (None, 2, None, None)
    assert (bad.job.kind, bad.job.name) == ("Pod", "bad-fraction")
    assert (pods["team-a", "owned"].job.kind, pods["team-a", "owned"].job.name) == ("Job", "train-42")
    assert pods["team-a", "leaving"].status is TaskStatus.RELEASING
    assert pods["team-a", "leaving"].deletion_timestamp is not None
    assert pods["team-a", "running"].status is TaskStatus.RUNNING
    assert pods["team-a", "bound"].status is TaskStatus.BOUND
    assert pods["team-a", "gated"].status is TaskStatus.GATED
    assert ("team-a", "other-scheduler") not in pods


def test_second_observe_follows_a_watch_instead_of_relisting(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_node(core, "gpu-1")
    make_pod(core, "first")
    first = backend.observe()
    make_pod(core, "second")
    make_node(core, "gpu-2")
    core.delete_namespaced_pod("first", "team-a", _preload_content=False)

    second = backend.observe()

    assert set(second.pods) == {("team-a", "second")}
    assert set(second.nodes) == {"gpu-1", "gpu-2"}
    pod_gets = _gets(emulator, "/api/v1/pods")
    assert [p.get("watch") for p in pod_gets] == [None, "true"]  # one list, then one watch
    assert pod_gets[0]["fieldSelector"] == "spec.schedulerName=kai-scheduler"
    assert pod_gets[1]["resourceVersion"] == first.pod_resource_version
    assert pod_gets[1]["fieldSelector"] == "spec.schedulerName=kai-scheduler"
    assert [p.get("watch") for p in _gets(emulator, "/api/v1/nodes")] == [None, "true"]
    assert int(second.pod_resource_version or 0) > int(first.pod_resource_version or 0)


def test_expired_resource_version_falls_back_to_a_fresh_list(
    emulator: KubeApiEmulator, core: client.CoreV1Api, backend: KubernetesBackend
) -> None:
    make_pod(core, "first")
    backend.observe()
    make_pod(core, "second")
    emulator.compacted_below = emulator.version + 1  # history before now is gone: 410

    state = backend.observe()

    assert set(state.pods) == {("team-a", "first"), ("team-a", "second")}
    pod_gets = _gets(emulator, "/api/v1/pods")
    assert [p.get("watch") for p in pod_gets] == [None, "true", None]
