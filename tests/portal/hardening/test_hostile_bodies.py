"""Bodies built to hurt: alias bombs, huge bodies, deep nesting, unknown API paths (issue 14).

Each gets a 4xx with a JSON message, quickly and without reading or building more than a bound.
"""

from __future__ import annotations

import io
import json
import time

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import override_settings

from kai_portal.queues.models import Queue
from kai_portal.workloads.models import Job
from tests.portal.web.api_world import World


def _alias_bomb(levels: int = 9) -> str:
    """The "billion laughs": each level is nine aliases of the one before (9**9 strings)."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [{','.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("url", "persona"), [("/api/v1/jobs/manifest/", "member"), ("/api/v1/queues/import/", "admin")]
)
def test_an_alias_bomb_is_a_small_400_within_a_second(world: World, url: str, persona: str) -> None:
    bomb = _alias_bomb()
    assert len(bomb) < 600
    world.client(persona).post(url, "a: 1", content_type="application/yaml")  # first-request imports
    started = time.monotonic()
    response = world.client(persona).post(url, bomb, content_type="application/yaml")
    assert time.monotonic() - started < 1.0
    assert response.status_code == 400
    assert len(response.content) < 2_000
    assert "aliases" in response.content.decode()


def test_a_small_anchor_used_a_few_times_is_still_fine(world: World) -> None:
    manifest = """apiVersion: v1
kind: Pod
metadata:
  name: anchored
  labels: &labels {kai.scheduler/queue: ml-train}
spec:
  containers:
    - {name: a, resources: &res {requests: {cpu: "1"}}}
    - {name: b, resources: *res}
"""
    response = world.client("member").post(
        "/api/v1/jobs/manifest/", manifest, content_type="application/yaml"
    )
    assert response.status_code == 201, response.content
    assert Job.objects.get(name="anchored").cpu_millicores == 2000


class CountingInput(io.RawIOBase):
    """A WSGI input of ``size`` bytes that counts how many were read."""

    def __init__(self, size: int) -> None:
        self.size, self.read_bytes = size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.size - self.read_bytes)
        buffer[:n] = b" " * n
        self.read_bytes += n
        return n


def _wsgi_post(
    world: World, path: str, content_type: str, body: CountingInput, length: int, persona: str = "member"
) -> tuple:
    environ = {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "SERVER_NAME": "localhost", "SERVER_PORT": "80",
        "wsgi.url_scheme": "http", "wsgi.input": io.BufferedReader(body), "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(length), "HTTP_AUTHORIZATION": f"Bearer {world.secrets[persona]}",
        "HTTP_HOST": "localhost", "wsgi.errors": io.StringIO(),
    }  # fmt: skip
    status: list[str] = []
    chunks = WSGIHandler()(environ, lambda s, headers: status.append(s))
    return status[0], b"".join(chunks)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("path", "content_type", "persona"),
    [
        ("/api/v1/jobs/manifest/", "application/yaml", "member"),
        ("/api/v1/queues/import/", "text/yaml", "admin"),
        ("/api/v1/jobs/", "application/json", "member"),
    ],
)
def test_a_50_mb_body_is_a_413_without_being_read(
    world: World, path: str, content_type: str, persona: str
) -> None:
    body = CountingInput(50 * 2**20)
    _wsgi_post(world, path, content_type, CountingInput(1), 1, persona)  # first-request imports
    started = time.monotonic()
    status, content = _wsgi_post(world, path, content_type, body, body.size, persona)
    assert time.monotonic() - started < 1.0
    assert status.startswith("413"), (status, content[:300])
    assert "larger than the limit" in json.loads(content)["detail"]
    assert body.read_bytes < 64 * 1024  # the headers' worth of buffering, not the body


@pytest.mark.django_db(transaction=True)
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_longer_than_it_declares_is_read_only_up_to_the_limit(world: World) -> None:
    # Content-Length says 900 (under the limit); WSGI servers cap the stream at the declared length.
    body = CountingInput(10 * 2**20)
    status, content = _wsgi_post(world, "/api/v1/jobs/manifest/", "application/yaml", body, 900)
    assert status.startswith("400") and body.read_bytes <= 64 * 1024


@pytest.mark.parametrize(
    ("url", "persona", "text"),
    [
        ("/api/v1/jobs/manifest/", "member", "a: " + "[" * 5000 + "]" * 5000),
        ("/api/v1/jobs/manifest/", "member", "a:\n" + "".join("  " * i + "- \n" for i in range(1, 400))),
        ("/api/v1/queues/import/", "admin", "{" * 5000 + "}" * 5000),
    ],
)
def test_deep_yaml_is_a_400_with_a_message(world: World, url: str, persona: str, text: str) -> None:
    response = world.client(persona).post(url, text, content_type="application/yaml")
    assert response.status_code == 400, response.content[:300]
    assert "nested more than 64 levels" in response.content.decode()


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/jobs/fit-check/", "/api/v1/jobs/manifest/"])
def test_deep_json_is_a_400_with_a_message(world: World, url: str) -> None:
    body = '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = world.client("member").post(url, body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert "nested" in response.json()["detail"] or "nested" in json.dumps(response.json())


def test_unknown_api_paths_are_json_404s(world: World) -> None:
    for path in ("/api/v1/nope/", "/api/v1/jobs/not-a-uid/", "/api/v2/jobs/"):
        response = world.client("member").get(path)
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
        assert "detail" in response.json()
    page = world.client("member").get("/no-such-page/")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_queue_import_errors_do_not_echo_huge_values(world: World) -> None:
    text = "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata:\n  name: " + "q" * 200_000 + "\n"
    response = world.client("admin").post("/api/v1/queues/import/", text, content_type="application/yaml")
    assert response.status_code == 400 and len(response.content) < 3_000
    assert not Queue.objects.filter(name__startswith="qqq").exists()
