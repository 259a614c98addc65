"""docker-compose.yml stays runnable on one host: every service's command names something the
project has, and every variable it sets is one the settings read (no Docker engine needed)."""

from __future__ import annotations

import ast
import importlib
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from celery.app.utils import find_app
from celery.bin.celery import celery as celery_cli
from django.conf import settings
from django.core.management import get_commands

from kai_portal.monitoring.middleware import ENDPOINTS

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
# Services built from this repository (the others run upstream images with their own commands).
PORTAL = sorted(name for name, s in SERVICES.items() if "build" in s)
ENV_READERS = {"env_str", "env_bool", "env_int", "env_list", "env_secret", "_env_float_or_none"}


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` / ``${VAR:?error}`` with nothing set: the defaults."""

    def one(match: re.Match[str]) -> str:
        body = match.group(1)
        if ":-" in body:
            return body.split(":-", 1)[1]
        if ":?" in body:
            return "set-in-env-file"
        return ""

    return re.sub(r"\$\{([^}]*)\}", one, value)


def dockerfile_cmd() -> list[str]:
    lines = [line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD ")]
    return json.loads(lines[-1][4:])


def command_of(name: str) -> list[str]:
    return SERVICES[name].get("command") or dockerfile_cmd()


def settings_env_names() -> set[str]:
    """Every variable ``kai_portal/settings.py`` reads through the env helpers (secrets: also NAME_FILE)."""
    tree = ast.parse((ROOT / "kai_portal" / "settings.py").read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ENV_READERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            names.add(node.args[0].value)
            if node.func.id == "env_secret":
                names.add(f"{node.args[0].value}_FILE")
    return names


def test_the_compose_file_has_the_production_shape():
    assert set(PORTAL) == {"migrate", "web", "worker", "beat"}
    assert {"postgres", "redis"} <= set(SERVICES)
    for name, service in SERVICES.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in SERVICES, f"{name} depends on unknown service {dependency}"


@pytest.mark.parametrize("name", PORTAL)
def test_every_portal_command_exists_in_the_project(name: str):
    argv = command_of(name)
    executable = argv[0]
    assert shutil.which(executable, path=str(BIN)), f"{name}: {executable} is not installed with the project"
    if executable == "python":
        assert argv[1] == "manage.py" and (ROOT / "manage.py").is_file()
        assert argv[2] in get_commands(), f"{name}: no management command {argv[2]!r}"
    elif executable == "celery":
        app = find_app(argv[argv.index("-A") + 1])  # what `celery -A` itself does
        assert app.main == "kai_portal"
        subcommand = argv[argv.index("-A") + 2]
        assert subcommand in celery_cli.commands, f"{name}: celery has no {subcommand!r} command"
        command = celery_cli.commands[subcommand]
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        for flag in (arg for arg in argv if arg.startswith("--")):
            assert flag in options, f"{name}: celery {subcommand} has no option {flag}"
    elif executable == "gunicorn":
        module, attribute = argv[1].split(":")
        assert callable(getattr(importlib.import_module(module), attribute))
    else:
        pytest.fail(f"{name}: unexpected executable {executable!r}")


def test_the_worker_consumes_every_queue_a_task_is_sent_to():
    argv = command_of("worker")
    consumed = set(argv[argv.index("--queues") + 1].split(","))
    sent = {settings.CELERY_TASK_DEFAULT_QUEUE}
    sent |= {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()}
    sent |= {entry["options"]["queue"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert sent <= consumed, f"tasks sent to {sorted(sent - consumed)} would never run"
    app = find_app("kai_portal")
    app.loader.import_default_modules()
    for entry in settings.CELERY_BEAT_SCHEDULE.values():
        assert entry["task"] in app.tasks, f"beat sends {entry['task']} but no such task is registered"


def test_every_variable_the_portal_services_set_is_read_by_the_settings():
    read = settings_env_names()
    assert {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "CYCLE_SECONDS", "METRICS_TOKEN"} <= read
    for name in PORTAL:
        unknown = set(SERVICES[name].get("environment", {})) - read
        assert not unknown, f"{name} sets {sorted(unknown)}, which settings.py never reads"


def test_service_urls_point_at_the_compose_services_with_matching_credentials():
    env = {k: interpolate(str(v)) for k, v in SERVICES["web"]["environment"].items()}
    db = urlsplit(env["DATABASE_URL"])
    postgres = {k: interpolate(str(v)) for k, v in SERVICES["postgres"]["environment"].items()}
    assert db.hostname in SERVICES and db.port == 5432
    assert (db.username, db.password, db.path.lstrip("/")) == (
        postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], postgres["POSTGRES_DB"],
    )  # fmt: skip
    assert urlsplit(env["REDIS_URL"]).hostname in SERVICES


def test_the_web_healthcheck_calls_the_readiness_endpoint():
    check = " ".join(SERVICES["web"]["healthcheck"]["test"])
    path = urlsplit(re.search(r"http://[^'\"]+", check).group(0)).path  # type: ignore[union-attr]
    assert path == "/readyz" and path in ENDPOINTS


def test_the_worker_healthcheck_is_a_management_command():
    argv = SERVICES["worker"]["healthcheck"]["test"]
    assert argv[:3] == ["CMD", "python", "manage.py"] and argv[3] in get_commands()


def test_there_is_no_default_database_password():
    """docker compose up without POSTGRES_PASSWORD in .env fails with the message, instead of
    starting PostgreSQL with a password everyone who read this file knows (issue 26)."""
    text = (ROOT / "docker-compose.yml").read_text()
    uses = re.findall(r"\$\{POSTGRES_PASSWORD([^}]*)\}", text)
    assert len(uses) == 2  # the postgres service and the portal's DATABASE_URL
    for use in uses:
        assert use.startswith(":?") and "set POSTGRES_PASSWORD in .env" in use, use
    assert "POSTGRES_PASSWORD=\n" in (ROOT / ".env.example").read_text()
