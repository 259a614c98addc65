from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from hypothesis import given
from hypothesis import strategies as st

from kai_portal.audit.models import AuditEntry
from kai_portal.core.units import mb_to_mib, mib_to_mb
from kai_portal.queues.durations import format_go_duration, parse_go_duration
from kai_portal.queues.models import Queue
from tests.portal import factories

pytestmark = pytest.mark.django_db

TREE = """\
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: research
spec:
  displayName: Research department
  priority: 100
  resources:
    gpu: {quota: 16, limit: -1, overQuotaWeight: 1}
    cpu: {quota: 64000, limit: -1, overQuotaWeight: 1}
    memory: {quota: 512000, limit: -1, overQuotaWeight: 1}
  preemptMinRuntime: 10m
  reclaimMinRuntime: 1h30m
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: nlp
spec:
  parentQueue: research
  priority: 120
  resources:
    gpu: {quota: 8.5, limit: 12, overQuotaWeight: 2.5}
    cpu: {quota: 32000, limit: 48000, overQuotaWeight: 1}
    memory: {quota: 256000, limit: 1024000, overQuotaWeight: 0}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata:
  name: vision
spec:
  parentQueue: research
  priority: 100
  resources:
    gpu: {quota: 4, limit: -1, overQuotaWeight: 1}
    cpu: {quota: 0, limit: -1, overQuotaWeight: 1}
    memory: {quota: 0, limit: -1, overQuotaWeight: 1}
  preemptMinRuntime: 45s
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "queues.yaml"
    path.write_text(text)
    return path


def export() -> str:
    out = StringIO()
    call_command("export_queues", stdout=out)
    return out.getvalue()


def test_import_then_export_round_trips(tmp_path: Path) -> None:
    call_command("import_queues", str(write(tmp_path, TREE)), stdout=StringIO())
    assert list(yaml.safe_load_all(export())) == list(yaml.safe_load_all(TREE))


def test_import_converts_units(tmp_path: Path) -> None:
    call_command("import_queues", str(write(tmp_path, TREE)), stdout=StringIO())
    nlp = Queue.objects.get(name="nlp")
    assert nlp.parent.name == "research"
    assert str(nlp.gpu_quota) == "8.50" and nlp.cpu_limit == 48_000
    assert nlp.memory_quota == Decimal("244140.625")  # 256000 MB
    assert Queue.objects.get(name="research").reclaim_min_runtime == timedelta(hours=1, minutes=30)


def test_import_is_an_update_when_queues_exist(tmp_path: Path) -> None:
    path = write(tmp_path, TREE)
    call_command("import_queues", str(path), stdout=StringIO())
    out = StringIO()
    call_command("import_queues", str(path.parent / path.name), stdout=out)
    assert "0 queue(s) created, 3 updated" in out.getvalue()
    assert Queue.objects.count() == 3


def test_import_may_lower_a_parent_and_its_children_together(tmp_path: Path) -> None:
    call_command("import_queues", str(write(tmp_path, TREE)), stdout=StringIO())
    lowered = TREE.replace("quota: 16,", "quota: 6,").replace("quota: 8.5,", "quota: 2,")
    call_command("import_queues", str(write(tmp_path, lowered)), stdout=StringIO())
    assert Queue.objects.get(name="research").gpu_quota == 6


def test_import_records_audit_entries_for_the_actor(tmp_path: Path, portal_admin: object) -> None:
    call_command("import_queues", str(write(tmp_path, TREE)), "--actor", "root", stdout=StringIO())
    entries = AuditEntry.objects.filter(content_type__model="queue")
    assert entries.count() == 3
    assert {(e.actor_name, e.source) for e in entries} == {("root", "command:import_queues")}


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ("apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: nlp",
         "apiVersion: scheduling.run.ai/v1\nkind: Queue\nmetadata:\n  name: nlp",
         "document 2, apiVersion: must be scheduling.run.ai/v2 (got 'scheduling.run.ai/v1')"),
        ("gpu: {quota: 8.5, limit: 12,", "gpu: {quota: 8.5, limit: 3,",
         "document 2 (queue 'nlp'), spec.resources.gpu.limit: Limit (3 GPUs) must be at least the quota "
         "(8.5 GPUs), or -1 for unlimited."),
        ("gpu: {quota: 4, limit: -1, overQuotaWeight: 1}", "gpu: {quota: 9, limit: -1, overQuotaWeight: 1}",
         "document 3 (queue 'vision'), spec.resources.gpu.quota: Quota (9 GPUs) does not fit in parent queue "
         "'research'"),
        ("preemptMinRuntime: 45s", "preemptMinRuntime: soon",
         "document 3 (queue 'vision'), spec.preemptMinRuntime: invalid Go duration 'soon'"),
        ("cpu: {quota: 32000,", "cpu: {quota: 1.5,",
         "document 2 (queue 'nlp'), spec.resources.cpu.quota: must be a whole number (got 1.5)"),
        ("parentQueue: research\n  priority: 100", "parentQueue: nowhere\n  priority: 100",
         "document 3 (queue 'vision'), spec.parentQueue: parent queue 'nowhere' is neither in the file nor "
         "in the portal"),
        ("priority: 120", "priority: high", "document 2 (queue 'nlp'), spec.priority: must be an integer"),
        ("overQuotaWeight: 2.5", "overQuotaWeight: -1",
         "document 2 (queue 'nlp'), spec.resources.gpu.overQuotaWeight: "
         "Over-quota weight must be at least 0"),
    ],
)  # fmt: skip
def test_a_bad_document_names_file_document_and_key_and_saves_nothing(
    tmp_path: Path, old: str, new: str, where: str
) -> None:
    assert old in TREE
    path = write(tmp_path, TREE.replace(old, new, 1))
    with pytest.raises(CommandError) as info:
        call_command("import_queues", str(path), stdout=StringIO())
    assert str(info.value).startswith(f"{path}: ")
    # Every error names the line of its key (the numbers: tests/portal/web/queues/test_queue_import.py).
    assert re.search(r"document \d( \(queue '\w+'\))?, line \d+, ", str(info.value))
    assert where in re.sub(r", line \d+", "", str(info.value))
    assert str(info.value).endswith("(nothing was imported)")
    assert not Queue.objects.exists() and not AuditEntry.objects.exists()


def test_bad_import_leaves_existing_queues_untouched(tmp_path: Path) -> None:
    factories.queue("research", gpu_quota=20)
    with pytest.raises(CommandError):
        call_command("import_queues", str(write(tmp_path, TREE.replace("limit: 12,", "limit: 1,"))))
    assert Queue.objects.get().gpu_quota == 20


def test_missing_keys_take_kai_raw_defaults(tmp_path: Path) -> None:
    doc = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: bare}\n"
    call_command("import_queues", str(write(tmp_path, doc)), stdout=StringIO())
    bare = Queue.objects.get()
    assert (bare.priority, bare.gpu_quota, bare.gpu_limit, bare.gpu_over_quota_weight) == (100, 0, 0, 0)


def test_unreadable_file_is_a_command_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_queues", str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize(
    ("text", "seconds", "canonical"),
    [("10m", 600, "10m"), ("1h30m", 5400, "1h30m"), ("90m", 5400, "1h30m"), ("1.5h", 5400, "1h30m"),
     ("45s", 45, "45s"), ("0", 0, "0s"), ("2h0m5s", 7205, "2h5s"), ("500ms", 0.5, "0.5s")],
)  # fmt: skip
def test_go_durations(text: str, seconds: float, canonical: str) -> None:
    delta = parse_go_duration(text)
    assert delta.total_seconds() == seconds
    assert format_go_duration(delta) == canonical


def test_memory_conversion_between_mb_and_mib() -> None:
    assert mb_to_mib(1_048_576) == 1_000_000
    assert mib_to_mb(1_000_000) == 1_048_576
    assert mb_to_mib(1_024_000) == Decimal("976562.5")
    assert mb_to_mib(-1) == -1 and mib_to_mb(-1) == -1


@given(st.integers(min_value=0, max_value=10**12))
def test_every_whole_mb_value_survives_the_trip_through_mib(mb: int) -> None:
    assert mib_to_mb(mb_to_mib(mb)) == mb
