"""The note an eviction action leaves on a job it could not help."""

from __future__ import annotations

Note = tuple[str, str]  # (reason, message) explaining why an action could not help a job
