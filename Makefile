# Two commands matter: `make run` (portal + live simulated cluster + demo data)
# and `make test` (lint, types, every test against real PostgreSQL and Redis).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

# Tests run against real services; override to point elsewhere.
export TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/kai_portal
export TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# `make run`'s configuration (an SQLite file, DEBUG on): the browser journeys, the page,
# forecast and scheduling-loop tests run on it too.
TEST_SQLITE_URL ?= sqlite:///$(CURDIR)/var/test-sqlite.sqlite3
SQLITE_TESTS := tests/browser tests/portal/pages tests/portal/forecast tests/portal/scheduling

.PHONY: install run test lint typecheck pytest services bench scenarios clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON) on PATH"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

typecheck: install
	$(VENV)/bin/mypy scheduler kai_portal

scenarios: install
	$(PY) -m scheduler.scenario check ../shared/scenarios tests/scenarios

pytest: install
	$(PY) -m pytest
	mkdir -p var && TEST_DATABASE_URL=$(TEST_SQLITE_URL) $(PY) -m pytest -o django_debug_mode=true $(SQLITE_TESTS)

test: lint typecheck pytest

# The portal with demo data and a live simulated cluster (an in-process scheduling loop);
# DEBUG=1 so no secret key is needed and static files are served.
run: install
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py seed_demo
	DEBUG=1 $(PY) manage.py run_scheduler & trap 'kill $$!' EXIT; \
	DEBUG=1 $(PY) manage.py runserver 127.0.0.1:8000

bench: install
	$(PY) -m scheduler.bench

clean:
	rm -rf $(VENV) staticfiles var
