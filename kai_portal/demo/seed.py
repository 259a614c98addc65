"""Demo data: a small GPU cluster, a department/team/queue tree, users and jobs.

``seed()`` is idempotent: it creates what is missing and leaves what exists
(jobs already submitted are never touched, so a running demo keeps its
state). Passwords are set only when a user is created: the portal admin
``admin`` gets ``DEMO_ADMIN_PASSWORD`` (default ``admin``), every team user
``DEMO_USER_PASSWORD`` (default ``demo``). The defaults are for ``make run``
(DEBUG on) only: with DEBUG off both must be set (``demo_passwords``), or a
portal reachable by others would have an ``admin``/``admin`` superuser.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from kai_portal.demo import past_jobs
from kai_portal.nodes.models import GpuDevice, Node, NodePool
from kai_portal.queues.models import Queue
from kai_portal.teams.models import Membership, Team
from kai_portal.workloads import cluster_jobs, submission
from kai_portal.workloads.models import Job

GIB = 1024  # MiB per GiB


@dataclass(frozen=True)
class PoolSpec:
    name: str
    description: str
    gpu_sharing: bool
    nodes: int
    gpu_model: str
    gpu_memory_mib: int
    cpu_millicores: int
    memory_mib: int


POOLS = [
    PoolSpec(
        "default", "A100 80GB training nodes", True, 6, "NVIDIA A100-SXM4-80GB", 80 * GIB, 128_000, 1024 * GIB
    ),
    PoolSpec(
        "h100", "H100 nodes for large gangs", False, 4, "NVIDIA H100-SXM5-80GB", 80 * GIB, 192_000, 2048 * GIB
    ),
    PoolSpec(
        "inference", "L4 24GB nodes for fractional GPUs", True, 4, "NVIDIA L4", 24 * GIB, 64_000, 256 * GIB
    ),
]

QueueRow = dict[str, Any]


def _queue(
    name: str, parent: str | None, team: str | None, gpu: tuple[str, str, str], **more: Any
) -> QueueRow:
    """A queue row: GPU (quota, limit, weight) as text; CPU/memory and the rest as keywords."""
    quota, limit, weight = (Decimal(v) for v in gpu)
    return {
        "name": name,
        "parent": parent,
        "team": team,
        "gpu_quota": quota,
        "gpu_limit": limit,
        "gpu_over_quota_weight": weight,
        **more,
    }


# A department tree per node pool (KAI: each pool is a scheduling shard with its own queues);
# teams that use several pools have a queue in each. Departments' quotas fit their pool:
# default 48 GPUs (6 nodes), h100 32 (4 nodes), inference 32 (4 nodes).
QUEUES: list[QueueRow] = [
    _queue(
        "research", None, None, ("40", "-1", "1"), pool="default", cpu_quota=600_000,
        memory_quota=4096 * GIB, preempt_min_runtime=timedelta(minutes=10),
        reclaim_min_runtime=timedelta(minutes=30),
    ),
    _queue("nlp", "research", "nlp", ("20", "32", "2"), cpu_quota=300_000, memory_quota=2048 * GIB),
    _queue("vision", "research", "vision", ("16", "-1", "1"), cpu_quota=200_000, memory_quota=1024 * GIB),
    _queue("recsys", "research", "recsys", ("4", "-1", "1"), cpu_quota=100_000, memory_quota=512 * GIB),
    _queue(
        "research-h100", None, None, ("32", "-1", "1"), pool="h100", cpu_quota=600_000,
        memory_quota=4096 * GIB, reclaim_min_runtime=timedelta(minutes=30),
    ),
    _queue("nlp-h100", "research-h100", "nlp", ("24", "-1", "2"), cpu_quota=400_000, memory_quota=2048 * GIB),
    _queue(
        "vision-h100", "research-h100", "vision", ("8", "16", "1"), cpu_quota=100_000,
        memory_quota=1024 * GIB,
    ),
    _queue(
        "production", None, None, ("28", "-1", "1"), pool="inference", priority=120, cpu_quota=200_000,
        memory_quota=1024 * GIB, reclaim_min_runtime=timedelta(hours=1),
    ),
    _queue(
        "serving", "production", "serving", ("16", "24", "1"), priority=120, cpu_quota=100_000,
        memory_quota=512 * GIB,
    ),
    _queue(
        "recsys-inference", "production", "recsys", ("12", "-1", "1"), cpu_quota=50_000,
        memory_quota=256 * GIB,
    ),
    _queue(
        "sandbox", None, None, ("0", "16", "0.5"), pool="inference", priority=50, cpu_quota=0,
        cpu_limit=64_000, memory_quota=0, memory_limit=512 * GIB,
    ),
    _queue(
        "interns", "sandbox", "interns", ("0", "8", "1"), cpu_quota=0, cpu_limit=32_000,
        memory_quota=0, memory_limit=256 * GIB,
    ),
]  # fmt: skip

TEAMS = {
    "nlp": "NLP Research",
    "vision": "Computer Vision",
    "serving": "Model Serving",
    "recsys": "Recommendations",
    "interns": "Interns",
}

MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)


def _job(queue: str, name: str, cpu: int, memory_gib: int, run: timedelta, **more: Any) -> dict:
    """A demo job: per-task CPU (millicores), memory (GiB) and simulated run time, plus Job fields."""
    return {
        "queue": queue, "name": name, "cpu_millicores": cpu,
        "memory_mib": memory_gib * GIB, "duration": run, **more,
    }  # fmt: skip


# Whole-GPU, gang, elastic, fractional, GPU-memory and CPU-only jobs, all pending at first.
# Whole-GPU, gang, elastic, fractional, GPU-memory and CPU-only jobs, all pending at first;
# each in its queue's node pool.
JOBS: list[dict[str, Any]] = [
    _job("nlp-h100", "llm-pretrain", 96_000, 1024, 2 * HOUR, task_count=4, min_member=4, gpu_count=8),
    _job("nlp", "bert-finetune", 16_000, 64, 30 * MINUTE, gpu_count=2),
    _job("nlp", "tokenizer-build", 8_000, 32, 10 * MINUTE, priority_class="build"),
    _job("vision", "resnet-sweep", 8_000, 32, 20 * MINUTE, task_count=8, min_member=0, gpu_count=1),
    _job("vision", "segmentation-train", 32_000, 256, HOUR, task_count=2, min_member=2, gpu_count=4),
    _job(
        "serving", "chat-inference", 4_000, 16, 8 * HOUR, task_count=4,
        gpu_fraction=Decimal("0.5"), priority_class="inference", preemptibility="non-preemptible",
    ),
    _job(
        "serving", "embedding-server", 2_000, 8, 8 * HOUR, task_count=2,
        gpu_memory_mib=8 * GIB, priority_class="inference",
    ),
    _job("recsys", "ranker-train", 32_000, 128, 45 * MINUTE, task_count=2, min_member=2, gpu_count=4),
    _job("recsys", "feature-etl", 16_000, 64, 15 * MINUTE, task_count=4),
    _job(
        "interns", "notebook-alice", 2_000, 8, 3 * HOUR, gpu_fraction=Decimal("0.25"), priority_class="build",
    ),
    _job("interns", "mnist", 4_000, 16, 5 * MINUTE, gpu_count=1),
]  # fmt: skip


class MissingDemoPassword(Exception):
    """DEBUG is off and a demo password is not set: nothing is created."""


def demo_passwords() -> tuple[str, str]:
    """The admin's and the team users' passwords: the environment's, else (DEBUG only) the defaults."""
    admin = os.environ.get("DEMO_ADMIN_PASSWORD", "")
    member = os.environ.get("DEMO_USER_PASSWORD", "")
    missing = [name for name, value in (("DEMO_ADMIN_PASSWORD", admin), ("DEMO_USER_PASSWORD", member))
               if not value]  # fmt: skip
    if missing and not settings.DEBUG:
        raise MissingDemoPassword(
            f"DEBUG is off: set {' and '.join(missing)} in the environment to the demo users' passwords "
            "(the defaults admin/demo are only for DEBUG=1, e.g. make run). Nothing was created."
        )
    return admin or "admin", member or "demo"


@transaction.atomic
def seed() -> bool:
    """Create the demo cluster, teams, users, queue tree and jobs (idempotent).

    Against a real cluster (``CLUSTER_BACKEND=kubernetes``) the cluster's own nodes are the
    truth and a job is real pods, so only the pools, people and queues are made; returns
    False then (no demo nodes or jobs).
    """
    passwords = demo_passwords()  # first: a refusal creates nothing
    simulated = not cluster_jobs.enabled()
    _seed_cluster(with_nodes=simulated)
    users = _seed_people(*passwords)
    _seed_queues()
    if simulated:
        _seed_jobs(users)
        past_jobs.seed_past_week(timezone.now())  # history for the capacity planner
    return simulated


def _seed_cluster(*, with_nodes: bool) -> None:
    for spec in POOLS:
        pool, _ = NodePool.objects.update_or_create(
            name=spec.name, defaults={"description": spec.description, "gpu_sharing": spec.gpu_sharing}
        )
        for n in range(1, spec.nodes + 1) if with_nodes else ():
            node, _ = Node.objects.update_or_create(
                name=f"{spec.name}-node-{n:02d}",
                defaults={
                    "pool": pool,
                    "cpu_millicores": spec.cpu_millicores,
                    "memory_mib": spec.memory_mib,
                    "labels": {
                        "kai.scheduler/node-pool": spec.name,
                        "nvidia.com/gpu.product": spec.gpu_model,
                        "nvidia.com/gpu.memory": str(spec.gpu_memory_mib),
                        "nvidia.com/gpu.count": "8",
                    },
                },
            )
            for index in range(8):
                GpuDevice.objects.update_or_create(
                    node=node,
                    index=index,
                    defaults={"model": spec.gpu_model, "memory_mib": spec.gpu_memory_mib},
                )


def _seed_people(admin_password: str, password: str) -> dict[str, Any]:
    user_model = get_user_model()
    users: dict[str, Any] = {}
    admin, created = user_model.objects.get_or_create(
        username="admin", defaults={"is_staff": True, "is_superuser": True, "email": "admin@example.com"}
    )
    if created:
        admin.set_password(admin_password)
        admin.save()
    users["admin"] = admin
    for slug, name in TEAMS.items():
        team, _ = Team.objects.update_or_create(slug=slug, defaults={"name": name})
        for suffix, role in (("lead", Membership.Role.ADMIN), ("dev1", Membership.Role.MEMBER),
                             ("dev2", Membership.Role.MEMBER)):  # fmt: skip
            user, created = user_model.objects.get_or_create(
                username=f"{slug}-{suffix}", defaults={"email": f"{slug}-{suffix}@example.com"}
            )
            if created:
                user.set_password(password)
                user.save()
            Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
            users[user.username] = user
    return users


def _seed_queues() -> None:
    teams = {t.slug: t for t in Team.objects.all()}
    pools = {p.name: p for p in NodePool.objects.all()}
    for row in QUEUES:
        values = dict(row)
        name, parent, team = values.pop("name"), values.pop("parent"), values.pop("team")
        values["parent"] = Queue.objects.get(name=parent) if parent else None
        values["team"] = teams[team] if team else None
        values["node_pool"] = values["parent"].node_pool if parent else pools[values.pop("pool")]
        if Queue.objects.filter(name=name).exclude(node_pool=values["node_pool"]).exists():
            continue  # a queue of an older demo in another pool: leave it as it is
        Queue.objects.update_or_create(name=name, defaults=values)


def _seed_jobs(users: dict[str, Any]) -> None:
    for row in JOBS:
        values = dict(row)
        queue = Queue.objects.select_related("team", "node_pool").get(name=values.pop("queue"))
        if Job.objects.filter(name=values["name"]).exists():
            continue  # never touch a submitted job: the scheduler owns its state now
        submitter = users[f"{queue.team.slug}-dev1"] if queue.team else users["admin"]
        module = values["name"].replace("-", "_")
        submission.submit(
            Job(
                queue=queue,
                submitter=submitter,
                image="nvcr.io/nvidia/pytorch:24.08-py3",
                command=f"python -m {module}",
                **values,
            )
        )
