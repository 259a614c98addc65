"""A cancel that lands in the middle of a cycle waits for it instead of deadlocking (issue 14).

The cycle is held inside its write transaction after it bound a pod; the cancel of that
pod's job runs on another connection meanwhile. Both lock the job before its pods, so the
cancel waits for the cycle and then wins; neither fails.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from kai_portal.scheduling import results
from kai_portal.scheduling.cycle import run_scheduling_cycle
from kai_portal.workloads import lifecycle
from kai_portal.workloads.models import Job
from tests.portal import factories


@pytest.mark.django_db(transaction=True)
def test_cancel_during_a_cycles_writes_does_not_deadlock(leaf, monkeypatch) -> None:
    factories.node("n1", gpus=1)
    job = factories.job(leaf, "cancel-me")
    pods_written, go = threading.Event(), threading.Event()
    real = results._persist_job_messages

    def pause_then_persist(*args, **kwargs):
        pods_written.set()  # the pod is bound (row locked) in the open transaction
        assert go.wait(20)
        return real(*args, **kwargs)

    monkeypatch.setattr(results, "_persist_job_messages", pause_then_persist)
    outcome: dict[str, object] = {}

    def cycle() -> None:
        try:
            outcome["cycle"] = run_scheduling_cycle().status
        except Exception as exc:  # the deadlock surfaces here or in the cancel
            outcome["cycle"] = exc
        finally:
            connection.close()

    def cancel() -> None:
        try:
            outcome["cancel"] = lifecycle.cancel_job(Job.objects.get(pk=job.pk)).state
        except Exception as exc:
            outcome["cancel"] = exc
        finally:
            connection.close()

    cycling = threading.Thread(target=cycle)
    cycling.start()
    assert pods_written.wait(20)
    cancelling = threading.Thread(target=cancel)
    cancelling.start()
    time.sleep(1.5)  # the cancel reaches its lock wait (PostgreSQL's deadlock_timeout is 1 s)
    go.set()
    cycling.join(30)
    cancelling.join(30)

    assert outcome == {"cycle": "succeeded", "cancel": "cancelled"}, outcome
    job.refresh_from_db()
    assert job.state == "cancelled"
    assert job.pods.get().state == "releasing"  # bound by the cycle, then released by the cancel
