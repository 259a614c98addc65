"""KAI's own GPU-sharing examples are accepted unchanged by the portal's YAML submit."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kai_portal.workloads.manifests import submit_manifest
from tests.kai_examples import kai_file
from tests.portal import factories

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("example", "fraction", "memory"),
    [
        ("gpu-sharing.yaml", Decimal("0.5"), None),
        ("gpu-memory.yaml", None, 2000),
        ("gpu-sharing-non-default-container.yaml", Decimal("0.5"), None),
    ],
)
def test_kai_gpu_sharing_examples_submit_unchanged(
    example: str, fraction: Decimal | None, memory: int | None
) -> None:
    factories.queue("default-queue")
    job, created = submit_manifest(kai_file(f"docs/gpu-sharing/{example}"), None)
    assert created and job.queue.name == "default-queue"
    assert (job.gpu_fraction, job.gpu_memory_mib, job.gpu_fraction_devices) == (fraction, memory, 1)
    assert job.gpu_count == 0 and job.pods.count() == 1
