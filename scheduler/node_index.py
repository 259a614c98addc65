"""The node index: the schedulable nodes of a session arranged so that the best node for a
whole-GPU, fractional or CPU-only task under binpack is found without checking every node
(docs/decisions/node-index.md); ``placement.best_fit`` asks it, and
tests/engine/test_node_search.py holds it to the reference scan."""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np

from scheduler import rules
from scheduler.fit import AMOUNT_EPS, Fit, Rules, node_fit
from scheduler.model import Job, Task
from scheduler.session import Session
from scheduler.state import EPS, NodeState


def _free_idle_room(ns: NodeState) -> tuple[int, int, float, bool]:
    """``ns.free_whole_gpus()``, ``ns.idle_whole_gpus()``, the most room left on a shared
    device with active tasks (0.0 without one) and ``ns.has_group``, in one pass."""
    free = idle = 0
    room = 0.0
    group = False
    for d in ns.devices:
        a = d.active
        if a <= EPS:  # is_free
            free += 1
            if d.releasing <= EPS:  # is_idle
                idle += 1
        elif not d.whole:
            left = d.memory - a
            # ``NodeState.has_group``: running tasks may over-fill a device whose memory label
            # was floored (KAI's 100 MiB rule); such a group takes nothing more, not even 0 MiB
            group = group or left >= -EPS
            if left > room:
                room = left
    return free, idle, room, group


class NodeIndex:
    """Schedulable nodes of a session, refreshed lazily from ``session.dirty_nodes``, arranged so
    that the best node of :func:`best_fit_reference` is found without checking every node.

    * ``buckets``: nodes by free whole GPUs (devices with no active task), each in name order.
      For a GPU task under binpack the node score is decreasing in the free count within each
      tier (shares a GPU group > fits now > later) and the tiers never overlap, so the best node
      is the first fitting one, in name order, of the lowest bucket holding one in the best tier.
    * ``group_buckets``: the same for nodes with a shared device that still has room (the only
      nodes where a fractional task can join a group).
    * NumPy columns of CPU, memory and pod slots (idle and idle + releasing) for CPU-only tasks:
      their fit is a vectorised filter, their score shares a GPU group > fits now > node without
      GPUs > least free CPU (binpack), then name."""

    __slots__ = (
        "session",
        "buckets",
        "where",
        "rank",
        "names",
        "group_buckets",
        "idle",
        "fit_memo",
        "any_taints",
        "group_where",
        "group_room",
        "cols",
        "has_devices",
        "hard_taints",
        "masks",
        "cpu_totals_ok",
        "shared",
        "now_buckets",
        "now_where",
    )

    def __init__(self, session: Session) -> None:
        self.session = session
        self.names: list[str] = []
        self.rank: dict[str, int] = {}
        self.where: dict[str, int] = {}
        self.buckets: dict[int, list[int]] = {}
        # Idle devices (nothing active, nothing releasing) per node rank: the fits-now pre-check.
        self.idle: list[int] = []
        # Whole-GPU fits per node rank and (GPUs, CPU, memory) asked, for jobs without placement
        # rules on untainted nodes (the fit then reads only the node's state and the shape);
        # dropped for a node when it changes (``refresh``).
        self.fit_memo: dict[int, dict[tuple[int, float, float], Fit]] = {}
        self.group_where: dict[str, int] = {}
        self.group_room: dict[str, float] = {}
        self.group_buckets: dict[int, list[int]] = {}
        self.masks: dict[object, np.ndarray] = {}
        # The fits-now pass's candidates: ranks of nodes with a free pod slot and an idle (or
        # pipelined-idle) GPU, per free-whole-GPU bucket, in name order (``_set_now``). After
        # the victim search's virtual evictions most nodes of a bucket have releasing room only,
        # and the pass would check each of them to skip it.
        self.now_buckets: dict[int, list[int]] = {}
        self.now_where: dict[int, int] = {}
        indexed = [ns for ns in session.nodes.values() if ns.schedulable]  # sorted by name
        n = len(indexed)
        # cpu idle, cpu idle+rel, mem idle, mem idle+rel, pods idle, pods idle+rel (one array
        # made from the rows at once; ``_set_cols`` keeps a node's column up to date)
        rows = [
            (
                ns.cpu_idle,
                ns.cpu_idle + ns.cpu_rel,
                ns.mem_idle,
                ns.mem_idle + ns.mem_rel,
                ns.pods_idle,
                ns.pods_idle + ns.pods_rel,
            )
            for ns in indexed
        ]
        self.cols = np.array(rows, dtype=np.float64).T.copy() if n else np.zeros((6, 0), dtype=np.float64)
        self.has_devices = np.array([bool(ns.devices) for ns in indexed], dtype=bool)
        # Nodes with a shared GPU group (``NodeState.has_group``): KAI's gpusharingorder bonus.
        self.shared = np.zeros(n, dtype=bool)
        self.cpu_totals_ok = all(ns.node.cpu_millis > 0 for ns in indexed)
        self.hard_taints = any(
            t.effect in ("NoSchedule", "NoExecute") for ns in indexed for t in ns.node.taints
        )
        self.any_taints = any(ns.node.taints for ns in indexed)
        for ns in indexed:
            r = len(self.names)
            name = ns.name
            self.names.append(name)
            self.rank[name] = r
            k, idle, room, group = _free_idle_room(ns)
            self.idle.append(idle)
            if group:
                self.shared[r] = group
            self.where[name] = k
            bucket = self.buckets.get(k)
            if bucket is None:
                self.buckets[k] = [r]
            else:
                bucket.append(r)
            # ``_set_now`` and ``_set_group`` on a node filed nowhere yet: each files it only when
            # it is a candidate (most nodes of a full cluster are neither)
            if ns.pods_idle >= 1 and idle + ns.piped_idle >= 1:
                self._set_now(ns, r, k)
            if room > 0:
                self._set_group(ns, r, room)
        session.dirty_nodes.clear()

    def _set_now(self, ns: NodeState, r: int, k: int) -> None:
        """(Re)file the node among the fits-now candidates of bucket ``k``: a node that fits a
        whole-GPU task now (``Fit.avail``) has a free pod slot and an idle GPU (counting the ones
        pipelined tasks took, ``NodeState.piped_idle``); any other is skipped by that pass."""
        old = self.now_where.get(r)
        k_now = k if ns.pods_idle >= 1 and self.idle[r] + ns.piped_idle >= 1 else None
        if old == k_now:
            return
        if old is not None:
            lst = self.now_buckets[old]
            del lst[bisect.bisect_left(lst, r)]
            del self.now_where[r]
        if k_now is not None:
            bisect.insort(self.now_buckets.setdefault(k_now, []), r)
            self.now_where[r] = k_now

    def _set_cols(self, ns: NodeState, r: int) -> None:
        c = self.cols
        c[0, r] = ns.cpu_idle
        c[1, r] = ns.cpu_idle + ns.cpu_rel
        c[2, r] = ns.mem_idle
        c[3, r] = ns.mem_idle + ns.mem_rel
        c[4, r] = ns.pods_idle
        c[5, r] = ns.pods_idle + ns.pods_rel

    def _set_group(self, ns: NodeState, r: int, room: float) -> None:
        """(Re)file the node among nodes with a shared device that has room left (``room``:
        the most left on one, from ``_free_idle_room``)."""
        old = self.group_where.get(ns.name)
        k = self.where[ns.name] if room > 0 else None
        if old is not None and old != k:
            lst = self.group_buckets[old]
            del lst[bisect.bisect_left(lst, r)]
            del self.group_where[ns.name]
        if k is not None and old != k:
            bisect.insort(self.group_buckets.setdefault(k, []), r)
            self.group_where[ns.name] = k
        if k is None:
            self.group_room.pop(ns.name, None)
        else:
            self.group_room[ns.name] = room

    def refresh(self) -> None:
        dirty = self.session.dirty_nodes
        if not dirty:
            return
        nodes = self.session.nodes
        for name in dirty:
            old = self.where.get(name)
            if old is None:
                continue  # unschedulable: never indexed
            ns = nodes[name]
            r = self.rank[name]
            self.fit_memo.pop(r, None)
            k, self.idle[r], room, self.shared[r] = _free_idle_room(ns)
            if k != old:
                lst = self.buckets[old]
                del lst[bisect.bisect_left(lst, r)]
                bisect.insort(self.buckets.setdefault(k, []), r)
                self.where[name] = k
            self._set_now(ns, r, k)
            self._set_group(ns, r, room)
            self._set_cols(ns, r)
        dirty.clear()

    def best_whole(self, task: Task, selector: Rules) -> tuple[NodeState, Fit] | None:
        """First node in (score desc, name asc) order for a whole-GPU task under binpack."""
        ks, first = self._whole_search(task, selector, frozenset())
        if not ks:
            return None

        # Minimum and maximum free count over all fitting nodes (the binpack range).
        mn = next((k for k in ks if first(k, None) is not None), None)
        if mn is None:
            return None
        mx = next(k for k in reversed(ks) if first(k, None) is not None)
        for now in (True, False):
            best: tuple[NodeState, Fit] | None = None
            best_score = 0.0
            for k in ks:
                if k < mn:
                    continue
                # Later buckets score no higher; only an exactly equal score can still win.
                if best is not None and self._score(now, k, mn, mx) != best_score:
                    break
                found = first(k, now)
                if found is None:
                    continue
                if best is None:
                    best, best_score = found, self._score(now, k, mn, mx)
                elif found[0].name < best[0].name:
                    best = found
            if best is not None:
                return best
        return None

    def _whole_search(
        self, task: Task, selector: Rules, skip: frozenset[int]
    ) -> tuple[list[int], Callable[[int, bool | None], tuple[NodeState, Fit] | None]]:
        """The free-GPU buckets a whole-GPU task may fit, ascending, and ``first(k, now)``: the
        first node of bucket k, in name order, not in ``skip``, that fits (and fits now / later
        when ``now`` is not None)."""
        self.refresh()
        session = self.session
        nodes = session.nodes
        names = self.names
        need = task.whole_gpus
        ks = sorted(k for k, lst in self.buckets.items() if k >= need and lst)
        fits: dict[int, tuple[NodeState, Fit]] = {}  # nothing changes during the search
        idle = self.idle
        # node_fit skips the rule calls in exactly this case (no taints, no selector, affinity
        # or anti-affinity): the fit is then a function of the node's state and the shape.
        memo = (
            self.fit_memo
            if isinstance(selector, Job)
            and not self.any_taints
            and not (selector.node_selector or selector.node_affinity or selector.anti_affinity_key)
            else None
        )
        shape = (need, task.cpu_millis, task.memory_mib)

        def first(k: int, now: bool | None) -> tuple[NodeState, Fit] | None:
            """First node of bucket k, in name order, that fits (and fits now / later). The
            fits-now pass reads only the bucket's candidates (``now_buckets``): a node outside
            them has no ``Fit.avail``, cached or not."""
            for r in self.now_buckets.get(k, ()) if now else self.buckets[k]:
                if r in skip:
                    continue
                hit = fits.get(r)
                if hit is None:
                    ns = nodes[names[r]]
                    # Fitting now needs a free pod slot and enough idle devices: skip the full
                    # check where either is missing (after virtual evictions, as in the victim
                    # search's simulations, many nodes have only releasing room). Not cached:
                    # the node may still fit later.
                    if now and (ns.pods_idle < 1 or idle[r] + ns.piped_idle < need):
                        continue
                    fit = None
                    if memo is not None:
                        per = memo.get(r)
                        fit = per.get(shape) if per is not None else None
                    if fit is None:
                        fit = node_fit(session, ns, task, selector)
                        if memo is not None:
                            memo.setdefault(r, {})[shape] = fit
                    hit = fits[r] = (ns, fit)
                fit = hit[1]
                if fit.ok and (now is None or fit.avail == now):
                    return hit
            return None

        return ks, first

    def whole_tiers(
        self, task: Task, selector: Rules, skip: frozenset[int]
    ) -> tuple[list[tuple[NodeState, Fit]], int | None, int | None]:
        """For a whole-GPU task under binpack, over the indexed nodes not in ``skip``: the best
        node that fits now and the best that fits later (each the first, in name order, of the
        lowest bucket holding one), and the least and most free GPUs of a fitting node (the
        binpack range); ``placement.best_fit`` merges them with the nodes it skipped."""
        ks, first = self._whole_search(task, selector, skip)
        mn = next((k for k in ks if first(k, None) is not None), None)
        if mn is None:
            return [], None, None
        mx = next(k for k in reversed(ks) if first(k, None) is not None)
        hits = []
        for now in (True, False):
            found = next((f for k in ks if k >= mn and (f := first(k, now)) is not None), None)
            if found is not None:
                hits.append(found)
        return hits, mn, mx

    @staticmethod
    def _score(now: bool, k: int, mn: int, mx: int) -> float:
        """``node_score(Fit(True, now=now), True, False, True, False, k, 1.0, mn, mx, 0.0)``, the same
        float operations without building a Fit (it runs a few times per whole-GPU search)."""
        s = 0.0
        if now:
            s += 1_000
        low, high = float(mn), float(mx)
        if high <= 0:
            return s
        if low == high:
            return s + 9
        return s + 9 * (1 - (float(k) - low) / (high - low))

    def best_fraction(self, task: Task, selector: Rules) -> tuple[NodeState, Fit] | None | bool:
        """First node in (score desc, name asc) order for a fractional or GPU-memory task under
        binpack: tiers joins a group now, joins a group later, a free device now, later; in a
        tier the fewest free whole GPUs (the binpack part), then the name."""
        hits = self._fraction_hits(task, selector, frozenset(), every=False)
        if isinstance(hits, bool):
            return hits
        return hits[0] if hits else None

    def _fraction_hits(
        self, task: Task, selector: Rules, skip: frozenset[int], every: bool
    ) -> list[tuple[NodeState, Fit]] | bool:
        """``best_fraction``'s tiers in order, each tier's best node not in ``skip`` (the first
        one found unless ``every``); False where the group buckets cannot answer."""
        session = self.session
        if session.device_need(task, session.min_device_memory) <= EPS:
            return False  # would fit a full shared device: not served by the group buckets
        self.refresh()
        nodes = session.nodes
        names = self.names
        rooms = self.group_room

        def scan(buckets: dict[int, list[int]], group: bool, now: bool) -> tuple[NodeState, Fit] | None:
            for k in sorted(k for k, lst in buckets.items() if lst and (group or k >= 1)):
                for r in buckets[k]:
                    if r in skip:
                        continue
                    ns = nodes[names[r]]
                    if group and rooms[ns.name] < session.device_need(task, ns.node.gpu_memory_mib) - EPS:
                        continue  # no shared device of this node has room for it
                    fit = node_fit(session, ns, task, selector)
                    if fit.ok and fit.shares_group == group and fit.avail == now:
                        return ns, fit
            return None

        hits = []
        for group, now in ((True, True), (True, False), (False, True), (False, False)):
            found = scan(self.group_buckets if group else self.buckets, group, now)
            if found is not None:
                hits.append(found)
                if not every:
                    break
        return hits

    def fraction_tiers(
        self, task: Task, selector: Rules, skip: frozenset[int]
    ) -> tuple[list[tuple[NodeState, Fit]], int | None, int | None] | bool:
        """``whole_tiers`` for a fractional or GPU-memory task: the best node of each of
        ``best_fraction``'s tiers, then the binpack range (the least free is a tier's best; the
        most free, the first fitting node down from the top bucket); False where
        ``best_fraction`` cannot answer."""
        hits = self._fraction_hits(task, selector, skip, every=True)
        if isinstance(hits, bool):
            return False
        if not hits:
            return [], None, None
        where = self.where
        mn = min(where[ns.name] for ns, _ in hits)
        mx = mn
        nodes, names = self.session.nodes, self.names
        for k in sorted((k for k, lst in self.buckets.items() if lst and k > mn), reverse=True):
            if any(
                r not in skip and node_fit(self.session, nodes[names[r]], task, selector).ok
                for r in self.buckets[k]
            ):
                mx = k
                break
        return hits, mn, mx

    def _mask(self, selector: Rules) -> np.ndarray | None:
        """Indexed nodes the selector's static rules allow (cached); None when a rule depends
        on the cycle's state (pod anti-affinity): such a task takes the reference scan."""
        if isinstance(selector, Job):
            if selector.anti_affinity_key:
                return None
            if not (selector.node_selector or selector.node_affinity or self.hard_taints):
                return self.masks.setdefault((), np.ones(len(self.names), dtype=bool))
            key: object = ("job", selector.key)
        elif selector:
            key = ("selector", tuple(sorted(selector.items())))
        else:
            return self.masks.setdefault((), np.ones(len(self.names), dtype=bool))
        mask = self.masks.get(key)
        if mask is None:
            nodes = self.session.nodes
            if isinstance(selector, Job):
                ok = [rules.static_reason(nodes[n].node, selector) is None for n in self.names]
            else:
                ok = [rules.selector_matches(nodes[n].node, selector) for n in self.names]
            mask = self.masks[key] = np.array(ok, dtype=bool)
        return mask

    def best_cpu(self, task: Task, selector: Rules) -> tuple[NodeState, Fit] | None | bool:
        """First node in (score desc, name asc) order for a CPU-only task under binpack, by a
        vectorised filter over all nodes; False when this search cannot answer exactly (the
        caller then scans)."""
        if not self.cpu_totals_ok:
            return False
        mask = self._mask(selector)
        if mask is None:
            return False
        self.refresh()
        c = self.cols
        cpu = task.cpu_millis - AMOUNT_EPS
        mem = task.memory_mib - AMOUNT_EPS
        # node_fit's checks, in its arithmetic: pods, then CPU and memory (idle + releasing).
        fits = mask & (c[5] >= 1) & ~(c[1] < cpu) & ~(c[3] < mem)
        if not fits.any():
            return None
        now = (c[4] >= 1) & (c[0] >= cpu) & (c[2] >= mem)
        # The shared-group tiers only where gpusharingorder is on (placement.node_score).
        shared = self.shared if self.session.config.gpu_sharing_order else np.zeros_like(self.shared)
        for tier in (fits & shared & now, fits & shared & ~now, fits & ~shared & now, fits & ~shared & ~now):
            if not tier.any():
                continue
            no_gpu = tier & ~self.has_devices
            if no_gpu.any():
                tier = no_gpu
            r = int(np.argmin(np.where(tier, c[1], np.inf)))  # first of the least free: name order
            if c[1, r] <= 0:
                return False  # no binpack range (every fitting node full): let the scan decide
            ns = self.session.nodes[self.names[r]]
            fit = node_fit(self.session, ns, task, selector)
            if not fit.ok or fit.avail != bool(now[r]):
                # refused, or scored lower, on KAI's GPU counters below zero, which these
                # columns do not hold (fit.gpu_counters_below_zero): let the scan decide
                return False
            return ns, fit
        return None


def index_of(session: Session) -> NodeIndex:
    idx = session.node_index
    if not isinstance(idx, NodeIndex):
        idx = NodeIndex(session)
        session.node_index = idx
    return idx
