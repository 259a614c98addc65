"""``manage.py run_scheduler`` in kubernetes mode is the scheduler process (issue 29): its backend's
watches run in the background and its cycles read them; ``--poll`` keeps the old loop, whose
cycles open watch windows. Against the emulator (tests/backends/emulator.py)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from kubernetes import client

from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.history.models import SchedulingCycle
from kai_portal.workloads import configured_backend
from kai_portal.workloads.models import Pod
from tests.backends.conftest import api_client, backend, core, emulator, emulator_and_url, make_node, make_pod
from tests.portal import factories

__all__ = ["api_client", "backend", "core", "emulator", "emulator_and_url"]  # fixtures used below

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def kubernetes_mode(
    settings: Any, backend: KubernetesBackend, monkeypatch: pytest.MonkeyPatch
) -> KubernetesBackend:
    settings.CLUSTER_BACKEND, settings.LEADER_ELECTION = "kubernetes", False
    monkeypatch.setattr(configured_backend, "_kubernetes_backend", backend)
    dept = factories.queue("dept", gpu_quota=8)
    factories.queue("team-a", parent=dept, gpu_quota=8)
    return backend


def _watch_windows(backend: KubernetesBackend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    original = backend.lister.sync

    def sync(*args: Any, **kwargs: Any) -> Any:
        calls.append("sync")
        return original(*args, **kwargs)

    monkeypatch.setattr(backend.lister, "sync", sync)
    return calls


def test_in_kubernetes_mode_the_cycles_read_the_background_watches(
    kubernetes_mode: KubernetesBackend, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows = _watch_windows(kubernetes_mode, monkeypatch)
    make_node(core, "gpu-1", gpus=8)
    make_pod(core, "fits", labels={"kai.scheduler/queue": "team-a"}, gpus=2)

    call_command("run_scheduler", "--cycles", "1")

    cycle = SchedulingCycle.objects.get()
    assert (cycle.status, cycle.allocated_count) == ("succeeded", 1), cycle.error
    assert Pod.objects.get(name="fits").state == "bound"
    assert kubernetes_mode.cache.watching and windows == []  # informers, no window in the cycle
    assert all(i.stopped for i in kubernetes_mode.cache._informers.values())  # stopped on the way out


def test_poll_keeps_the_old_loop(
    kubernetes_mode: KubernetesBackend, core: client.CoreV1Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    windows = _watch_windows(kubernetes_mode, monkeypatch)
    make_node(core, "gpu-1", gpus=8)
    make_pod(core, "fits", labels={"kai.scheduler/queue": "team-a"}, gpus=2)

    call_command("run_scheduler", "--once", "--poll")

    assert SchedulingCycle.objects.get().allocated_count == 1
    assert not kubernetes_mode.cache.watching and windows  # the cycle listed and watched itself
