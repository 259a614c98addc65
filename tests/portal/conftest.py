from __future__ import annotations

from typing import Any

import pytest

from tests.portal import factories


@pytest.fixture
def portal_admin(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser("root", "root@example.com", "pw")


@pytest.fixture
def department(db: None) -> Any:
    return factories.queue("dept", gpu_quota=10, cpu_quota=10_000, memory_quota=10_240)


@pytest.fixture
def leaf(department: Any) -> Any:
    return factories.queue("leaf", parent=department, gpu_quota=4, cpu_quota=1_000, memory_quota=1_024)
