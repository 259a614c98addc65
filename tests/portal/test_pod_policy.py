"""The pod policy's rules (issue 26), one forbidden field at a time: each is refused with its
manifest path and the rule it breaks, and the field's allowed values pass.

The lists follow the API server's own PodSecurity admission (k8s.io/pod-security-admission
v0.35 ``policy/check_*.go`` at version latest); tests/cluster/test_pod_security.py shows the
same fields refused by the portal on a real API server, and a namespace the portal made refusing
them by itself.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from kai_portal.teams.models import Team
from kai_portal.workloads import pod_policy
from kai_portal.workloads.pod_policy import BASELINE, PRIVILEGED, RESTRICTED, check
from tests.kai_examples import GPU_SHARING_EXAMPLES, kai_file


def pod(**spec: Any) -> dict[str, Any]:
    """A minimal pod spec with one container, an init container and an ephemeral container slot."""
    return {"containers": [{"name": "main", "image": "busybox"}], **spec}


def container(**fields: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "busybox", **fields}]}


def sc(**context: Any) -> dict[str, Any]:
    return container(securityContext=context)


# (spec, annotations, path refused, words of the rule) for the baseline standard and the portal rules.
BASELINE_CASES = [
    (pod(hostNetwork=True), {}, "spec.hostNetwork", "baseline: host namespaces"),
    (pod(hostPID=True), {}, "spec.hostPID", "baseline: host namespaces"),
    (pod(hostIPC=True), {}, "spec.hostIPC", "baseline: host namespaces"),
    (pod(hostNetwork="yes"), {}, "spec.hostNetwork", "baseline: host namespaces"),
    (
        sc(privileged=True),
        {},
        "spec.containers[0].securityContext.privileged",
        "baseline: privileged containers",
    ),
    (
        {
            "containers": [{"name": "m"}],
            "initContainers": [{"name": "i", "securityContext": {"privileged": True}}],
        },
        {},
        "spec.initContainers[0].securityContext.privileged",
        "baseline: privileged containers",
    ),
    (
        {
            "containers": [{"name": "m"}],
            "ephemeralContainers": [{"name": "e", "securityContext": {"privileged": True}}],
        },
        {},
        "spec.ephemeralContainers[0].securityContext.privileged",
        "baseline: privileged containers",
    ),
    (
        sc(capabilities={"add": ["CHOWN", "SYS_ADMIN"]}),
        {},
        "spec.containers[0].securityContext.capabilities.add[1]",
        "baseline: capability 'SYS_ADMIN'",
    ),
    (
        sc(capabilities={"add": ["NET_RAW"]}),
        {},
        "spec.containers[0].securityContext.capabilities.add[0]",
        "baseline: capability 'NET_RAW'",
    ),
    (
        pod(volumes=[{"name": "ok", "emptyDir": {}}, {"name": "root", "hostPath": {"path": "/"}}]),
        {},
        "spec.volumes[1].hostPath",
        "baseline: hostPath volumes",
    ),
    (
        container(ports=[{"containerPort": 80}, {"containerPort": 22, "hostPort": 22}]),
        {},
        "spec.containers[0].ports[1].hostPort",
        "baseline: host ports",
    ),
    (
        pod(
            securityContext={
                "sysctls": [
                    {"name": "kernel.shm_rmid_forced", "value": "1"},
                    {"name": "kernel.msgmax", "value": "1"},
                ]
            }
        ),
        {},
        "spec.securityContext.sysctls[1].name",
        "baseline: only the safe sysctls",
    ),
    (
        sc(procMount="Unmasked"),
        {},
        "spec.containers[0].securityContext.procMount",
        "baseline: only the Default",
    ),
    (
        pod(securityContext={"seccompProfile": {"type": "Unconfined"}}),
        {},
        "spec.securityContext.seccompProfile.type",
        "baseline: seccomp",
    ),
    (
        sc(seccompProfile={"type": "Unconfined"}),
        {},
        "spec.containers[0].securityContext.seccompProfile.type",
        "baseline: seccomp",
    ),
    (
        pod(securityContext={"appArmorProfile": {"type": "Unconfined"}}),
        {},
        "spec.securityContext.appArmorProfile.type",
        "baseline: AppArmor",
    ),
    (
        sc(appArmorProfile={"type": "Unconfined"}),
        {},
        "spec.containers[0].securityContext.appArmorProfile.type",
        "baseline: AppArmor",
    ),
    (
        pod(),
        {"container.apparmor.security.beta.kubernetes.io/main": "unconfined"},
        'metadata.annotations["container.apparmor.security.beta.kubernetes.io/main"]',
        "baseline: AppArmor",
    ),
    (
        pod(securityContext={"seLinuxOptions": {"type": "spc_t"}}),
        {},
        "spec.securityContext.seLinuxOptions.type",
        "baseline: the SELinux type",
    ),
    (
        sc(seLinuxOptions={"user": "system_u"}),
        {},
        "spec.containers[0].securityContext.seLinuxOptions.user",
        "baseline: a custom SELinux user",
    ),
    (
        sc(seLinuxOptions={"role": "sysadm_r"}),
        {},
        "spec.containers[0].securityContext.seLinuxOptions.role",
        "baseline: a custom SELinux role",
    ),
    (
        pod(securityContext={"windowsOptions": {"hostProcess": True}}),
        {},
        "spec.securityContext.windowsOptions.hostProcess",
        "baseline: Windows host processes",
    ),
    (
        sc(windowsOptions={"hostProcess": True}),
        {},
        "spec.containers[0].securityContext.windowsOptions.hostProcess",
        "baseline: Windows host processes",
    ),
    (
        container(livenessProbe={"httpGet": {"host": "10.0.0.1", "port": 80}}),
        {},
        "spec.containers[0].livenessProbe.httpGet.host",
        "baseline: probes and lifecycle handlers",
    ),
    (
        container(lifecycle={"preStop": {"tcpSocket": {"host": "metadata", "port": 80}}}),
        {},
        "spec.containers[0].lifecycle.preStop.tcpSocket.host",
        "baseline: probes and lifecycle handlers",
    ),
    # Portal rules lifted only at privileged.
    (
        pod(serviceAccountName="kai-portal"),
        {},
        "spec.serviceAccountName",
        "baseline: pods run as the namespace's default",
    ),
    (pod(serviceAccount="admin"), {}, "spec.serviceAccount", "baseline: pods run as the namespace's default"),
    (pod(automountServiceAccountToken=True), {}, "spec.automountServiceAccountToken", "baseline: mounting"),
]

# Refused at every level, privileged included: they bypass the scheduler, not the node's isolation.
EVERY_LEVEL_CASES = [
    (pod(nodeName="gpu-1"), "spec.nodeName", "every level: the scheduler places pods"),
    (
        pod(priority=1000000),
        "spec.priority",
        "every level: a pod's priority comes from its priorityClassName",
    ),
    (
        pod(tolerations=[{"key": "a", "operator": "Exists"}, {"operator": "Exists"}]),
        "spec.tolerations[1]",
        "every level: a toleration without a key",
    ),
    (
        pod(tolerations=[{"operator": "Exists", "effect": "NoSchedule"}]),
        "spec.tolerations[0]",
        "every level: a toleration without a key",
    ),
]

RESTRICTED_POD = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "main",
            "image": "busybox",
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        }
    ],
}


def restricted(change: Any) -> dict[str, Any]:
    spec = copy.deepcopy(RESTRICTED_POD)
    change(spec)
    return spec


def _main(spec: dict[str, Any]) -> dict[str, Any]:
    return spec["containers"][0]["securityContext"]  # type: ignore[no-any-return]


RESTRICTED_CASES = [
    (
        restricted(lambda s: s["securityContext"].pop("runAsNonRoot")),
        "spec.containers[0].securityContext.runAsNonRoot",
        "restricted: containers must run as non-root",
    ),
    (
        restricted(lambda s: _main(s).update(runAsNonRoot=False)),
        "spec.containers[0].securityContext.runAsNonRoot",
        "restricted: containers must run as non-root",
    ),
    (
        restricted(lambda s: s["securityContext"].update(runAsUser=0)),
        "spec.securityContext.runAsUser",
        "restricted: containers must not run as user 0",
    ),
    (
        restricted(lambda s: _main(s).pop("allowPrivilegeEscalation")),
        "spec.containers[0].securityContext.allowPrivilegeEscalation",
        "restricted: must be set to false",
    ),
    (
        restricted(lambda s: _main(s).update(capabilities={})),
        "spec.containers[0].securityContext.capabilities.drop",
        'restricted: must include "ALL"',
    ),
    (
        restricted(lambda s: _main(s)["capabilities"].update(add=["CHOWN"])),
        "spec.containers[0].securityContext.capabilities.add[0]",
        "restricted: only NET_BIND_SERVICE",
    ),
    (
        restricted(lambda s: s["securityContext"].pop("seccompProfile")),
        "spec.containers[0].securityContext.seccompProfile.type",
        "restricted: a seccomp profile is required",
    ),
    (
        restricted(lambda s: s.update(volumes=[{"name": "n", "nfs": {"server": "x", "path": "/"}}])),
        "spec.volumes[0].nfs",
        "restricted: volume type is not allowed",
    ),
    (
        restricted(lambda s: s.update(initContainers=[{"name": "i"}])),
        "spec.initContainers[0].securityContext.allowPrivilegeEscalation",
        "restricted: must be set to false",
    ),
]


@pytest.mark.parametrize(
    ("spec", "annotations", "path", "rule"), BASELINE_CASES, ids=[case[2] for case in BASELINE_CASES]
)
def test_baseline_refuses_the_field_naming_its_path_and_rule(spec, annotations, path, rule):
    found = check(spec, annotations, BASELINE)
    assert [v.path for v in found] == [path]
    assert found[0].rule.startswith(rule), found[0].rule
    # Every refusal says what a user can do about it.
    assert "portal admin can change the team's pod security level" in found[0].rule
    # The same field inside a batch Job's template is named there.
    assert [v.path for v in check(spec, annotations, BASELINE, prefix="spec.template.")] == [
        path.replace("spec.", "spec.template.spec.", 1)
        if path.startswith("spec.")
        else f"spec.template.{path}"
    ]


@pytest.mark.parametrize(
    ("spec", "annotations", "path", "rule"), BASELINE_CASES, ids=[case[2] for case in BASELINE_CASES]
)
def test_restricted_refuses_what_baseline_refuses_and_privileged_allows_it(spec, annotations, path, rule):
    assert path in [v.path for v in check(spec, annotations, RESTRICTED)]
    assert check(spec, annotations, PRIVILEGED) == []


@pytest.mark.parametrize(("spec", "path", "rule"), EVERY_LEVEL_CASES, ids=[c[1] for c in EVERY_LEVEL_CASES])
@pytest.mark.parametrize("level", pod_policy.LEVELS)
def test_scheduling_bypasses_are_refused_at_every_level(spec, path, rule, level):
    found = [v for v in check(spec, {}, level) if v.path == path]
    assert len(found) == 1 and found[0].rule.startswith(rule), found


@pytest.mark.parametrize(("spec", "path", "rule"), RESTRICTED_CASES, ids=[c[1] for c in RESTRICTED_CASES])
def test_restricted_refuses_the_field_and_baseline_allows_it(spec, path, rule):
    found = check(spec, {}, RESTRICTED)
    assert path in [v.path for v in found], found
    assert next(v for v in found if v.path == path).rule.startswith(rule)
    assert check(spec, {}, BASELINE) == []


@pytest.mark.parametrize(
    ("spec", "annotations"),
    [
        (pod(hostNetwork=False, hostPID=False, hostIPC=False), {}),
        (
            sc(
                privileged=False,
                procMount="Default",
                capabilities={"add": sorted(pod_policy.BASELINE_CAPABILITIES)},
            ),
            {},
        ),
        (
            pod(
                securityContext={
                    "sysctls": [{"name": n, "value": "1"} for n in sorted(pod_policy.SAFE_SYSCTLS)]
                }
            ),
            {},
        ),
        (pod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]), {}),
        (container(ports=[{"containerPort": 80, "hostPort": 0}]), {}),
        (
            sc(
                seccompProfile={"type": "RuntimeDefault"},
                appArmorProfile={"type": "Localhost", "localhostProfile": "p"},
            ),
            {},
        ),
        (pod(), {"container.apparmor.security.beta.kubernetes.io/main": "localhost/my-profile"}),
        (pod(), {"container.apparmor.security.beta.kubernetes.io/main": "runtime/default"}),
        (sc(seLinuxOptions={"type": "container_t", "level": "s0:c123,c456"}), {}),
        (sc(windowsOptions={"hostProcess": False}), {}),
        (container(livenessProbe={"httpGet": {"path": "/", "port": 80}}), {}),
        (pod(serviceAccountName="default", automountServiceAccountToken=False), {}),
        (pod(tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]), {}),
        (pod(priorityClassName="train", hostUsers=False), {}),
        (pod(hostUsers=False, containers=[{"name": "m", "securityContext": {"procMount": "Unmasked"}}]), {}),
    ],
)
def test_baseline_allows_each_fields_allowed_values(spec, annotations):
    assert check(spec, annotations, BASELINE) == []


def test_the_restricted_pod_passes_and_a_windows_pod_is_exempt_from_the_linux_checks():
    assert check(RESTRICTED_POD, {}, RESTRICTED) == []
    windows = {
        "os": {"name": "windows"},
        "securityContext": {"runAsNonRoot": True},
        "containers": [{"name": "main", "image": "mcr.microsoft.com/windows"}],
    }
    assert check(windows, {}, RESTRICTED) == []


def test_the_attack_of_issue_26_is_refused_field_by_field():
    """The body a member got accepted: root on a GPU node."""
    spec = {
        "hostNetwork": True,
        "hostPID": True,
        "hostIPC": True,
        "serviceAccountName": "kai-portal",
        "automountServiceAccountToken": True,
        "tolerations": [{"operator": "Exists"}],
        "containers": [
            {
                "name": "x",
                "image": "busybox",
                "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
                "volumeMounts": [{"name": "root", "mountPath": "/host"}],
            }
        ],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
    }
    assert sorted(v.path for v in check(spec, {}, BASELINE)) == sorted(
        [
            "spec.tolerations[0]",
            "spec.serviceAccountName",
            "spec.automountServiceAccountToken",
            "spec.hostNetwork",
            "spec.hostPID",
            "spec.hostIPC",
            "spec.volumes[0].hostPath",
            "spec.containers[0].securityContext.privileged",
            "spec.containers[0].securityContext.capabilities.add[0]",
        ]
    )
    assert [v.path for v in check(spec, {}, PRIVILEGED)] == ["spec.tolerations[0]"]


def test_an_unknown_level_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown pod security level"):
        check(pod(), {}, "open")


KAI_EXAMPLES = [
    "docs/quickstart/pods/gpu-pod.yaml",
    "docs/quickstart/pods/cpu-only-pod.yaml",
    "docs/batch/batch-job.yaml",
    "docs/batch/batch-job-min-member.yaml",
    "docs/priority/example/train-priority-pod.yaml",
    "docs/priority/example/build-priority-pod.yaml",
    "docs/gpu-sharing/gpu-sharing-init-container.yaml",
    *(f"docs/gpu-sharing/{name}" for name in GPU_SHARING_EXAMPLES),
]


@pytest.mark.parametrize("path", KAI_EXAMPLES)
def test_kai_s_docs_examples_pass_baseline(path):
    doc = yaml.safe_load(kai_file(path))
    template = doc["spec"]["template"] if doc["kind"] == "Job" else doc
    metadata = template.get("metadata") or {}
    assert check(template["spec"], metadata.get("annotations") or {}, BASELINE) == []


def test_kai_s_mps_example_mounts_a_host_path_so_it_needs_a_privileged_team():
    doc = yaml.safe_load(kai_file("docs/gpu-sharing/mps/gpu-sharing-with-mps.yaml"))
    assert [v.path for v in check(doc["spec"], {}, BASELINE)] == ["spec.volumes[0].hostPath"]
    assert check(doc["spec"], {}, PRIVILEGED) == []


def test_the_team_levels_an_admin_can_choose_are_the_levels_the_policy_checks() -> None:
    """``Team.PodSecurity`` (the admin's choice) and ``pod_policy.LEVELS`` (what ``check`` takes)
    name the levels twice: a level added to one only would be refused, or never offered."""
    assert sorted(Team.PodSecurity.values) == sorted(pod_policy.LEVELS)
    assert Team._meta.get_field("pod_security").default == pod_policy.BASELINE
