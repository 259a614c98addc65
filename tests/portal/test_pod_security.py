"""The pod policy on every submission path, and a team's level changed by portal admins only
(issue 26, critical 1). The real API server's side: tests/cluster/test_pod_security.py.

Paths: the YAML page, the API's manifest endpoint (and the CLI, which sends it), the API's JSON
fields and the form (neither can carry a pod spec: their pods are built by the portal, which at
``restricted`` gives them that standard's security context), and ``submission.submit`` itself,
which they all call. Every refusal names the field, says the rule, and saves nothing; the same in
simulated and kubernetes mode (the cluster is never called for a refused pod).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from kubernetes import client as k8s

from kai_portal.audit.models import AuditEntry
from kai_portal.cli.main import main
from kai_portal.cluster.backends import PodSpecRequest
from kai_portal.cluster.backends.kubernetes import KubernetesBackend
from kai_portal.teams.models import Team
from kai_portal.workloads import cluster_jobs, pod_policy, submission
from kai_portal.workloads.models import Job
from kai_portal.workloads.pod_security import PodPolicyRefused
from tests.portal.web.api_world import World, build_world

pytestmark = pytest.mark.django_db

# The body issue 26's member got accepted: root on a GPU node.
ATTACK = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "root", "labels": {"kai.scheduler/queue": "ml-train"}},
    "spec": {
        "hostNetwork": True, "hostPID": True, "hostIPC": True,
        "serviceAccountName": "kai-portal", "automountServiceAccountToken": True,
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "x", "image": "busybox", "securityContext": {
            "privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
            "volumeMounts": [{"name": "root", "mountPath": "/host"}]}],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    },
}  # fmt: skip
ATTACK_PATHS = {
    "spec.hostNetwork", "spec.hostPID", "spec.hostIPC", "spec.serviceAccountName",
    "spec.automountServiceAccountToken", "spec.tolerations[0]", "spec.volumes[0].hostPath",
    "spec.containers[0].securityContext.privileged", "spec.containers[0].securityContext.capabilities.add[0]",
}  # fmt: skip


def privileged_pod(name: str = "priv", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"kai.scheduler/queue": "ml-train"}},
        "spec": {"containers": [{"name": "main", "image": "busybox",
                                 "securityContext": {"privileged": True}}], **spec},
    }  # fmt: skip


def as_job(pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": pod["metadata"]["name"], "labels": pod["metadata"]["labels"]},
        "spec": {"template": {"spec": pod["spec"]}},
    }


@pytest.fixture
def world(db: None) -> World:
    return build_world()


@pytest.fixture(params=["simulated", "kubernetes"])
def mode(request: pytest.FixtureRequest, settings: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both backends: in kubernetes mode the cluster must never be reached for a refused pod."""
    settings.CLUSTER_BACKEND = request.param

    def no_cluster() -> None:
        raise AssertionError("a pod the policy refuses reached the cluster backend")

    monkeypatch.setattr(cluster_jobs, "get_backend", no_cluster)
    return str(request.param)


def browser(world: World, persona: str) -> Client:
    page = Client()
    page.force_login(world.users[persona])
    return page


def test_the_api_refuses_issue_26s_attack_naming_every_field_and_saves_nothing(
    world: World, mode: str
) -> None:
    response = world.client("member").post("/api/v1/jobs/manifest/", ATTACK, format="json")

    assert response.status_code == 400, response.content
    body = response.json()
    assert {p["path"] for p in body["problems"]} == ATTACK_PATHS
    assert body["path"] in ATTACK_PATHS and body["message"].startswith(("baseline:", "every level:"))
    privileged = next(
        p for p in body["problems"] if p["path"] == "spec.containers[0].securityContext.privileged"
    )
    assert privileged["message"].startswith("baseline: privileged containers are not allowed")
    assert not Job.objects.filter(name="root").exists()


def test_a_batch_jobs_template_is_checked_at_its_own_path(world: World, mode: str) -> None:
    response = world.client("member").post("/api/v1/jobs/manifest/", yaml.safe_dump(as_job(privileged_pod())),
                                           content_type="application/yaml")  # fmt: skip
    assert response.status_code == 400
    assert response.json()["path"] == "spec.template.spec.containers[0].securityContext.privileged"
    assert not Job.objects.filter(name="priv").exists()


def test_the_yaml_page_lists_every_refused_field_and_saves_nothing(world: World, mode: str) -> None:
    response = browser(world, "member").post("/jobs/submit/yaml/", {"manifest": yaml.safe_dump(ATTACK)})

    assert response.status_code == 200
    problems = response.context["problems"]
    assert {p.split(": ", 1)[0] for p in problems} == ATTACK_PATHS
    page = response.content.decode()
    assert "spec.volumes[0].hostPath: baseline: hostPath volumes are not allowed" in page
    assert "a portal admin can change the team&#x27;s pod security level" in page
    assert not Job.objects.filter(name="root").exists()


def test_the_cli_shows_the_refused_field(live_server: Any, transactional_db: None, tmp_path: Path) -> None:
    live = build_world()
    path = tmp_path / "priv.yaml"
    path.write_text(yaml.safe_dump(privileged_pod()))
    out, err = io.StringIO(), io.StringIO()
    code = main(["--url", live_server.url, "--token", live.secrets["member"], "submit", "-f", str(path)],
                out=out, err=err)  # fmt: skip
    assert code == 1 and "HTTP 400" in err.getvalue()
    assert "spec.containers[0].securityContext.privileged" in err.getvalue()
    assert not Job.objects.filter(name="priv").exists()


def test_submit_itself_refuses_what_no_path_may_skip(world: World, mode: str) -> None:
    """``submission.submit`` is where the form, the API's fields and ``seed_demo`` go: a toleration
    of every taint set on the job (no page offers one) is refused there, before any save."""
    job = Job(name="anywhere", queue=world.objects["ml_q"], submitter=world.users["member"], image="busybox",
              tolerations=[{"key": "", "operator": "Exists", "value": "", "effect": ""}])  # fmt: skip
    with pytest.raises(PodPolicyRefused) as refused:
        submission.submit(job)
    assert [v.path for v in refused.value.violations] == ["spec.tolerations[0]"]
    assert not Job.objects.filter(name="anywhere").exists()


def test_a_privileged_team_submits_the_same_pod_and_restricted_refuses_a_plain_one(
    world: World, settings: Any
) -> None:
    """Simulated mode (kubernetes mode: tests/cluster/test_pod_security.py)."""
    settings.CLUSTER_BACKEND = "simulated"
    team = Team.objects.get(slug="ml")
    team.pod_security = Team.PodSecurity.PRIVILEGED
    team.save()
    api = world.client("member")
    accepted = api.post("/api/v1/jobs/manifest/", privileged_pod(), format="json")
    assert accepted.status_code == 201, accepted.content
    # Scheduling bypasses stay refused at privileged.
    pinned = api.post("/api/v1/jobs/manifest/", privileged_pod("pinned", nodeName="node-1"), format="json")
    assert pinned.status_code == 400 and pinned.json()["path"] == "spec.nodeName"

    team.pod_security = Team.PodSecurity.RESTRICTED
    team.save()
    plain = privileged_pod("plain")
    plain["spec"]["containers"][0].pop("securityContext")
    refused = api.post("/api/v1/jobs/manifest/", plain, format="json")
    assert refused.status_code == 400
    assert {p["path"] for p in refused.json()["problems"]} == {
        "spec.containers[0].securityContext.runAsNonRoot",
        "spec.containers[0].securityContext.allowPrivilegeEscalation",
        "spec.containers[0].securityContext.seccompProfile.type",
        "spec.containers[0].securityContext.capabilities.drop",
    }
    # The form's pod is the portal's: it meets restricted by itself.
    form = {"name": "form-job", "queue": world.objects["ml_q"].pk,
            "task_count": 1, "min_member": 1, "gpu_mode": "none", "cpu_cores": "1", "memory_mib": 512,
            "priority_class": "train", "run_time": "30m", "image": "busybox", "confirmed": "1"}  # fmt: skip
    response = browser(world, "member").post("/jobs/submit/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Job.objects.filter(name="form-job").exists()


@pytest.mark.parametrize("level", pod_policy.LEVELS)
def test_the_pod_the_portal_builds_for_a_form_job_meets_its_teams_level(level: str) -> None:
    body = KubernetesBackend(api_client=k8s.ApiClient(), scheduler_name="kai").jobs.pod_body(
        PodSpecRequest(namespace="ml", job_name="j", queue="q", image="busybox", gpus=1, pod_security=level),
        "j-0",
    )
    assert pod_policy.check(body["spec"], body["metadata"]["annotations"], level) == []


# ----- the level: portal admins only, audited ---------------------------------------------------


def test_a_portal_admin_changes_the_level_on_the_teams_page_and_it_is_audited(world: World) -> None:
    team = Team.objects.get(slug="ml")
    page = browser(world, "admin").get("/teams/ml/")
    assert 'name="pod_security"' in page.content.decode()

    response = browser(world, "admin").post("/teams/ml/pod-security/", {"pod_security": "privileged"})

    assert response.status_code == 302
    team.refresh_from_db()
    assert team.pod_security == "privileged"
    (entry,) = AuditEntry.objects.filter(object_id=str(team.pk), action="update")
    assert (entry.before["pod_security"], entry.after["pod_security"]) == ("baseline", "privileged")
    assert entry.actor == world.users["admin"] and entry.source == "web"


@pytest.mark.parametrize("persona", ["team_admin", "member"])
def test_team_admins_and_members_cannot_change_the_level(world: World, persona: str) -> None:
    page = browser(world, persona).get("/teams/ml/").content.decode()
    assert 'name="pod_security"' not in page and "Baseline" in page
    response = browser(world, persona).post("/teams/ml/pod-security/", {"pod_security": "privileged"})
    assert response.status_code == 403
    api = world.client(persona).patch("/api/v1/teams/ml/", {"pod_security": "privileged"}, format="json")
    assert api.status_code == 403
    assert Team.objects.get(slug="ml").pod_security == "baseline"
    assert not AuditEntry.objects.filter(action="update", content_type__model="team").exists()


def test_a_team_admin_still_renames_the_team_through_the_api(world: World) -> None:
    response = world.client("team_admin").patch("/api/v1/teams/ml/", {"name": "ML lab"}, format="json")
    assert response.status_code == 200 and response.json()["pod_security"] == "baseline"


def test_a_portal_admin_changes_the_level_through_the_api_and_it_is_audited(world: World) -> None:
    response = world.client("admin").patch("/api/v1/teams/ml/", {"pod_security": "restricted"}, format="json")
    assert response.status_code == 200 and response.json()["pod_security"] == "restricted"
    (entry,) = AuditEntry.objects.filter(action="update", content_type__model="team")
    assert (entry.before["pod_security"], entry.after["pod_security"]) == ("baseline", "restricted")
    assert entry.actor == world.users["admin"] and entry.source == "api"
    bad = world.client("admin").patch("/api/v1/teams/ml/", {"pod_security": "open"}, format="json")
    assert bad.status_code == 400 and "pod_security" in bad.json()


def test_a_namespace_the_level_cannot_be_written_to_keeps_the_old_level(
    world: World, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kubernetes mode with the API server down (a closed loopback port): the change is refused,
    said why, and nothing is saved or audited."""
    settings.CLUSTER_BACKEND, settings.JOB_NAMESPACE_MODE, settings.JOB_NAMESPACE_CREATE = (
        "kubernetes",
        "team",
        True,
    )
    config = k8s.Configuration()
    config.host = "http://127.0.0.1:9"  # discard port: nothing listens
    down = KubernetesBackend(api_client=k8s.ApiClient(config), scheduler_name="kai")
    monkeypatch.setattr(cluster_jobs, "get_backend", lambda: down)

    response = world.client("admin").patch("/api/v1/teams/ml/", {"pod_security": "privileged"}, format="json")

    assert response.status_code == 503
    assert "could not be given the new level" in str(response.json()["pod_security"])
    assert Team.objects.get(slug="ml").pod_security == "baseline"
    assert not AuditEntry.objects.filter(action="update", content_type__model="team").exists()
    page = browser(world, "admin").post(
        "/teams/ml/pod-security/", {"pod_security": "privileged"}, follow=True
    )
    assert "could not be given the new level" in page.content.decode()
    assert Team.objects.get(slug="ml").pod_security == "baseline"
