# Two commands matter: `make run` (portal + live simulated cluster + demo data)
# and `make test` (lint, types, every test against real PostgreSQL and Redis).
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

# Tests run against real services; override to point elsewhere.
HELM_VERSION ?= v3.19.0
# Exported: the chart test runs this helm.
export HELM := $(abspath $(VENV))/bin/helm-$(HELM_VERSION)

export TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/kai_portal
export TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
# `make run`'s configuration (an SQLite file, DEBUG on): the browser journeys, the page,
# forecast and scheduling-loop tests run on it too.
TEST_SQLITE_URL ?= sqlite:///$(CURDIR)/var/test-sqlite.sqlite3
# The page tests under tests/portal/web/ only: the API's (web/api/, web/<area>/api/) run on PostgreSQL.
SQLITE_TESTS := tests/browser tests/portal/web '--ignore-glob=tests/portal/web/*api' tests/portal/previews tests/portal/reports tests/portal/history tests/portal/scheduling

.PHONY: install run test lint typecheck pytest prodcheck services bench bench-kwok bench-latency bench-openb scenarios clean helm k8s-build k8s-up k8s-down kai-up kai-down

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

# tests/cluster/ starts its own control plane (var/k8s-test) from the binaries
# k8s-build leaves in ~/.cache/kai-portal (built once, ~30 min on 2 cores).
pytest: install k8s-build $(HELM)
	$(PY) -m pytest
	mkdir -p var && TEST_DATABASE_URL=$(TEST_SQLITE_URL) $(PY) -m pytest -o django_debug_mode=true $(SQLITE_TESTS)

# PostgreSQL, Redis and Chromium on this machine: installed from Debian's packages when missing
# (as root), then started on loopback. Skipped when TEST_SERVICES=external (services elsewhere).
services:
	@if [ "$${TEST_SERVICES:-}" != external ]; then bash .ci/services; fi

# The production start (collectstatic and check --deploy with DEBUG off; gunicorn, Celery worker
# and beat on PostgreSQL and Redis) used through the API: .ci/production-check.
prodcheck: install services
	bash .ci/production-check

test: lint typecheck services prodcheck pytest

# The portal with demo data and a live simulated cluster (an in-process scheduling loop);
# DEBUG=1 so no secret key is needed and static files are served. `make run RUN_PORT=8001`
# when 8000 is taken.
RUN_PORT ?= 8000
run: install
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py seed_demo
	DEBUG=1 $(PY) manage.py run_scheduler & SCHED=$$!; \
	DEBUG=1 $(PY) -m celery -A kai_portal --quiet worker --queues default --pool solo --loglevel WARNING & WORKER=$$!; \
	trap 'kill $$SCHED $$WORKER' EXIT; \
	DEBUG=1 $(PY) manage.py runserver 127.0.0.1:$(RUN_PORT)

helm: $(HELM)

# helm for the chart's render test (tests/deploy/test_helm_chart.py), built from its Go module
# once per version (the Go build cache makes a rebuild after `make clean` quick).
$(HELM): $(STAMP)
	GOFLAGS=-mod=mod GOBIN=$(abspath $(VENV))/bin go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(VENV)/bin/helm $@

# A real control plane on loopback for tests and for watching the portal schedule it:
# etcd, kube-apiserver, kube-controller-manager and KWOK (fake GPU nodes), built
# from Go modules (deploy/k8s-testbed/). Admin kubeconfig: var/k8s/admin.kubeconfig.
k8s-build:
	deploy/k8s-testbed/build.sh >/dev/null

k8s-up:
	deploy/k8s-testbed/k8s-up.sh

k8s-down:
	deploy/k8s-testbed/k8s-down.sh

# KAI Scheduler's own scheduler, binder, podgrouper, queue and podgroup controllers, built from a
# KAI checkout (not on the Go module proxy) and run out of cluster on the k8s-up cluster, to compare
# with the portal (deploy/kai-testbed/, docs/kai-parity.md). Never at the same time as the portal's loop.
KAI_SRC ?=
kai-up:
	deploy/kai-testbed/kai-up.sh "$(KAI_SRC)"

kai-down:
	deploy/kai-testbed/kai-down.sh

bench: install
	$(PY) -m scheduler.bench

# End-to-end throughput on a real API server: 1,000 KWOK nodes x 8 GPUs, 10,000 pods (starts and stops
# its own control plane in var/k8s-bench; empties the database named by TEST_DATABASE_URL).
bench-kwok: install
	nice -n 5 $(PY) benchmarks/kwok_throughput.py --nodes 1000 --pods 10000

# Create -> bound latency on an idle 40-node KWOK cluster, and a 300-pod burst: the old loop and the
# event-driven one side by side (starts its own control plane in var/k8s-latency and its own database,
# dropped after). `--external` measures whatever else schedules the pods (KAI's own binaries, say).
bench-latency: install
	nice -n 5 $(PY) benchmarks/kwok_latency.py --nodes 40 --samples 20 --burst 300 --loop poll --loop event

# Placement quality on the Alibaba GPU-sharing trace beside the FGD paper's table (engine only;
# about 20 min with 2 jobs; OPENB_ARGS="--seeds 42 --traces default" for a quick look).
OPENB_ARGS ?= --seeds 42-51 --spread-seeds 42-43 --jobs 2
bench-openb: install
	nice -n 5 $(PY) -m scheduler.bench.openb $(OPENB_ARGS) --timing --out benchmarks/openb.md

clean:
	-deploy/kai-testbed/kai-down.sh
	-deploy/k8s-testbed/k8s-down.sh
	-K8S_DIR=var/k8s-test deploy/k8s-testbed/k8s-down.sh
	rm -rf $(VENV) staticfiles var
