"""KAI Portal settings: one module, every deploy-time value from the environment.

Defaults are safe for a first run on a laptop (SQLite under ``var/``, the
simulated cluster, DEBUG off). Production turns on every HTTPS/cookie
protection that ``manage.py check --deploy`` asks for whenever DEBUG is off.

Environment variables (all optional unless noted):

``SECRET_KEY`` / ``SECRET_KEY_FILE`` (also ``DJANGO_SECRET_KEY``)
    Required when DEBUG is off. With DEBUG on and no key set, a random key is
    generated once into ``var/dev_secret_key`` (gitignored), never a shared
    hard-coded one.
``DEBUG`` (default off), ``ALLOWED_HOSTS`` (default ``localhost,127.0.0.1``),
``CSRF_TRUSTED_ORIGINS`` (comma-separated, default none)
``DATABASE_URL`` (default ``sqlite:///<repo>/var/db.sqlite3``; PostgreSQL via
    ``postgres://user:pass@host:5432/name``), ``DB_CONN_MAX_AGE`` (60 s),
    ``DB_CONNECT_TIMEOUT`` (PostgreSQL, 5 s)
``REDIS_URL`` (default ``redis://127.0.0.1:6379/0``: cache, Celery broker,
    cycle lock), ``CELERY_BROKER_URL`` (defaults to REDIS_URL)
``CLUSTER_BACKEND`` (``simulated`` | ``kubernetes``, default simulated),
``SCHEDULER_NAME`` (default ``kai-scheduler``), ``CYCLE_SECONDS`` (default 5),
``QUEUE_LABEL_KEY`` (default ``kai.scheduler/queue``; KAI's ``--queue-label-key`` /
    ``global.queueLabelKey``): the one pod and owner label naming a pod's queue in kubernetes
    mode (``runai/queue`` for workloads labelled before KAI v0.6); a pod without it goes to
    ``default-queue``, as KAI's podgrouper puts it,
``CYCLE_DEBOUNCE_MS`` (100) and ``CYCLE_DEBOUNCE_MAX_MS`` (1000): the scheduler process's wait after
    a change before its cycle (kubernetes mode, ``manage.py run_scheduler``), ``SCHEDULING_LOOP``
    (``celery``: beat sends a cycle every CYCLE_SECONDS; ``process``: ``manage.py run_scheduler`` runs
    them and beat sends none), ``SCHEDULING_SHARDS`` (off; on: one cycle per node pool, each under
    its own lock, in parallel on as many scheduling workers as run; docs/decisions/shards.md),
``JOB_NAMESPACE_MODE`` (``team`` | ``queue`` | ``fixed``, default team), ``JOB_NAMESPACE``
    (for fixed, default ``default``), ``JOB_NAMESPACE_PREFIX`` (none), ``JOB_NAMESPACE_CREATE``
    (off): where portal jobs' pods go in kubernetes mode,
``LEADER_ELECTION`` (default on; kubernetes mode binds only while holding a Lease),
    ``LEADER_ELECTION_NAMESPACE`` (kai-portal), ``LEADER_ELECTION_LEASE_NAME``,
    ``LEADER_ELECTION_IDENTITY``, ``LEADER_ELECTION_{LEASE_DURATION,RENEW_DEADLINE,RETRY_PERIOD}_SECONDS``
    (15, 10, 2)
``FORECAST_BUDGET_SECONDS`` (default 2: wall time per cycle for estimated starts),
``FORECAST_AFTER_CYCLE`` (default on), ``REASON_RETENTION_DAYS`` (default 14),
``USAGE_RETENTION_DAYS`` (default 90)
``MAX_PENDING_TASKS_PER_MEMBER`` (20,000: per member within one team), ``MAX_PENDING_TASKS_PER_TEAM``
    (50,000), ``MAX_PENDING_TASKS_PER_QUEUE`` (50,000): default bounds of pending tasks (admins
    override them per team and queue); ``CYCLE_QUEUE_DEPTH`` (200) and ``CYCLE_QUEUE_TASKS``
    (10,000): pending jobs and listed tasks of a queue a cycle always considers, before looking at
    whether the jobs ahead leave room
``SECURE_SSL_REDIRECT``, ``SECURE_HSTS_SECONDS``, ``SECURE_HSTS_PRELOAD`` (off: opt in to the
    browsers' preload list), ``TRUST_X_FORWARDED_PROTO``
    (set it when a TLS-terminating proxy in front sets X-Forwarded-Proto),
``LOG_LEVEL`` (default INFO), ``STATIC_ROOT`` (default ``<repo>/staticfiles``)
``METRICS_TOKEN`` / ``METRICS_TOKEN_FILE`` (default none; set, ``/metrics`` needs
    ``Authorization: Bearer <token>``), ``METRICS_PUBLIC`` (default: DEBUG; without a token and
    without it, ``/metrics`` is a 403), ``API_SCHEMA_PUBLIC`` (default: DEBUG; off, the OpenAPI
    schema and API docs are for signed-in users)
``LOGIN_FAILURE_LIMIT`` (10), ``LOGIN_LOCKOUT_MINUTES`` (15), ``TOKEN_FAILURE_RATE`` (30/min),
``MANIFEST_MAX_BYTES`` (256 KiB), ``MANIFEST_MAX_NODES`` (5,000), ``QUEUE_YAML_MAX_BYTES`` (1 MiB),
    ``QUEUE_YAML_MAX_NODES`` (40,000): the largest YAML a submission / a Queue import may be,
``WRITE_RATE`` (120/min): writes per user (API and submitting pages), 429 past it,
``NUM_PROXIES`` (0; trusted proxies in front that append to X-Forwarded-For: 1 behind an
    ingress, or every client is the ingress's address to the throttles and the sign-in lockout)
``PROMETHEUS_URL`` (none: GPU use is off and pages say nothing of it): a Prometheus that scrapes
    NVIDIA's DCGM exporter; the worker reads each running job's GPU utilisation and memory from it
    (``monitoring/gpu_use.py``), every ``GPU_USE_READ_SECONDS`` (60), averaged over
    ``GPU_USE_WINDOW_MINUTES`` (10), each query within ``GPU_USE_TIMEOUT_SECONDS`` (5) and
    ``GPU_USE_MAX_SERIES`` (20,000) series; a GPU under ``GPU_IDLE_THRESHOLD_PERCENT`` (5) mean
    utilisation is shown as allocated but idle
"""

from __future__ import annotations

import re
import secrets
from datetime import timedelta
from pathlib import Path

import csp.constants as csp
import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from kai_portal.core.env import env_bool, env_int, env_list, env_secret, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    key = env_secret("SECRET_KEY") or env_secret("DJANGO_SECRET_KEY")
    if key:
        return key
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (or SECRET_KEY_FILE) for a deployment, "
            "or DEBUG=1 for local development: to run a command against the `make run` database, "
            "DEBUG=1 .venv/bin/python manage.py <command>."
        )
    # Development only: one random key per checkout, kept across restarts.
    path = VAR_DIR / "dev_secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "csp",
    "kai_portal.accounts",
    "kai_portal.teams",
    "kai_portal.queues",
    "kai_portal.nodes",
    "kai_portal.cluster",
    "kai_portal.workloads",
    "kai_portal.scheduling",
    "kai_portal.history",
    "kai_portal.previews",
    "kai_portal.planning",
    "kai_portal.audit",
    "kai_portal.monitoring",
    "kai_portal.demo",
]

MIDDLEWARE = [
    # First: /healthz, /readyz, /metrics answer probes by pod IP over plain HTTP (monitoring/middleware.py).
    "kai_portal.monitoring.middleware.ProbeMiddleware",
    # The GPU-sharing admission webhook, called by the API server by Service name (cluster/webhook.py).
    "kai_portal.cluster.webhook.WebhookMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "kai_portal.audit.middleware.AuditActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # A view's database fault is a 503 with Retry-After, not a 500 (core/outages.py).
    "kai_portal.core.outages.DatabaseOutageMiddleware",
    # Last, as django-axes asks: it turns a locked-out sign-in into its 429 response.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "kai_portal.urls"
WSGI_APPLICATION = "kai_portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "kai_portal.core.context_processors.portal_user",
            ],
        },
    },
]

# --- Database --------------------------------------------------------------
_DEFAULT_DB = f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", _DEFAULT_DB),
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
# SQLite (``make run``): the scheduling loop and the web server write from two processes.
# WAL lets pages read while a cycle writes; IMMEDIATE transactions take the write lock up
# front, so a writer waits (up to ``timeout`` seconds) instead of failing with "database is
# locked" when it upgrades a read transaction (Django 5.1+ options).
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["OPTIONS"] = {**SQLITE_OPTIONS, **DATABASES["default"].get("OPTIONS", {})}
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A blackholed or hung database must fail a connection (and /readyz) in seconds, not after the
    # driver's default of waiting for ever; a ``?connect_timeout=`` in DATABASE_URL still wins.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("DB_CONNECT_TIMEOUT", 5, minimum=1)
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "accounts.User"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Clients are told apart by address: REMOTE_ADDR, or with NUM_PROXIES trusted proxies in front
# (an ingress: 1) the address the outermost of them saw in X-Forwarded-For
# (core/client_address.py). Left at 0 behind an ingress, every client is the ingress.
NUM_PROXIES = env_int("NUM_PROXIES", 0, minimum=0)
# Sign-in brute force (django-axes): after LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one client address, the next attempt from that address, right password or not,
# is a 429 until LOGIN_LOCKOUT_MINUTES have passed since the last failure. The same username
# from another address is not locked: others' failures never lock a user out.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10, minimum=1)
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT + 1  # axes refuses the attempt that reaches its limit
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "kai_portal.core.client_address.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "accounts:login"

# --- What one request may cost ---------------------------------------------------
# YAML from users (core/safe_yaml.py) is parsed once by libyaml and counted as it is read: a
# manifest over MANIFEST_MAX_BYTES is a 413, one with more than MANIFEST_MAX_NODES values
# (aliases expanded) a 400, before anything is built. KAI's own example manifests have at most
# 87 values (1.3 KB); a Pod or Job with many containers and env entries has a few hundred. A
# Queue YAML import holds many queues (one exported queue is ~40 values).
MANIFEST_MAX_BYTES = env_int("MANIFEST_MAX_BYTES", 256 * 1024, minimum=1024)
MANIFEST_MAX_NODES = env_int("MANIFEST_MAX_NODES", 5_000, minimum=100)
QUEUE_YAML_MAX_BYTES = env_int("QUEUE_YAML_MAX_BYTES", 1024 * 1024, minimum=1024)
QUEUE_YAML_MAX_NODES = env_int("QUEUE_YAML_MAX_NODES", 40_000, minimum=100)
# Writes per signed-in user (POST/PUT/PATCH/DELETE on the API, and the pages that submit jobs
# or run a fit check): past it, 429 with Retry-After (core/write_throttle.py).
WRITE_RATE = env_str("WRITE_RATE", "120/min")

# --- Redis: cache, Celery broker, the scheduling-cycle lock ------------------
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CACHES = {
    "default": {
        # Redis down = cache misses, not errors (core/cache.py); connecting gives up fast.
        "BACKEND": "kai_portal.core.cache.DegradingRedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 2},
        "KEY_PREFIX": "kai",
    }
}

# --- Scheduling -------------------------------------------------------------
CLUSTER_BACKEND = env_str("CLUSTER_BACKEND", "simulated")
if CLUSTER_BACKEND not in {"simulated", "kubernetes"}:
    raise ImproperlyConfigured(f"CLUSTER_BACKEND={CLUSTER_BACKEND!r}: use 'simulated' or 'kubernetes'")
SCHEDULER_NAME = env_str("SCHEDULER_NAME", "kai-scheduler")
# KAI reads one queue label key (cmd/scheduler --queue-label-key, the podgrouper's too); its default.
QUEUE_LABEL_KEY = env_str("QUEUE_LABEL_KEY", "kai.scheduler/queue").strip()
_LABEL_KEY = r"([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
if not re.fullmatch(_LABEL_KEY, QUEUE_LABEL_KEY):
    raise ImproperlyConfigured(
        f"QUEUE_LABEL_KEY={QUEUE_LABEL_KEY!r} is not a label key: use a key such as "
        "'kai.scheduler/queue' (KAI's default) or 'runai/queue' (KAI before v0.6)"
    )
CYCLE_SECONDS = env_int("CYCLE_SECONDS", 5, minimum=1)
# The scheduler process in kubernetes mode (manage.py run_scheduler, scheduling/event_loop.py) starts
# a cycle when its watches report a change, once no other change came for CYCLE_DEBOUNCE_MS (so a
# burst lands in one cycle), and never later than CYCLE_DEBOUNCE_MAX_MS after the first change.
CYCLE_DEBOUNCE_MS = env_int("CYCLE_DEBOUNCE_MS", 100, minimum=0)
CYCLE_DEBOUNCE_MAX_MS = env_int("CYCLE_DEBOUNCE_MAX_MS", 1000, minimum=0)
# Who runs the cycles: "celery" (beat sends run_cycle every CYCLE_SECONDS to a worker) or "process"
# (a long-running `manage.py run_scheduler`; beat then sends none, so no worker's cycle holds the
# cycle lock while the scheduler process wants it). The Helm chart sets "process" in kubernetes mode.
SCHEDULING_LOOP = env_str("SCHEDULING_LOOP", "celery")
# Shards (issue 30, docs/decisions/shards.md): on, each node pool is scheduled by its own cycle under
# its own lock (beat fans one run_cycle(pool) out per pool; the scheduler process runs them side by
# side; in kubernetes mode each pool's scheduler also holds its own Lease, as KAI's SchedulingShard);
# off (the default), one cycle schedules every pool under one lock.
SCHEDULING_SHARDS = env_bool("SCHEDULING_SHARDS", False)
if SCHEDULING_LOOP not in {"celery", "process"}:
    raise ImproperlyConfigured(f"SCHEDULING_LOOP={SCHEDULING_LOOP!r}: use 'celery' or 'process'")
if SCHEDULING_SHARDS and CLUSTER_BACKEND == "kubernetes" and SCHEDULING_LOOP != "process":
    raise ImproperlyConfigured(
        "SCHEDULING_SHARDS=1 with CLUSTER_BACKEND=kubernetes needs SCHEDULING_LOOP=process: each node pool "
        "is scheduled by its own `manage.py run_scheduler --pool NAME` (the chart's scheduler.pools), which "
        "keeps that pool's watches and Lease; Celery workers would open watches for every pool in every "
        "worker process and would never schedule a pool the portal has no row of yet. Set "
        "SCHEDULING_LOOP=process, or unset SCHEDULING_SHARDS."
    )
# Kubernetes mode: only the holder of a coordination.k8s.io Lease binds (cluster/leader_election.py).
# The namespace is the worker's own (the chart sets it); the lease name defaults to
# kai-portal-<SCHEDULER_NAME>, the identity to the host name (the pod's name). As client-go:
# retry period < renew deadline < lease duration, so a holder that cannot renew stops first.
LEADER_ELECTION = env_bool("LEADER_ELECTION", True)
LEADER_ELECTION_NAMESPACE = env_str("LEADER_ELECTION_NAMESPACE", "kai-portal")
LEADER_ELECTION_LEASE_NAME = env_str("LEADER_ELECTION_LEASE_NAME", "")
LEADER_ELECTION_IDENTITY = env_str("LEADER_ELECTION_IDENTITY", "")
LEADER_ELECTION_LEASE_DURATION_SECONDS = env_int("LEADER_ELECTION_LEASE_DURATION_SECONDS", 15, minimum=3)
LEADER_ELECTION_RENEW_DEADLINE_SECONDS = env_int("LEADER_ELECTION_RENEW_DEADLINE_SECONDS", 10, minimum=2)
LEADER_ELECTION_RETRY_PERIOD_SECONDS = env_int("LEADER_ELECTION_RETRY_PERIOD_SECONDS", 2, minimum=1)
if not (LEADER_ELECTION_RETRY_PERIOD_SECONDS < LEADER_ELECTION_RENEW_DEADLINE_SECONDS
        < LEADER_ELECTION_LEASE_DURATION_SECONDS):  # fmt: skip
    raise ImproperlyConfigured(
        "LEADER_ELECTION_RETRY_PERIOD_SECONDS < LEADER_ELECTION_RENEW_DEADLINE_SECONDS < "
        "LEADER_ELECTION_LEASE_DURATION_SECONDS must hold: a holder that cannot renew must stop binding "
        "before another replica may take the lease"
    )
# GPU sharing in kubernetes mode (cluster/backends/kubernetes/gpu_sharing.py): where reservation pods run,
# their image (the portal's own; empty = kai-portal:latest), the runtime class that gives them
# NVML (KAI's default "nvidia"; empty = none) and how long a bind waits for one to report its GPU.
GPU_SHARING_NAMESPACE = env_str("GPU_SHARING_NAMESPACE", "kai-resource-reservation")
GPU_SHARING_RESERVATION_IMAGE = env_str("GPU_SHARING_RESERVATION_IMAGE", "kai-portal:latest")
GPU_SHARING_RUNTIME_CLASS = env_str("GPU_SHARING_RUNTIME_CLASS", "nvidia")
GPU_SHARING_ALLOCATION_TIMEOUT_SECONDS = env_int("GPU_SHARING_ALLOCATION_TIMEOUT_SECONDS", 60, minimum=1)
# Portal-submitted jobs in kubernetes mode (workloads/cluster_jobs.py) become pods in a namespace:
# JOB_NAMESPACE_MODE "team" (the queue's team's slug, the default), "queue" (the queue's name) or
# "fixed" (JOB_NAMESPACE for every job); JOB_NAMESPACE_PREFIX goes in front of a team or queue name
# (e.g. "runai-"). A missing namespace is refused with its name unless JOB_NAMESPACE_CREATE is on
# (which needs the optional RBAC rule deploy/rbac/kai-portal-namespaces.yaml).
JOB_NAMESPACE_MODE = env_str("JOB_NAMESPACE_MODE", "team")
if JOB_NAMESPACE_MODE not in {"team", "queue", "fixed"}:
    raise ImproperlyConfigured(f"JOB_NAMESPACE_MODE={JOB_NAMESPACE_MODE!r}: use 'team', 'queue' or 'fixed'")
JOB_NAMESPACE = env_str("JOB_NAMESPACE", "default")
JOB_NAMESPACE_PREFIX = env_str("JOB_NAMESPACE_PREFIX", "")
JOB_NAMESPACE_CREATE = env_bool("JOB_NAMESPACE_CREATE", False)
# Bounds on pending work (issue 26: one member's backlog must not halt scheduling for everyone).
# A submission that would take a member (within one team), a team or a queue past its bound of
# pending tasks is refused before anything is saved (workloads/pending_bounds.py); portal admins
# override the team and queue bounds (and the per-member bound of a team) on the team and queue.
MAX_PENDING_TASKS_PER_MEMBER = env_int("MAX_PENDING_TASKS_PER_MEMBER", 20_000, minimum=1)
MAX_PENDING_TASKS_PER_TEAM = env_int("MAX_PENDING_TASKS_PER_TEAM", 50_000, minimum=1)
MAX_PENDING_TASKS_PER_QUEUE = env_int("MAX_PENDING_TASKS_PER_QUEUE", 50_000, minimum=1)
# The cycle's cost in a large backlog (scheduling/backlog.py): past this many pending jobs (or
# listed pending tasks) of a queue in KAI's job order, a job is given to the engine only while what
# the jobs ahead of it need still leaves room in the pool (KAI's queueDepthPerAction, capacity-aware).
CYCLE_QUEUE_DEPTH = env_int("CYCLE_QUEUE_DEPTH", 200, minimum=1)
CYCLE_QUEUE_TASKS = env_int("CYCLE_QUEUE_TASKS", 10_000, minimum=1)
# Queue positions and estimated starts are computed by the scheduling worker after each
# cycle (never in a web request); the estimate's simulation gets this much wall time.
FORECAST_AFTER_CYCLE = env_bool("FORECAST_AFTER_CYCLE", True)
FORECAST_BUDGET_SECONDS = env_int("FORECAST_BUDGET_SECONDS", 2, minimum=0)
REASON_RETENTION_DAYS = env_int("REASON_RETENTION_DAYS", 14, minimum=1)
USAGE_RETENTION_DAYS = env_int("USAGE_RETENTION_DAYS", 90, minimum=1)

# --- GPU use from NVIDIA's DCGM exporter, through Prometheus (monitoring/gpu_use.py) ---
PROMETHEUS_URL = env_str("PROMETHEUS_URL", "").strip()
GPU_USE_READ_SECONDS = env_int("GPU_USE_READ_SECONDS", 60, minimum=10)
GPU_USE_WINDOW_MINUTES = env_int("GPU_USE_WINDOW_MINUTES", 10, minimum=1)
GPU_USE_TIMEOUT_SECONDS = env_int("GPU_USE_TIMEOUT_SECONDS", 5, minimum=1)
GPU_USE_MAX_SERIES = env_int("GPU_USE_MAX_SERIES", 20_000, minimum=1)
GPU_IDLE_THRESHOLD_PERCENT = env_int("GPU_IDLE_THRESHOLD_PERCENT", 5, minimum=0)

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BEAT_SCHEDULE = {
    # The task arrives with the scheduling loop (issue: scheduling cycle).
    "run-scheduling-cycle": {
        "task": "kai_portal.scheduling.tasks.run_cycle",
        "schedule": float(CYCLE_SECONDS),
        "options": {"queue": "scheduling", "expires": float(CYCLE_SECONDS)},
    },
    # Scheduling history past REASON_RETENTION_DAYS / USAGE_RETENTION_DAYS (history/retention.py).
    "prune-history": {
        "task": "kai_portal.scheduling.tasks.prune_history",
        "schedule": 24 * 3600.0,
        "options": {"queue": "default", "expires": 3600.0},
    },
}
if SCHEDULING_SHARDS:  # one cycle per pool, fanned out each tick (run_pool_cycles)
    CELERY_BEAT_SCHEDULE["run-scheduling-cycle"]["task"] = "kai_portal.scheduling.tasks.run_pool_cycles"
if SCHEDULING_LOOP == "process":  # manage.py run_scheduler runs the cycles
    del CELERY_BEAT_SCHEDULE["run-scheduling-cycle"]
if PROMETHEUS_URL:  # GPU use from DCGM through Prometheus, in the worker (never in a request)
    CELERY_BEAT_SCHEDULE["read-gpu-use"] = {
        "task": "kai_portal.monitoring.tasks.read_gpu_use",
        "schedule": float(GPU_USE_READ_SECONDS),
        "options": {"queue": "default", "expires": float(GPU_USE_READ_SECONDS)},
    }
# One task at a time per worker process (a cycle is long and a pool's next cycle must go to a free
# worker, not wait behind another pool's); the cycle task is idempotent (it plans from the rows and
# its lock and fencing token stop a repeat), so a task lost with its worker is simply sent again.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# --- REST API ---------------------------------------------------------------
# Token auth first: its WWW-Authenticate header makes unauthenticated requests 401, not 403.
# The largest request body Django and the API parsers accept (Django's own default, 2.5 MB,
# declared here because kai_portal/core/api.py applies it to every API parser too).
DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "kai_portal.accounts.tokens.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "kai_portal.accounts.tokens.TokenScopePermission",
    ],
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    # JSON with the body limit (DATA_UPLOAD_MAX_MEMORY_SIZE) and deep nesting as a 400.
    "DEFAULT_PARSER_CLASSES": ["kai_portal.core.api.BoundedJSONParser"],
    "DEFAULT_PAGINATION_CLASS": "kai_portal.core.api.StandardPagination",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "kai_portal.core.api.exception_handler",
    # Failed token authentications per client address and per token prefix (accounts/tokens.py:
    # FailedTokenThrottle); a valid token is never throttled by failures.
    "DEFAULT_THROTTLE_RATES": {"token_failure": env_str("TOKEN_FAILURE_RATE", "30/min")},
    # Writes per user (core/write_throttle.py, rate WRITE_RATE); reads are not throttled.
    "DEFAULT_THROTTLE_CLASSES": ["kai_portal.core.write_throttle.WriteRateThrottle"],
    # DRF's own client address (its throttles' get_ident): as ours; its default (None) would
    # trust a client's own X-Forwarded-For.
    "NUM_PROXIES": NUM_PROXIES,
    "COERCE_DECIMAL_TO_STRING": False,
    "DATETIME_FORMAT": "iso-8601",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "KAI Portal API",
    "DESCRIPTION": (
        "Teams, queues (quotas and computed fair shares), jobs and pods, nodes, scheduling decisions "
        "and the audit log. Authenticate with `Authorization: Bearer <token>` (tokens from your "
        "account page) or a browser session. Units: GPU devices, CPU millicores, memory MiB; "
        "-1 = unlimited. Errors are JSON: 400 with field messages, 401, 403 (visible but not yours "
        "to change), 404 (not visible), 409 (stale edit or a state that forbids the change)."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Everyone with API_SCHEMA_PUBLIC, else signed-in users (core/api_docs.py).
    "SERVE_PERMISSIONS": ["kai_portal.core.schema_access.SchemaAccess"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobStateEnum": "kai_portal.workloads.choices.JobState",
        "PodStateEnum": "kai_portal.workloads.choices.PodState",
        "CycleStatusEnum": "kai_portal.history.models.SchedulingCycle.Status",
    },
}

# --- Internationalisation ------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files (whitenoise) -------------------------------------------------
STATIC_URL = "static/"
# Where collectstatic writes; a deployment may put it on a volume.
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

# --- Security: everything check --deploy wants, on whenever DEBUG is off -------
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]  # plain-HTTP container health checks
# /metrics: with METRICS_TOKEN set, only for "Authorization: Bearer <token>"; without it, open
# only with METRICS_PUBLIC (default: DEBUG), else 403. The metrics name every queue and team and
# their usage: a production portal shows them to its scraper, not to anyone who asks.
METRICS_TOKEN = env_secret("METRICS_TOKEN")
METRICS_PUBLIC = env_bool("METRICS_PUBLIC", DEBUG)
# The OpenAPI schema and the API docs: everyone, or (default with DEBUG off) signed-in users only.
API_SCHEMA_PUBLIC = env_bool("API_SCHEMA_PUBLIC", DEBUG)
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
# Preload is a commitment beyond this site: once a browser vendor ships the domain in its
# preload list, every subdomain is HTTPS-only in every browser for months, whatever this
# header says later. So it is the operator's decision (opt-in), and check --deploy's reminder
# (security.W021) is silenced until it is made.
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"

# Content-Security-Policy (django-csp): scripts only from this site's own files: no inline
# scripts, handlers or eval (the templates' behaviour lives in static/js/; Swagger UI runs
# as SpectacularSwaggerSplitView, its init script a separate file). Inline styles stay
# allowed: the share bars and meters set widths in style attributes and ReDoc injects
# <style> elements; CSS cannot run code. Images may be data: URIs (Swagger UI's icons);
# ReDoc's search runs in a blob: worker.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp.SELF],
        "script-src": [csp.SELF],
        "style-src": [csp.SELF, csp.UNSAFE_INLINE],
        "img-src": [csp.SELF, "data:"],
        "font-src": [csp.SELF],
        "connect-src": [csp.SELF],
        "worker-src": [csp.SELF, "blob:"],
        "object-src": [csp.NONE],
        "base-uri": [csp.SELF],
        "form-action": [csp.SELF],
        "frame-ancestors": [csp.NONE],
    }
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"expected_refusal": {"()": "kai_portal.core.log_filters.ExpectedRefusalFilter"}},
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["expected_refusal"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # Django's own default config (DEBUG) gives "django" a console handler of its own as well as
    # the root's: every request warning was printed twice. One handler, the root's.
    "loggers": {"django": {"handlers": [], "level": env_str("LOG_LEVEL", "INFO"), "propagate": True}},
}


# --- Scheduling loop (issue 7) ------------------------------------------------
def _env_float_or_none(name: str) -> float | None:
    raw = env_str(name, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError as error:
        raise ImproperlyConfigured(f"{name}={raw!r}: expected a number") from error


# Time-based fair share (kai-semantics §2.5), off unless one of these is set:
# FAIRSHARE_USAGE_WINDOW_HOURS (sliding window, default 168 when on),
# FAIRSHARE_USAGE_HALF_LIFE_HOURS (decay; empty = no decay), FAIRSHARE_USAGE_K (default 1.0 when on).
FAIRSHARE_USAGE_WINDOW_HOURS = _env_float_or_none("FAIRSHARE_USAGE_WINDOW_HOURS")
FAIRSHARE_USAGE_HALF_LIFE_HOURS = _env_float_or_none("FAIRSHARE_USAGE_HALF_LIFE_HOURS")
FAIRSHARE_USAGE_K = _env_float_or_none("FAIRSHARE_USAGE_K")
# Seconds an evicted pod of the simulated cluster takes to release its node.
SIMULATED_EVICTION_GRACE_SECONDS = env_int("SIMULATED_EVICTION_GRACE_SECONDS", 5, minimum=0)
# The cycle lock expires this long after its holder's last renewal (renewed every third of it
# while a cycle runs), so a killed worker stalls scheduling for at most this long.
CYCLE_LOCK_TIMEOUT_SECONDS = env_int("CYCLE_LOCK_TIMEOUT_SECONDS", 10, minimum=3)
# Seconds the cycle sleeps between planning and saving: 0 (off) here; only the test settings
# (KAI_TEST_CYCLE_PAUSE_SECONDS) set it, so the fencing test can act inside that window.
CYCLE_TEST_PAUSE_SECONDS = 0
# Overrides for the fairness audit's thresholds (kai_portal/reports/fairness_audit.py DEFAULTS);
# a key left out keeps its default.
FAIRNESS_AUDIT: dict[str, float] = {}
CELERY_TASK_ROUTES = {
    "kai_portal.scheduling.tasks.run_cycle": {"queue": "scheduling"},
    "kai_portal.scheduling.tasks.run_pool_cycles": {"queue": "scheduling"},
}
