"""The queue tree: quotas, limits, over-quota weights, priorities."""
