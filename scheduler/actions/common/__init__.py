"""Pieces the actions share that are not the victim search: the queue arithmetic of the eviction
rules, the victim job lists, the free-GPU count and the preemption delay (KAI's
``pkg/scheduler/actions/common/``)."""
