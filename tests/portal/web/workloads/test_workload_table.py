"""Workloads table: sortable, filterable by queue, team, state and pool, a CSV from the same
filterset; 'view YAML' of jobs and queues; 'copy and edit' a job into the submit form."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import yaml

from kai_portal.nodes.models import NodePool
from kai_portal.queues.kai_yaml import parse_documents
from kai_portal.workloads.lifecycle import cancel_job
from kai_portal.workloads.manifests import parse_manifest
from kai_portal.workloads.models import Job
from tests.portal import factories


@pytest.fixture
def jobs(world: dict) -> dict[str, Job]:
    alpha = world["queues"]["alpha"]
    factories.node("a100-1", pool="a100", gpus=8)
    a100 = NodePool.objects.get(name="a100")
    # A job runs in its queue's pool: alpha's team has a queue in the a100 pool too.
    alpha_a100 = factories.queue("alpha-a100", team=alpha.team, node_pool=a100, gpu_quota=8)
    made = {
        "big": factories.job(alpha_a100, "big", gpu_count=4, task_count=2, min_member=2),
        "frac": factories.job(alpha, "frac", gpu_count=0, gpu_fraction=Decimal("0.5"),
                              duration=timedelta(minutes=90), priority_class="inference"),
        "mem": factories.job(alpha, "mem", gpu_count=0, gpu_memory_mib=20480, cpu_millicores=1500,
                             memory_mib=4096, image="pytorch:24", command="python train.py"),
    }  # fmt: skip
    cancel_job(made["mem"], actor=world["users"]["admin"])
    return made


def _names(response: Any) -> list[str]:
    return [job.name for job in response.context["jobs"]]


def test_filters_by_queue_team_state_and_pool(world: dict, jobs: dict, client_for: Any) -> None:
    client = client_for("admin")
    assert set(_names(client.get("/jobs/table/?queue=beta-train"))) == {"beta-job"}
    assert set(_names(client.get("/jobs/table/?team=alpha"))) == {"alpha-job", "big", "frac", "mem"}
    assert set(_names(client.get("/jobs/table/?team=alpha&state=cancelled"))) == {"mem"}
    assert _names(client.get("/jobs/table/?node_pool=a100")) == ["big"]


def test_sorts_by_any_column_both_ways(world: dict, jobs: dict, client_for: Any) -> None:
    client = client_for("admin")
    assert _names(client.get("/jobs/table/?sort=name")) == ["alpha-job", "beta-job", "big", "frac", "mem"]
    assert _names(client.get("/jobs/table/?sort=-name")) == ["mem", "frac", "big", "beta-job", "alpha-job"]
    assert _names(client.get("/jobs/table/?sort=-tasks&team=alpha"))[0] == "big"
    by_priority = _names(client.get("/jobs/table/?sort=-priority"))
    assert by_priority[0] == "frac"  # inference outranks train
    response = client.get("/jobs/table/?sort=name")
    assert 'href="?sort=-name"' in response.content.decode()  # the header link flips the order


def test_members_see_only_their_teams_jobs(world: dict, jobs: dict, client_for: Any) -> None:
    assert "beta-job" not in _names(client_for("member").get("/jobs/table/"))


def test_csv_has_the_same_rows_as_the_page(world: dict, jobs: dict, client_for: Any) -> None:
    client = client_for("admin")
    query = "team=alpha&sort=name"
    response = client.get(f"/jobs/table.csv?{query}")
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [r["name"] for r in rows] == _names(client.get(f"/jobs/table/?{query}"))
    frac = next(r for r in rows if r["name"] == "frac")
    got = (frac["queue"], frac["team"], frac["gpu_request"], frac["state"])
    assert got == ("alpha-train", "Alpha", "0.5 × 1", "pending")
    member_rows = b"".join(client_for("member").get("/jobs/table.csv").streaming_content).decode()
    assert "beta-job" not in member_rows


def test_job_yaml_is_a_manifest_that_submits_the_same_request(
    world: dict, jobs: dict, client_for: Any
) -> None:
    client = client_for("member")
    for name in ("big", "frac", "mem"):
        job = jobs[name]
        response = client.get(f"/jobs/{job.uid}/yaml/")
        assert response.status_code == 200
        doc = yaml.safe_load(response.content)
        assert doc["kind"] == ("Job" if name == "big" else "Pod")
        doc["metadata"]["name"] = f"{name}-again"
        again = parse_manifest(doc, world["users"]["member"])
        fields = ("queue_id", "task_count", "min_member", "gpu_count", "gpu_fraction", "gpu_memory_mib",
                  "gpu_fraction_devices", "cpu_millicores", "memory_mib", "priority_class", "node_pool_id",
                  "duration", "command")  # fmt: skip
        assert {f: getattr(again, f) for f in fields} == {f: getattr(job, f) for f in fields}, name
        assert again.image == (job.image or "busybox")  # a Pod needs an image; none was given
    assert client_for("outsider").get(f"/jobs/{jobs['big'].uid}/yaml/").status_code == 404


def test_queue_yaml_is_kai_queue_v2(world: dict, client_for: Any) -> None:
    response = client_for("member").get("/queues/alpha-train/yaml/")
    assert response.status_code == 200
    [doc] = parse_documents(response.content.decode())
    assert (doc.name, doc.parent, doc.values["gpu_quota"]) == ("alpha-train", "research", Decimal("2"))
    assert client_for("outsider").get("/queues/alpha-train/yaml/").status_code == 404


def test_copy_and_edit_fills_the_submit_form(world: dict, jobs: dict, client_for: Any) -> None:
    client = client_for("member")
    form = client.get(f"/jobs/submit/?copy={jobs['mem'].uid}").context["form"]
    initial = {
        name: form[name].value() for name in ("name", "gpu_mode", "gpu_memory_mib", "cpu_cores", "image")
    }
    assert initial == {"name": "mem-copy", "gpu_mode": "memory", "gpu_memory_mib": 20480, "cpu_cores": 1.5,
                       "image": "pytorch:24"}  # fmt: skip
    assert form["queue"].value() == world["queues"]["alpha"].pk
    assert client.get(f"/jobs/submit/?copy={jobs['frac'].uid}").context["form"]["run_time"].value() == "1h30m"
    # A job the user may not see gives an empty form, not its values.
    beta = world["jobs"]["beta"]
    assert client.get(f"/jobs/submit/?copy={beta.uid}").context["form"]["name"].value() is None
    assert client.get("/jobs/submit/?copy=not-a-uuid").status_code == 200


@pytest.mark.parametrize("extra", [0, 30])
def test_query_count_does_not_grow_with_rows(
    world: dict, client_for: Any, django_assert_max_num_queries: Any, extra: int
) -> None:
    for i in range(extra):
        factories.job(world["queues"]["alpha"], f"extra-{i}")
    client = client_for("member")
    with django_assert_max_num_queries(10):
        assert client.get("/jobs/table/?sort=-created").status_code == 200
    with django_assert_max_num_queries(4):
        response = client.get("/jobs/table.csv")
        assert len(b"".join(response.streaming_content).decode().splitlines()) == extra + 2
