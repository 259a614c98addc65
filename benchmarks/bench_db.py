"""The PostgreSQL database a benchmark measures (``TEST_DATABASE_URL``): one it created itself.

The benchmarks that call this empty every table of that database before they seed it. A
database they did not create (a developer's, a test run's, production's, named by a
``TEST_DATABASE_URL`` left set in a shell) is refused before anything is touched: the benchmark
creates its database when it does not exist and marks it as its own (a comment on the
database), and later runs accept only a database carrying that mark.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kai_portal.nodes.models import GpuDevice, NodePool
    from kai_portal.workloads.models import Job

BENCH_MARK = "kai-portal benchmark database: emptied and reseeded by benchmarks/"


def ensure_postgres_database(script: str, fresh: bool = False) -> None:
    """Create ``TEST_DATABASE_URL``'s database (marked as the benchmarks') if it does not exist
    (``fresh``: also when it is the benchmarks' own, dropped first); refuse one that exists without
    the mark, and any other engine (SystemExit, saying why)."""
    import dj_database_url
    import psycopg
    from psycopg import sql

    cfg = dj_database_url.parse(os.environ["TEST_DATABASE_URL"])
    if cfg["ENGINE"] != "django.db.backends.postgresql":
        raise SystemExit(f"{script} measures PostgreSQL: set TEST_DATABASE_URL to a postgres:// URL")
    name = str(cfg["NAME"])
    admin = psycopg.connect(
        host=cfg["HOST"], port=cfg["PORT"] or 5432, user=cfg["USER"], password=cfg["PASSWORD"] or None,
        dbname="postgres", autocommit=True,
    )  # fmt: skip
    try:
        found = admin.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", [name]
        ).fetchone()
        if found is not None and found[0] == BENCH_MARK and fresh:  # its own: dropped for a fresh schema
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            found = None
        if found is None:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            admin.execute(
                sql.SQL("COMMENT ON DATABASE {} IS {}").format(sql.Identifier(name), sql.Literal(BENCH_MARK))
            )
        elif found[0] != BENCH_MARK:
            raise SystemExit(
                f"{script} empties every table of the database it measures, and TEST_DATABASE_URL names "
                f"{name!r}, which a benchmark did not create: refused, nothing was touched. Set "
                "TEST_DATABASE_URL to a database that does not exist yet (the benchmark creates it and "
                "marks it as its own), e.g. postgres://postgres@127.0.0.1:5432/kai_bench_kwok, or drop "
                f"{name!r} yourself if it is a benchmark's from before the mark."
            )
    finally:
        admin.close()


def empty_tables() -> None:
    """Empty every table of the app (not the migration history) before a benchmark reseeds it;
    only ever on the database ``ensure_postgres_database`` accepted."""
    from django.db import connection

    with connection.cursor() as cur:
        tables = [t for t in connection.introspection.table_names() if t != "django_migrations"]
        cur.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " RESTART IDENTITY CASCADE")


def make_nodes(pool: NodePool, prefix: str, count: int, gpus_per_node: int, model: str) -> list[GpuDevice]:
    """``count`` nodes of ``pool`` named ``<prefix>node-NNNNN`` with ``gpus_per_node`` 80 GiB GPUs each;
    returns the GPUs, node by node."""
    from kai_portal.nodes.models import GpuDevice, Node

    nodes = Node.objects.bulk_create(
        (
            Node(name=f"{prefix}node-{i:05d}", pool=pool, cpu_millicores=128_000, memory_mib=1_048_576)
            for i in range(count)
        ),
        batch_size=2000,
    )
    return GpuDevice.objects.bulk_create(
        (
            GpuDevice(node=n, index=g, model=model, memory_mib=81_920)
            for n in nodes
            for g in range(gpus_per_node)
        ),
        batch_size=5000,
    )


def make_pods(
    jobs: Iterable[Job], pods_per_job: int, devices: Iterator[GpuDevice], started: datetime
) -> None:
    """``pods_per_job`` one-GPU pods for each job: a running job's pods take the next GPUs of
    ``devices`` (started at ``started``), a pending job's are unplaced."""
    from kai_portal.workloads.models import Pod

    pods, held = [], []
    for job in jobs:
        for k in range(pods_per_job):
            device = next(devices) if job.state == "running" else None
            pods.append(
                Pod(
                    job=job,
                    index=k,
                    name=f"{job.name}-{k}",
                    reason="",
                    state="running" if device else "pending",
                    node=device.node if device else None,
                    started_at=started if device else None,
                )
            )
            held.append(device)
    Pod.objects.bulk_create(pods, batch_size=5000)
    through = Pod.gpu_devices.through
    through.objects.bulk_create(
        (through(pod_id=pod.pk, gpudevice_id=d.pk) for pod, d in zip(pods, held, strict=True) if d),
        batch_size=5000,
    )
