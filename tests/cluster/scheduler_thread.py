"""A portal scheduler in a thread, for tests that run two side by side (leader election, shards):
its own API client, backend and Lease candidate, a cycle every 0.2 s until stopped."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone
from kubernetes import client, config

from kai_portal.cluster.backends.kubernetes import KubernetesBackend, LeaderElector
from kai_portal.history.models import SchedulingCycle
from kai_portal.scheduling import cycle as cycle_module


class SchedulerThread(threading.Thread):
    """Runs cycles until ``finish``; each bind call that reached the API server goes to
    ``note_bind``, each cycle's (status, error) to ``cycles``. A failure in the loop is kept and
    reported by ``finish``, not lost in the thread."""

    elector: LeaderElector

    def __init__(self, name: str, kubeconfig: Path, scheduler_name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.backend = KubernetesBackend(api_client=self.api, scheduler_name=scheduler_name)
        self.cycles: list[tuple[str, str]] = []
        self.stopped = threading.Event()
        self.failure: BaseException | None = None
        bind = self.backend.writes.bind

        def recording_bind(namespace: str, name: str, body: Any) -> Any:
            self.note_bind(name, body["target"]["name"])
            return bind(namespace, name, body)

        self.backend.writes.bind = recording_bind  # type: ignore[method-assign]

    def note_bind(self, pod: str, node: str) -> None:
        raise NotImplementedError

    def one_cycle(self) -> SchedulingCycle:
        return cycle_module.run_scheduling_cycle(now=timezone.now(), backend=self.backend)

    def before_cycles(self) -> None:
        """Set up what the thread itself needs (thread-locals), in the thread."""

    def run(self) -> None:
        self.before_cycles()
        try:
            while not self.stopped.is_set():
                cycle = self.one_cycle()
                self.cycles.append((cycle.status, cycle.error))
                time.sleep(0.2)
        except BaseException as error:
            self.failure = error
        finally:
            connection.close()

    def cut_off_from_the_lease(self) -> None:
        """Its Lease calls now fail (a partition between it and the API server's Leases)."""
        dead = client.Configuration()
        dead.host = "https://127.0.0.1:1"
        self.elector.coordination = client.CoordinationV1Api(client.ApiClient(dead))

    def finish(self) -> None:
        self.stopped.set()
        self.join(30)
        self.api.close()
        assert self.failure is None, f"{self.name}'s loop failed: {self.failure!r}"
