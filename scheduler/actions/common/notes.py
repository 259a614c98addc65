"""The note an eviction action leaves on a job it could not help."""

from __future__ import annotations

from scheduler.reasons import Reason

Note = tuple[str, Reason]  # (code, reason) explaining why an action could not help a job
