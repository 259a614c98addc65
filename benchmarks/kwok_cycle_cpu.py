"""The portal's CPU per bound pod in one binding cycle and the cycle after it, on a running cluster.

``make bench-kwok`` measures a whole run (pods arriving over many cycles, pods that never fit, the
control plane's background work over its wall time); this measures the two cycles a bound pod
costs the portal: the one that binds it (ingest of the pending pod, the engine, bind + Events +
``PodBound`` status) and the next one (``observe`` of its watch events, ``sync_cluster_state``).
It creates ``NODES`` KWOK nodes x 8 GPUs and ``PODS`` pending one-GPU pods (all fit when
PODS <= 8 x NODES), waits until the portal's watch cache holds them, runs the two cycles and
prints process CPU per pod bound, main-thread CPU of the cycle's steps, the other threads' CPU
(binds and status writes), and the control plane's CPU from the pid files beside the kubeconfig.
``PROF=/tmp/x`` writes cProfile stats of both cycles to /tmp/x.bind and /tmp/x.idle.

    deploy/k8s-testbed/k8s-up.sh   # K8S_DIR=/tmp/mine for one of your own
    TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/kai_bench_cycle \\
    TEST_REDIS_URL=redis://127.0.0.1:6379/12 PYTHONPATH=$PWD \\
    .venv/bin/python benchmarks/kwok_cycle_cpu.py var/k8s/admin.kubeconfig 125 1000

The database is emptied first, so it must be one a benchmark created (bench_db.py).
"""

from __future__ import annotations

import collections
import contextlib
import cProfile
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "kai_portal.settings_test")

from benchmarks import kwok_throughput as kt  # noqa: E402

STEPS = ("sync_cluster_state", "build_snapshot", "persist_result", "cluster_operations", "record_cycle")


def timed(steps: collections.Counter[str], owner: Any, name: str, label: str) -> None:
    """Wrap ``owner.name`` so its thread CPU adds up under ``label``."""
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.thread_time()
        try:
            return inner(*args, **kwargs)
        finally:
            steps[label] += time.thread_time() - start

    setattr(owner, name, wrapper)


def control_plane_cpu(state: Path) -> dict[str, float]:
    return {name: kt.cpu_seconds(pid) for name, pid in kt.control_plane_pids(state).items()}


def main() -> None:
    kubeconfig, nodes_n, pods_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    kt.ensure_database()
    kt.setup_portal(nodes_n * kt.GPUS_PER_NODE)
    from django.utils import timezone
    from kubernetes import client, config

    import kai_portal.scheduling.cycle as cycle_module
    from kai_portal.cluster.backends.kubernetes import KubernetesBackend
    from kai_portal.cluster.backends.kubernetes import backend as backend_module
    from kai_portal.cluster.backends.kubernetes import binder as binder_module
    from kai_portal.cluster.backends.kubernetes import status as status_module

    def api(pool: int) -> client.ApiClient:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        cfg.connection_pool_maxsize = pool
        return client.ApiClient(cfg)

    core = client.CoreV1Api(api(40))
    suffix = secrets.token_hex(3)
    namespace = f"kwok-cycle-{suffix}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    nodes = kt.make_nodes(core, nodes_n, suffix, 16)
    kt.wait_ready(core, nodes, 300)

    def create(name: str) -> None:
        core.create_namespaced_pod(namespace, kt.pod_body(name), _preload_content=False).read()

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(create, [f"p-{i:05d}" for i in range(pods_n)]))
    backend = KubernetesBackend(api_client=api(20), scheduler_name=kt.SCHEDULER, bind_concurrency=16)
    for _ in range(60):
        backend.observe()
        if sum(1 for key in backend.cache.pods if key[0] == namespace) >= pods_n:
            break
        time.sleep(1)

    steps: collections.Counter[str] = collections.Counter()
    timed(steps, backend_module.KubernetesBackend, "observe", "observe")
    timed(steps, backend_module.KubernetesBackend, "apply", "apply (main thread)")
    timed(steps, binder_module.Binder, "bind_all", "bind_all (main thread)")
    timed(steps, status_module.StatusUpdater, "note_all", "note_all (main thread)")
    timed(steps, cycle_module.scheduler, "run_cycle", "engine run_cycle")
    for name in STEPS:
        timed(steps, cycle_module, name, name)
    others = [0.0]  # CPU of threads that ended during a cycle (the bind and status pools)
    thread_run = threading.Thread.run

    def counted_run(self: threading.Thread) -> None:
        start = time.thread_time()
        try:
            thread_run(self)
        finally:
            others[0] += time.thread_time() - start

    threading.Thread.run = counted_run  # type: ignore[method-assign]
    state = Path(kubeconfig).parent
    plane_before = control_plane_cpu(state)
    prof_path = os.environ.get("PROF")
    bound = 0
    total = 0.0
    for label in ("bind", "idle"):
        steps.clear()
        others[0] = 0.0
        if label == "idle":
            time.sleep(float(os.environ.get("SETTLE", "5")))  # the pods' Running events arrive
        profile = cProfile.Profile() if prof_path else None
        if profile:
            profile.enable()
        start = time.process_time()
        cycle = cycle_module.run_scheduling_cycle(now=timezone.now(), backend=backend)
        cpu = time.process_time() - start
        if profile:
            profile.disable()
            profile.dump_stats(f"{prof_path}.{label}")
        bound = bound or int(cycle.allocated_count or 0)
        total += cpu
        print(f"{label} cycle: {cycle.status}, {cycle.duration_ms} ms, {cycle.allocated_count} bound, "
              f"CPU {cpu:.2f} s = {1000 * cpu / max(bound, 1):.2f} ms per pod bound")  # fmt: skip
        main_thread = {k: round(v, 2) for k, v in steps.items()}
        print("  main-thread CPU s:", main_thread, "other threads", round(others[0], 2))
    plane = control_plane_cpu(state)
    print(f"both cycles: {1000 * total / max(bound, 1):.2f} ms of portal CPU per pod bound")
    per_pod = {k: round(1000 * (plane[k] - plane_before.get(k, 0.0)) / max(bound, 1), 2) for k in plane}
    print("control plane CPU ms per pod bound (both cycles and the settle):", per_pod)
    threading.Thread.run = thread_run  # type: ignore[method-assign]
    with ThreadPoolExecutor(16) as pool:
        pods = core.list_namespaced_pod(namespace).items
        names = [p.metadata.name for p in pods]
        list(pool.map(lambda n: core.delete_namespaced_pod(n, namespace, grace_period_seconds=0), names))
    core.delete_namespace(namespace)
    for name in nodes:
        with contextlib.suppress(Exception):
            core.delete_node(name)


if __name__ == "__main__":
    main()
