from __future__ import annotations

from rest_framework import serializers

from kai_portal.nodes.models import GpuDevice, Node, NodePool


class NodePoolSerializer(serializers.ModelSerializer):
    node_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = NodePool
        fields = ["name", "description", "gpu_sharing", "node_count"]


class NodeGpuSerializer(serializers.ModelSerializer):
    class Meta:
        model = GpuDevice
        fields = ["id", "index", "model", "memory_mib"]


class NodeSerializer(serializers.ModelSerializer):
    pool: serializers.SlugRelatedField[NodePool] = serializers.SlugRelatedField(
        slug_field="name", read_only=True
    )
    gpus = NodeGpuSerializer(many=True, read_only=True)

    class Meta:
        model = Node
        fields = [
            "name", "pool", "cpu_millicores", "memory_mib", "schedulable", "ready", "labels", "gpus",
            "created_at", "updated_at",
        ]  # fmt: skip


class GpuDeviceSerializer(serializers.ModelSerializer):
    node: serializers.SlugRelatedField[Node] = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pool = serializers.CharField(source="node.pool.name", read_only=True)

    class Meta:
        model = GpuDevice
        fields = ["id", "node", "pool", "index", "model", "memory_mib"]
