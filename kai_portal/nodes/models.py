from __future__ import annotations

from django.core.validators import MinValueValidator
from django.db import models

from kai_portal.core.fields import WholeNumberField
from kai_portal.core.validation import ValidatedModel

# The pool of nodes and queues that carry no ``kai.scheduler/node-pool`` label (KAI's default shard).
DEFAULT_POOL_NAME = "default"


class NodePool(ValidatedModel):
    """A partition of the cluster (KAI scheduling shard, label ``kai.scheduler/node-pool``).

    Each pool is scheduled on its own: its nodes, the queues that belong to it and their jobs.
    Quotas, fair shares, reclaim and preemption never cross pools.
    """

    name = models.SlugField(max_length=63, unique=True)
    description = models.TextField(blank=True)
    gpu_sharing = models.BooleanField(
        default=True, help_text="Fractional and GPU-memory requests may be placed on this pool's GPUs."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def default_pool(cls) -> NodePool:
        """The default pool (created on first use): where unlabelled nodes and queues belong."""
        pool, _ = cls.objects.get_or_create(name=DEFAULT_POOL_NAME)
        return pool


class Node(ValidatedModel):
    """A machine in the cluster with its allocatable CPU and memory."""

    name = models.CharField(max_length=253, unique=True)
    pool = models.ForeignKey(NodePool, on_delete=models.PROTECT, related_name="nodes")
    cpu_millicores = WholeNumberField(help_text="Allocatable CPU in millicores (1000 = one core).")
    memory_mib = WholeNumberField(help_text="Allocatable memory in MiB.")
    schedulable = models.BooleanField(default=True, help_text="Off when the node is cordoned.")
    ready = models.BooleanField(default=True)
    labels = models.JSONField(default=dict, blank=True)
    max_pods = WholeNumberField(default=110, help_text="Allocatable pods (the kubelet's maxPods).")
    taints = models.JSONField(
        default=list, blank=True, help_text="Kubernetes taints: a list of {key, value, effect}."
    )
    # What pods this scheduler does not manage hold on the node (another scheduler's pods,
    # DaemonSets, static pods): written by the cluster sync, charged to the node by the engine.
    external_gpus = WholeNumberField(default=0, help_text="Whole GPUs held by other schedulers' pods.")
    external_cpu_millicores = WholeNumberField(default=0)
    external_memory_mib = WholeNumberField(default=0)
    external_pods = WholeNumberField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["pool__name", "name"]
        indexes = [models.Index(fields=["pool", "schedulable"], name="node_pool_schedulable")]

    def __str__(self) -> str:
        return self.name


class GpuDevice(ValidatedModel):
    """One physical GPU of a node (a whole device, shareable by fractional pods)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="gpus")
    index = WholeNumberField(help_text="Device index on the node, 0-based.")
    model = models.CharField(max_length=100, help_text="e.g. NVIDIA A100-SXM4-80GB")
    memory_mib = WholeNumberField(
        validators=[MinValueValidator(1, "GPU memory must be at least 1 MiB (got %(show_value)s).")]
    )

    class Meta:
        ordering = ["node__name", "index"]
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="gpu_device_unique_index")]

    def __str__(self) -> str:
        return f"{self.node.name}/gpu{self.index}"


class PoolUsageSample(models.Model):
    """One node pool's GPUs after one scheduling cycle: the history behind the per-pool chart.

    Written by the scheduling loop (``scheduling/pool_usage.py``); pruned with the usage
    samples (``USAGE_RETENTION_DAYS``).
    """

    pool = models.ForeignKey(NodePool, on_delete=models.CASCADE, related_name="usage_samples")
    sampled_at = models.DateTimeField()
    gpus_total = models.DecimalField(max_digits=12, decimal_places=2, help_text="GPUs of schedulable nodes.")
    gpus_allocated = models.DecimalField(max_digits=12, decimal_places=2)
    gpus_requested = models.DecimalField(max_digits=12, decimal_places=2)

    class Meta:
        ordering = ["pool", "sampled_at"]
        indexes = [models.Index(fields=["pool", "sampled_at"], name="pool_usage_pool_time")]

    def __str__(self) -> str:
        return f"{self.pool.name} @ {self.sampled_at:%Y-%m-%d %H:%M:%S}"
