"""Rows to engine for whole nodes (issue 16): taints, pod slots, other schedulers' pods on a node,
and a job's nodeSelector, tolerations and node affinity, from a manifest or the cluster sync."""

from __future__ import annotations

from typing import Any

import pytest

from kai_portal.nodes.models import Node
from kai_portal.scheduling.snapshot import build_snapshot
from kai_portal.workloads.manifests import ManifestError, submit_manifest
from kai_portal.workloads.models import Job, Pod
from tests.portal import factories

from .conftest import T0

pytestmark = pytest.mark.django_db


def _pod(name: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": "team"}},
        "spec": {"containers": [{"name": "c", "image": "i",
                                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}], **spec},
    }  # fmt: skip


@pytest.fixture
def nodes() -> dict[str, Node]:
    factories.queue("team", gpu_quota=16)
    return {
        "plain": factories.node("plain", gpus=8),
        "ssd": factories.node("ssd", gpus=8, labels={"disk": "ssd"},
                              taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]),
    }  # fmt: skip


def test_a_manifests_selector_tolerations_and_affinity_place_its_pods(loop, nodes, portal_admin) -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    submit_manifest(_pod("tolerates", nodeSelector={"disk": "ssd"}, tolerations=[toleration]), portal_admin)
    submit_manifest(_pod("intolerant", nodeSelector={"disk": "ssd"}), portal_admin)
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}]}]}}}  # fmt: skip
    submit_manifest(_pod("no-disk", gpus=2, affinity=affinity), portal_admin)

    cycle = loop.run()

    assert cycle.status == "succeeded", cycle.error
    placed = {p.name: (p.node.name if p.node else p.reason) for p in Pod.objects.all()}
    job = Job.objects.get(name="tolerates")
    assert (job.node_selector, job.tolerations) == ({"disk": "ssd"}, [toleration])
    assert (placed["tolerates-0"], placed["no-disk-0"]) == ("ssd", "plain"), placed
    intolerant = Job.objects.get(name="intolerant").pods.get()
    assert intolerant.node is None
    assert "1 node(s) had untolerated taint {dedicated: ml}" in intolerant.reason
    assert "1 node(s) didn't match Pod's node affinity/selector" in intolerant.reason


@pytest.mark.parametrize("spec", [
    {"nodeSelector": ["disk"]},
    {"tolerations": {"key": "a"}},
    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}}},
    {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": ["zone"]}}},
])  # fmt: skip
def test_malformed_placement_rules_are_refused_with_a_path_never_a_server_error(
    nodes, portal_admin, spec: dict[str, Any]
) -> None:
    with pytest.raises(ManifestError) as raised:
        submit_manifest(_pod("bad", **spec), portal_admin)

    assert raised.value.path.startswith("spec.")
    assert not Job.objects.exists()


def test_odd_but_valid_affinity_shapes_are_read_leniently(nodes, portal_admin) -> None:
    exists = [{"key": "disk", "operator": "Exists"}]
    term = {"matchFields": {"key": "metadata.name"}, "matchExpressions": exists}
    heavy = [{"weight": "heavy", "preference": {}}]
    required = {"nodeSelectorTerms": [term]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required,
                                 "preferredDuringSchedulingIgnoredDuringExecution": heavy}}  # fmt: skip

    job, _ = submit_manifest(_pod("odd", affinity=affinity), portal_admin)

    assert job.node_affinity == {"required": [[{"key": "disk", "operator": "Exists", "values": []}]]}


def test_a_bad_toleration_in_a_manifest_is_refused_at_its_path(nodes, portal_admin) -> None:
    bad = _pod("bad", tolerations=[{"key": "a", "operator": "Sometimes"}])

    with pytest.raises(ManifestError) as raised:
        submit_manifest(bad, portal_admin)

    assert raised.value.path == "spec.tolerations[0].operator"
    assert not Job.objects.exists()


def test_other_schedulers_pods_and_pod_slots_reach_the_engine(loop, nodes) -> None:
    Node.objects.filter(name="plain").update(external_gpus=6, external_pods=1, external_cpu_millicores=500)
    Node.objects.filter(name="ssd").update(max_pods=2, external_pods=2)
    queue = factories.queue("other", gpu_quota=0)
    factories.job(queue, "four", gpu_count=4)
    factories.job(queue, "two", gpu_count=2)

    snapshot = build_snapshot(T0).snapshot
    loop.run()

    plain = next(n for n in snapshot.nodes if n.name == "plain")
    assert (plain.external.gpus, plain.external.pods, plain.external.cpu_millis) == (6, 1, 500)
    assert next(n for n in snapshot.nodes if n.name == "ssd").max_pods == 2
    assert Job.objects.get(name="four").pods.get().node is None  # 8 - 6 < 4, and ssd has no slot
    assert Job.objects.get(name="two").pods.get().node.name == "plain"


def test_a_job_whose_placement_rule_is_malformed_is_failed_not_the_cycle(loop, nodes) -> None:
    queue = factories.queue("other", gpu_quota=0)
    broken = factories.job(queue, "broken")
    Job.objects.filter(pk=broken.pk).update(node_affinity={"required": [[{"key": "a", "operator": "Near"}]]})
    fine = factories.job(queue, "fine")

    cycle = loop.run()

    assert cycle.status == "succeeded", cycle.error
    broken.refresh_from_db()
    assert broken.state == "failed" and "Near" in broken.message
    assert fine.pods.get().node is not None
