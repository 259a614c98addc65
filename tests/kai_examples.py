"""KAI Scheduler's own example manifests, read from a local mirror of its repository.

Tests that show KAI users' manifests work unchanged read them from the mirror
(``KAI_MIRROR``, default ``/work/.mirror/kai-scheduler+KAI-Scheduler/repo``, a
bare git directory) rather than keeping copies; without the mirror they skip.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

MIRROR = Path(os.environ.get("KAI_MIRROR", "/work/.mirror/kai-scheduler+KAI-Scheduler/repo"))
GPU_SHARING_EXAMPLES = ("gpu-sharing.yaml", "gpu-memory.yaml", "gpu-sharing-non-default-container.yaml")


def kai_file(path: str) -> str:
    """One file of KAI's repository at the mirror's HEAD; skips the test when it is absent."""
    if not MIRROR.exists():
        pytest.skip(f"no KAI mirror at {MIRROR}")
    done = subprocess.run(
        ["git", "--git-dir", str(MIRROR), "show", f"HEAD:{path}"], capture_output=True, text=True, timeout=30
    )
    if done.returncode != 0:
        pytest.skip(f"{path} is not in the KAI mirror: {done.stderr.strip()}")
    return done.stdout
