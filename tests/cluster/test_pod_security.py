"""The pod policy on a real API server (issue 26, critical 1).

The portal in kubernetes mode, submitting as the web pods' ServiceAccount (``kai-portal-web``)
and allowed to create its teams' namespaces (``JOB_NAMESPACE_CREATE`` and
``deploy/rbac/optional/``), as a cluster admin would run it:

* every field the baseline standard forbids (and the portal's own rules) is refused by the portal
  with the field named, before the cluster is asked (no namespace, no pod, no job row);
* the namespace the portal creates carries ``pod-security.kubernetes.io/enforce`` at the team's
  level, so the API server's own PodSecurity admission refuses the same fields from anyone else
  who may create pods there (a team user with a Role of their own, through the client);
* a portal admin raises the team to privileged: the label follows and the same privileged pod is
  created; lowered to restricted, the pod the portal builds for a form job still passes.
"""

from __future__ import annotations

import copy
import io
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import kube_config
from rest_framework.test import APIClient

from kai_portal.accounts.models import User
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.teams.models import Membership, Team
from kai_portal.workloads import cluster_jobs
from kai_portal.workloads.models import Job
from tests.portal import factories
from tests.portal.test_pod_policy import BASELINE_CASES, EVERY_LEVEL_CASES

from .conftest import REPO, Cluster, kubeconfig_for, wait_until

pytestmark = pytest.mark.django_db

OPTIONAL_RBAC = REPO / "deploy" / "rbac" / "optional" / "kai-portal-namespaces.yaml"
ENFORCE = "pod-security.kubernetes.io/enforce"
ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
# Baseline fields the API server cannot be shown refusing by PodSecurity, because its validation
# answers first (422): ephemeral containers on create, a Windows host process (it needs
# hostNetwork and a Windows pod), and an Unmasked /proc (it needs hostUsers: false, which
# baseline then allows).
NOT_CREATABLE = ("ephemeralContainers", "windowsOptions.hostProcess", "procMount")
# The portal's own rules: no Pod Security Standard has them (the API server allows them).
PORTAL_RULES = ("serviceAccountName", "serviceAccount", "automountServiceAccountToken")


@pytest.fixture
def portal(
    cluster: Cluster, portal_backend: KubernetesBackend, web_kubeconfig: Path, settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[KubernetesBackend]:  # fmt: skip
    """Kubernetes mode, a namespace per team that the portal creates; submissions and level
    changes as the web pods' ServiceAccount (with the optional namespace rule applied)."""
    settings.JOB_NAMESPACE_MODE, settings.JOB_NAMESPACE_PREFIX = "team", ""
    settings.JOB_NAMESPACE_CREATE = True
    cluster.kubectl("apply", "-f", str(OPTIONAL_RBAC))
    web = KubernetesBackend(
        api_client=kube_config.new_client_from_config(config_file=str(web_kubeconfig)),
        scheduler_name=portal_backend.scheduler_name,
    )
    monkeypatch.setattr(cluster_jobs, "get_backend", lambda: web)
    yield portal_backend
    web.api_client.close()
    cluster.kubectl("delete", "-f", str(OPTIONAL_RBAC))


@pytest.fixture
def team_namespace(cluster: Cluster) -> Iterator[str]:
    """A team slug, which is the namespace the portal will create for it (deleted afterwards)."""
    name = f"pss-{secrets.token_hex(4)}"
    yield name
    try:
        cluster.core.delete_namespace(name, propagation_policy="Background")
    except ApiException as error:
        if error.status != 404:
            raise


def _member(slug: str) -> tuple[User, Any]:
    team = factories.team(slug)
    department = factories.queue(f"dept-{secrets.token_hex(3)}", gpu_quota=16)
    queue = factories.queue(f"q-{slug}", parent=department, team=team, gpu_quota=16)
    user = User.objects.create_user(f"dev-{secrets.token_hex(3)}", password="x")
    Membership(team=team, user=user).save()
    return user, queue


def _api(user: User) -> APIClient:
    api = APIClient()
    api.force_authenticate(user)
    return api


def _manifest(name: str, queue: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict:
    spec = copy.deepcopy(spec)
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(kind) or []:
            container.setdefault("image", "busybox")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": queue},
                         "annotations": annotations or {}},
            "spec": spec}  # fmt: skip


def _namespace(cluster: Cluster, name: str) -> client.V1Namespace | None:
    try:
        return cluster.core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def _submit_until_created(api: APIClient, manifest: dict[str, Any]) -> Any:
    """The first pod in a namespace the portal just made waits for its default ServiceAccount
    (the controller manager's), as the ServiceAccount admission plugin requires."""
    answers: list[Any] = []

    def created() -> bool:
        answers.append(api.post("/api/v1/jobs/manifest/", manifest, format="json"))
        return bool(answers[-1].status_code == 201)

    wait_until(created, f"the portal to create {manifest['metadata']['name']}", timeout=60, every=1)
    return answers[-1]


def _not_creatable(spec: dict[str, Any], field: str) -> bool:
    # hostNetwork: "yes" is no boolean: the API server cannot decode it (400).
    return spec.get("hostNetwork") == "yes" or any(part in field for part in NOT_CREATABLE)


def _labels(cluster: Cluster, namespace: str) -> dict[str, str]:
    found = _namespace(cluster, namespace)
    assert found is not None, f"namespace {namespace} was not created"
    labels = found.metadata.labels or {}
    return {k: v for k, v in labels.items() if k in (ENFORCE, ENFORCE_VERSION)}


def test_every_forbidden_baseline_field_is_refused_by_the_portal_with_the_field_named(
    cluster: Cluster, portal: KubernetesBackend, team_namespace: str
) -> None:
    user, queue = _member(team_namespace)
    api = _api(user)
    cases = [(spec, notes, path) for spec, notes, path, _ in BASELINE_CASES]
    cases += [(spec, {}, path) for spec, path, _ in EVERY_LEVEL_CASES]
    for i, (spec, notes, path) in enumerate(cases):
        response = api.post("/api/v1/jobs/manifest/", _manifest(f"bad-{i}", queue.name, spec, notes),
                            format="json")  # fmt: skip
        assert response.status_code == 400, (path, response.content)
        assert path in [p["path"] for p in response.json()["problems"]], (path, response.json())
    # Refused before the cluster was asked: the namespace was never even made.
    assert _namespace(cluster, team_namespace) is None
    assert not Job.objects.exists()


def test_the_portals_namespace_refuses_a_privileged_pod_from_the_teams_own_user(
    cluster: Cluster, portal: KubernetesBackend, team_namespace: str, tmp_path: Path
) -> None:
    """Defence in depth: someone with their own right to create pods in the team's namespace (a
    ServiceAccount with a Role there, through the client) meets the same baseline, enforced by
    the API server's PodSecurity admission because of the label the portal put on the namespace."""
    user, queue = _member(team_namespace)
    _submit_until_created(_api(user), _manifest("first", queue.name, {"containers": [{"name": "main"}]}))
    assert _labels(cluster, team_namespace) == {ENFORCE: "baseline", ENFORCE_VERSION: "latest"}

    cluster.core.create_namespaced_service_account(team_namespace, {"metadata": {"name": "team-user"}})
    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "list", "delete"]}]
    rbac.create_namespaced_role(team_namespace, {"metadata": {"name": "pods"}, "rules": rules})
    subject = {"kind": "ServiceAccount", "name": "team-user", "namespace": team_namespace}
    rbac.create_namespaced_role_binding(team_namespace, {
        "metadata": {"name": "team-user-pods"}, "subjects": [subject],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pods"}})  # fmt: skip
    path = kubeconfig_for(cluster, team_namespace, "team-user", tmp_path / "team-user.kubeconfig")
    as_user = client.CoreV1Api(config.new_client_from_config(config_file=str(path)))
    try:
        # The user may create pods there: a plain one is admitted.
        as_user.create_namespaced_pod(team_namespace, _manifest("plain", queue.name, {
            "containers": [{"name": "main"}]}))  # fmt: skip
        refused: dict[str, str] = {}
        for i, (spec, annotations, field, _) in enumerate(BASELINE_CASES):
            if _not_creatable(spec, field) or field.rsplit(".", 1)[-1] in PORTAL_RULES:
                continue
            with pytest.raises(ApiException) as denied:
                as_user.create_namespaced_pod(
                    team_namespace, _manifest(f"direct-{i}", queue.name, spec, annotations)
                )
            message = json.loads(denied.value.body or "{}").get("message", denied.value.body)
            refused[field] = f"{denied.value.status} {message}"
        by_pod_security = 'violates PodSecurity "baseline:latest"'
        wrong = {f: answer for f, answer in refused.items()
                 if not (answer.startswith("403") and by_pod_security in answer)}  # fmt: skip
        assert not wrong, wrong
        assert len(refused) >= 20
        # The issue's own pod, from the team's user: refused, nothing created.
        with pytest.raises(ApiException) as denied:
            as_user.create_namespaced_pod(
                team_namespace,
                _manifest(
                    "root",
                    queue.name,
                    {
                        "hostNetwork": True,
                        "containers": [{"name": "x", "securityContext": {"privileged": True}}],
                    },
                ),
            )
        assert denied.value.status == 403 and "privileged" in denied.value.body
        names = {p.metadata.name for p in as_user.list_namespaced_pod(team_namespace).items}
        assert names == {"first-0", "plain"}
    finally:
        as_user.api_client.close()


def test_a_team_raised_to_privileged_by_an_admin_runs_the_same_pod_and_restricted_still_runs_form_jobs(
    cluster: Cluster, portal: KubernetesBackend, team_namespace: str
) -> None:
    user, queue = _member(team_namespace)
    member, admin = (
        _api(user),
        _api(User.objects.create_superuser(f"root-{secrets.token_hex(3)}", password="x")),
    )
    _submit_until_created(member, _manifest("first", queue.name, {"containers": [{"name": "main"}]}))
    privileged = _manifest("priv", queue.name, {
        "hostNetwork": True,
        "volumes": [{"name": "host", "hostPath": {"path": "/tmp"}}],
        "containers": [{"name": "main", "volumeMounts": [{"name": "host", "mountPath": "/host"}],
                        "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}}}],
    })  # fmt: skip
    refused = member.post("/api/v1/jobs/manifest/", privileged, format="json")
    assert refused.status_code == 400 and refused.json()["path"] == "spec.hostNetwork"

    raised = admin.patch(f"/api/v1/teams/{team_namespace}/", {"pod_security": "privileged"}, format="json")

    assert raised.status_code == 200, raised.content
    assert _labels(cluster, team_namespace) == {ENFORCE: "privileged", ENFORCE_VERSION: "latest"}
    created = member.post("/api/v1/jobs/manifest/", privileged, format="json")
    assert created.status_code == 201, created.content
    pod = cluster.core.read_namespaced_pod("priv-0", team_namespace)
    assert pod.spec.host_network and pod.spec.containers[0].security_context.privileged
    # nodeName stays refused at privileged: it bypasses the scheduler.
    pinned = _manifest("pinned", queue.name, {"nodeName": "anywhere", "containers": [{"name": "main"}]})
    assert member.post("/api/v1/jobs/manifest/", pinned, format="json").json()["path"] == "spec.nodeName"

    # Lowered to restricted: the label follows; the portal's own pod for a form job meets it.
    lowered = admin.patch(f"/api/v1/teams/{team_namespace}/", {"pod_security": "restricted"}, format="json")
    assert lowered.status_code == 200
    assert _labels(cluster, team_namespace) == {ENFORCE: "restricted", ENFORCE_VERSION: "latest"}
    assert Team.objects.get(slug=team_namespace).pod_security == "restricted"
    form_job = member.post("/api/v1/jobs/", {"name": "fields", "queue": queue.name, "image": "busybox",
                                             "gpu_count": 1}, format="json")  # fmt: skip
    assert form_job.status_code == 201, form_job.content
    made = cluster.core.read_namespaced_pod("fields-0", team_namespace)
    assert made.spec.security_context.run_as_non_root is True


def test_namespaces_made_before_teams_had_a_level_are_labelled_by_the_command(
    cluster: Cluster, portal: KubernetesBackend, team_namespace: str
) -> None:
    """An upgrade: the team's namespace exists without the label; ``label_team_namespaces`` sets it
    (and a team whose namespace is not made yet is skipped, not an error)."""
    cluster.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=team_namespace)))
    _member(team_namespace)
    factories.team(f"{team_namespace}-none", pod_security="restricted")
    out = io.StringIO()

    call_command("label_team_namespaces", stdout=out)

    assert _labels(cluster, team_namespace) == {ENFORCE: "baseline", ENFORCE_VERSION: "latest"}
    assert f"{team_namespace}: {team_namespace} at baseline" in out.getvalue()
    assert _namespace(cluster, f"{team_namespace}-none") is None
