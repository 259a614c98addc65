"""Scheduling cycles, per-pod decisions and reasons, usage history."""
