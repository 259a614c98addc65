"""YAML that costs the server more than it stands for (issue 26): a 198 KB manifest of 99,000
scalars took 4 s of a web worker to parse, and three at once held every worker for 15 s.

A manifest or a Queue YAML file is bounded in bytes (413) and in values (400), counted on
libyaml's event stream as it is read, so the parse stops at the bound; nothing is saved.
The project measures speed in benchmarks, not here: these tests show the refusal, that the
parse stopped early (events read), and that KAI's own manifests fit with room to spare.
"""

from __future__ import annotations

import subprocess

import pytest
import yaml
from django.conf import settings
from django.test import Client

from kai_portal.core import safe_yaml
from kai_portal.queues.kai_yaml import export_queues
from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job
from tests.kai_examples import MIRROR, kai_file
from tests.portal.web.api_world import World

HEADER = """apiVersion: v1
kind: Pod
metadata:
  name: costly
  labels: {kai.scheduler/queue: ml-train}
spec:
  containers:
    - name: main
      image: busybox
"""


def many_scalars(count: int = 99_000) -> str:
    """The reported document: a valid Pod whose args list holds ``count`` one-letter scalars."""
    return HEADER + "      args: [" + ",".join(["x"] * count) + "]\n"


def queue_file(count: int = 99_000) -> str:
    return "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: costly\n" + (
        "spec:\n  priority: 1\n  x: [" + ",".join(["1"] * count) + "]\n"
    )


def test_the_99k_scalar_manifest_is_refused_after_reading_no_more_than_the_bound(world: World) -> None:
    text = many_scalars()
    assert 190_000 < len(text) < settings.MANIFEST_MAX_BYTES  # the size bound alone would let it in
    with pytest.raises(safe_yaml.UnsafeYamlError) as refused:
        safe_yaml.scan_events(text, safe_yaml.manifest_bounds())
    # The parse stopped at the bound: a few events past MANIFEST_MAX_NODES, not 99,000.
    assert settings.MANIFEST_MAX_NODES < refused.value.events_read <= settings.MANIFEST_MAX_NODES + 20

    response = world.client("member").post("/api/v1/jobs/manifest/", text, content_type="application/yaml")
    assert response.status_code == 400, response.content[:300]
    message = response.json()["message"]
    assert f"more than {settings.MANIFEST_MAX_NODES} values" in message and "smaller document" in message
    assert len(response.content) < 2_000
    assert not Job.objects.filter(name="costly").exists()


def test_a_manifest_over_the_byte_bound_is_a_413_naming_the_limit(world: World) -> None:
    padding = "a" * settings.MANIFEST_MAX_BYTES
    text = HEADER.replace("  name: costly\n", f"  name: costly\n  annotations: {{note: {padding}}}\n")
    response = world.client("member").post("/api/v1/jobs/manifest/", text, content_type="application/yaml")
    assert response.status_code == 413, response.content[:300]
    detail = response.json()["detail"]
    assert (
        f"over the limit of {settings.MANIFEST_MAX_BYTES} bytes" in detail and "MANIFEST_MAX_BYTES" in detail
    )
    assert len(response.content) < 2_000 and not Job.objects.filter(name="costly").exists()


def test_the_yaml_page_refuses_the_99k_scalar_manifest_with_the_reason(world: World) -> None:
    client = Client()
    client.force_login(world.users["member"])
    response = client.post("/jobs/submit/yaml/", {"manifest": many_scalars()})
    assert response.status_code == 200  # the page again, with the manifest's problem
    assert f"more than {settings.MANIFEST_MAX_NODES} values" in response.content.decode()
    assert not Job.objects.filter(name="costly").exists()


def test_queue_import_is_bounded_too(world: World) -> None:
    admin = world.client("admin")
    response = admin.post("/api/v1/queues/import/", queue_file(), content_type="application/yaml")
    assert response.status_code == 400, response.content[:300]
    assert f"more than {settings.QUEUE_YAML_MAX_NODES} values" in response.json()["detail"]
    too_big = queue_file(10).replace(
        "  priority: 1\n", "  priority: 1\n  # " + "c" * settings.QUEUE_YAML_MAX_BYTES + "\n"
    )
    response = admin.post("/api/v1/queues/import/", too_big, content_type="application/yaml")
    assert response.status_code == 413, response.content[:300]
    assert "QUEUE_YAML_MAX_BYTES" in response.json()["detail"]
    assert not Queue.objects.filter(name="costly").exists()


def _values(text: str) -> int:
    """Values (scalars, collections, aliases) in ``text``, as the bounds count them."""
    kinds = (yaml.ScalarEvent, yaml.CollectionStartEvent, yaml.AliasEvent)
    return sum(isinstance(e, kinds) for e in yaml.parse(text, Loader=yaml.CSafeLoader))


def test_kais_example_manifests_and_a_large_queue_export_fit_with_room_to_spare(world: World) -> None:
    kai_file("docs/quickstart/pods/gpu-pod.yaml")  # skips without the mirror
    listing = subprocess.run(
        ["git", "--git-dir", str(MIRROR), "ls-tree", "-r", "--name-only", "HEAD", "docs/"],
        capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    examples = [p for p in listing.stdout.split() if p.endswith((".yaml", ".yml"))]
    assert len(examples) >= 10
    largest = max(_values(document) for p in examples for document in kai_file(p).split("\n---"))
    assert largest * 20 <= settings.MANIFEST_MAX_NODES, largest
    assert max(len(kai_file(p).encode()) for p in examples) * 50 <= settings.MANIFEST_MAX_BYTES
    # A Queue YAML export of 500 queues imports within the queue bounds.
    queues = list(Queue.objects.all())
    per_queue = max(_values(export_queues([q])) for q in queues)
    assert per_queue * 500 <= settings.QUEUE_YAML_MAX_NODES, per_queue
    assert max(len(export_queues([q]).encode()) for q in queues) * 500 <= settings.QUEUE_YAML_MAX_BYTES
