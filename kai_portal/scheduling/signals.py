"""What the cycle tells the packages above it, so the cycle need not import them.

``cycle_finished`` is sent after every cycle that ran (not one skipped for the lock or for
leadership), still under the cycle lock so two receivers' work never overlaps; keyword
arguments ``cycle`` (the SchedulingCycle row) and ``now``. A receiver's exception fails the
cycle's caller, so receivers catch their own (kai_portal/previews/apps.py connects the
forecast refresh)."""

from __future__ import annotations

from django.dispatch import Signal

cycle_finished = Signal()
