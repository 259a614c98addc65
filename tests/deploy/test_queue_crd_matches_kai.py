"""Our Queue CRD (``deploy/helm/kai-portal/crds/``) against KAI Scheduler's own
(``deployments/kai-scheduler/crds/scheduling.run.ai_queues.yaml`` in KAI's repository).

A cluster set up for KAI has KAI's CRD, not ours; the portal reads and writes Queue objects
there (issue 16), so every field the portal uses must have KAI's name, place and type, and the
object must be the same group / version / kind / plural / scope with a status subresource.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kai_portal.cluster.backends.kubernetes import queue_objects
from kai_portal.queues import kai_yaml
from tests.kai_examples import kai_file

ROOT = Path(__file__).resolve().parents[2]
OURS = ROOT / "deploy" / "helm" / "kai-portal" / "crds" / "scheduling.run.ai_queues.yaml"
KAIS = "deployments/kai-scheduler/crds/scheduling.run.ai_queues.yaml"


def _crd(text: str) -> dict[str, Any]:
    (crd,) = [d for d in yaml.safe_load_all(text) if d]
    return crd  # type: ignore[no-any-return]


def _field(schema: dict[str, Any], dotted: str) -> dict[str, Any]:
    for part in dotted.split("."):
        schema = schema["properties"][part]
    return schema


def _used_fields() -> list[str]:
    """Every ``spec.*`` path the portal's Queue YAML reads and writes (``kai_yaml.FIELD_KEYS``)."""
    return sorted(k for k in kai_yaml.FIELD_KEYS.values() if k.startswith("spec."))


def test_our_queue_crd_is_kais_for_every_field_the_portal_uses():
    ours, kais = _crd(OURS.read_text()), _crd(kai_file(KAIS))
    for crd in (ours, kais):
        spec = crd["spec"]
        assert (spec["group"], spec["names"]["kind"], spec["names"]["plural"], spec["scope"]) == (
            queue_objects.GROUP, queue_objects.KIND, queue_objects.PLURAL, "Cluster",
        )  # fmt: skip
        (version,) = [v for v in spec["versions"] if v["storage"]]
        assert version["name"] == queue_objects.VERSION and version["served"]
        assert version["subresources"] == {"status": {}}
    our_schema = next(v for v in ours["spec"]["versions"] if v["storage"])["schema"]["openAPIV3Schema"]
    kai_schema = next(v for v in kais["spec"]["versions"] if v["storage"])["schema"]["openAPIV3Schema"]
    used = _used_fields()
    # displayName, parentQueue, priority, min-runtimes, quota / limit / overQuotaWeight per resource
    assert len(used) == 14, used
    for path in used:
        assert _field(our_schema, path)["type"] == _field(kai_schema, path)["type"], path
    # and nothing in our spec that KAI's lacks (a field KAI would prune on a cluster with its CRD)
    for path in _all_paths(_field(our_schema, "spec"), "spec"):
        assert _field(kai_schema, path)["type"] == _field(our_schema, path)["type"], path


def _all_paths(schema: dict[str, Any], prefix: str) -> list[str]:
    paths = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}"
        paths.append(path)
        paths.extend(_all_paths(sub, path))
    return paths
