"""The victim search shared by consolidation, reclaim and preempt, split as KAI splits its
solvers (``pkg/scheduler/actions/common/solvers/``). Start at :mod:`.loop`."""
