"""Queues belong to a node pool (KAI scheduling shard).

Existing queues go to the pool their jobs ran in when all of a department's jobs used one
pool, else to the default pool; child queues follow their department. Each job's pool becomes
its queue's pool (a job runs in its queue's shard)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import django.db.models.deletion
from django.db import migrations, models


def assign_pools(apps: Any, schema_editor: Any) -> None:
    NodePool = apps.get_model("cluster", "NodePool")
    Queue = apps.get_model("queues", "Queue")
    Job = apps.get_model("workloads", "Job")
    queues = {q.pk: q for q in Queue.objects.all()}
    if not queues:
        return
    default, _ = NodePool.objects.get_or_create(name="default")

    def department(queue: Any) -> Any:
        seen = set()
        while queue.parent_id in queues and queue.pk not in seen:
            seen.add(queue.pk)
            queue = queues[queue.parent_id]
        return queue

    used: dict[int, Counter[int]] = {}
    for queue_id, pool_id in Job.objects.exclude(node_pool_id=None).values_list("queue_id", "node_pool_id"):
        used.setdefault(department(queues[queue_id]).pk, Counter())[pool_id] += 1
    for queue in queues.values():
        pools = used.get(department(queue).pk)
        queue.node_pool_id = next(iter(pools)) if pools and len(pools) == 1 else default.pk
        queue.save(update_fields=["node_pool"])
    for queue in queues.values():
        Job.objects.filter(queue_id=queue.pk).update(node_pool_id=queue.node_pool_id)


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0001_initial"),
        ("queues", "0001_initial"),
        ("workloads", "0003_job_job_created_desc"),
    ]

    operations = [
        migrations.AddField(
            model_name="queue",
            name="node_pool",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="queues",
                to="cluster.nodepool",
            ),
        ),
        migrations.RunPython(assign_pools, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="queue",
            name="node_pool",
            field=models.ForeignKey(
                blank=True,
                help_text="The node pool whose nodes this queue's quota applies to (a KAI scheduling "
                "shard); its jobs run there. Empty: the parent's pool, or the default pool for a "
                "department.",
                on_delete=django.db.models.deletion.PROTECT,
                related_name="queues",
                to="cluster.nodepool",
            ),
        ),
    ]
