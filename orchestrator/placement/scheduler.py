"""The scheduler: filter, score, divide, for every workload of a snapshot, in a fixed order.

Per workload and per affinity term (ordered fallbacks, Karmada ``clusterAffinities``):

1. static filters give the feasible clusters from cached equivalence-class answers;
2. dynamic filters (free capacity) run exactly on what is left;
3. scores rank the feasible clusters (static ones cached, dynamic ones batched);
4. division assigns replicas; if every replica found a cluster the term wins, otherwise the next
   term is tried (as Karmada does when a term's schedule fails). No term left: unschedulable.

Workloads are placed in ``namespace/name`` order and each placement consumes free capacity, so a
batch never overcommits. Replicas already running where they stay are credited (their usage is
inside ``allocated``); capacity freed by a workload that moves is not handed out again in the same
run, because the old copy keeps running until the new one is up (graceful eviction).

Why a cluster was rejected is computed lazily, from the same caches and with the free capacity the
workload saw, the first time a decision's ``reasons`` are read: ``place()`` stays fast and the JSON
still names every rejected cluster with every reason.
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Workload
from orchestrator.placement import division
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.equivalence import Entry, FilterTable, ScoreTable, bits
from orchestrator.placement.framework import (
    MAX_SCORE,
    BatchFilter,
    BatchScore,
    BoundedScore,
    FilterPlugin,
    FilterResult,
    Registry,
    depends_on_term,
    is_dynamic,
)
from orchestrator.placement.plugins import DEFAULT_REGISTRY

EXCLUDED = "excluded"
# Up to this many feasible clusters, scoring all beats walking the bound order (measured).
DIRECT_LIMIT = 96


class ClusterReplicas(NamedTuple):
    """One line of a decision: a cluster and how many replicas it runs (a tuple: cheap to make)."""

    name: str
    replicas: int


@dataclass(frozen=True, slots=True, eq=False)
class WorkloadDecision:
    """Where one workload goes, or why it cannot go anywhere.

    ``reasons`` names every rejected cluster (Karmada FitError style), also for schedulable
    workloads, so "why not there?" always has an answer. ``evicted`` lists current clusters the
    workload leaves (NoExecute taint, API removal, exclusion, or a better placement).
    ``affinity`` is the fallback term that won (its name, or ``#index``) when there are several.
    """

    workload: str
    clusters: tuple[ClusterReplicas, ...]
    unschedulable: bool
    reasons: Mapping[str, tuple[str, ...]]
    evicted: tuple[str, ...] = ()
    affinity: str | None = None

    @property
    def replicas(self) -> dict[str, int]:
        """Replicas by cluster name."""
        return {c.name: c.replicas for c in self.clusters}


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """Decisions in ``namespace/name`` order."""

    decisions: tuple[WorkloadDecision, ...]

    def decision(self, workload: str) -> WorkloadDecision:
        """The decision for ``namespace/name`` (KeyError if it was not placed)."""
        for d in self.decisions:
            if d.workload == workload:
                return d
        raise KeyError(workload)

    @property
    def unschedulable(self) -> tuple[WorkloadDecision, ...]:
        """Decisions that found no placement."""
        return tuple(d for d in self.decisions if d.unschedulable)


def placement_to_json(result: PlacementResult) -> dict[str, object]:
    """The ``calibrator place`` contract (DESIGN.md), plus ``evicted`` and ``affinity``."""
    decisions: list[dict[str, object]] = []
    for d in result.decisions:
        item: dict[str, object] = {
            "workload": d.workload,
            "clusters": [{"name": c.name, "replicas": c.replicas} for c in d.clusters],
            "unschedulable": d.unschedulable,
            "reasons": {name: list(reasons) for name, reasons in d.reasons.items()},
            "evicted": list(d.evicted),
        }
        if d.affinity is not None:
            item["affinity"] = d.affinity
        decisions.append(item)
    return {"decisions": decisions}


@dataclass(slots=True)
class _Attempt:
    """One affinity term tried for a workload, kept for explaining the decision later."""

    view: Workload
    label: str
    failure: str = ""


class _LazyScores(Sequence[int]):
    """Totals of the candidates, computed (all at once, batched) only if division asks."""

    __slots__ = ("_args", "_data", "_scheduler")

    def __init__(
        self, scheduler: _Scheduler, view: Workload, candidates: list[int], current: list[int]
    ) -> None:
        self._scheduler = scheduler
        self._args = (view, candidates, current)
        self._data: list[int] | None = None

    def _load(self) -> list[int]:
        if self._data is None:
            view, candidates, current = self._args
            scheduler = self._scheduler
            base = scheduler.static_base(view)[0]
            bonus = scheduler.current_bonus(view, current)
            self._data = scheduler.totals(view, candidates, base, bonus)
        return self._data

    def __getitem__(self, p: int) -> int:  # type: ignore[override]
        return self._load()[p]

    def __len__(self) -> int:
        return len(self._args[1])


class _Scheduler:
    """Plugin tables and caches for one run; places workloads one by one."""

    def __init__(self, ctx: PlacementContext, registry: Registry, excluded: frozenset[int]):
        self.ctx = ctx
        self.excluded = excluded
        everyone = (1 << len(ctx.clusters)) - 1
        self.allowed = everyone & ~sum(1 << i for i in excluded)
        filters = registry.filters
        scorers = registry.scorers
        self.static_filters = [FilterTable(p, ctx) for p in filters if not is_dynamic(p)]
        self.term_filters = [t for t in self.static_filters if depends_on_term(t.plugin)]
        self.plain_filters = [t for t in self.static_filters if not depends_on_term(t.plugin)]
        self.current_filters = [t for t in self.static_filters if t.uses_current]
        self.dynamic_filters: list[FilterPlugin] = [p for p in filters if is_dynamic(p)]
        self.batch_filters = [
            (p, p.filter_batch if isinstance(p, BatchFilter) else None)
            for p in self.dynamic_filters
        ]
        self.static_scores = [ScoreTable(p, ctx) for p in scorers if not is_dynamic(p)]
        self.current_scores = [t for t in self.static_scores if t.uses_current]
        dynamic_scores = [p for p in scorers if is_dynamic(p)]
        self.batch_scores = [
            (p, p.weight, p.score_batch if isinstance(p, BatchScore) else None)
            for p in dynamic_scores
        ]
        self.bounded = [(p.weight, p) for p in dynamic_scores if isinstance(p, BoundedScore)]
        self.unbounded = sum(
            p.weight * MAX_SCORE for p in dynamic_scores if not isinstance(p, BoundedScore)
        )
        self.bound = [self._bound(i) for i in range(len(ctx.clusters))]
        by_class: dict[tuple[Hashable, ...], list[tuple[int, int]]] = {}
        self.bound_class: list[tuple[Hashable, ...]] = []
        for i, b in enumerate(self.bound):
            cls = tuple(p.bound_class(ctx, i) for _, p in self.bounded)
            self.bound_class.append(cls)
            by_class.setdefault(cls, []).append((-b, i))
        self.orders = {cls: sorted(entries) for cls, entries in by_class.items()}
        self.class_keys = list(self.orders)
        self.class_parts = [list(parts) for parts in zip(*self.class_keys, strict=True)]
        self._feasible: dict[
            Hashable, tuple[int, list[int], frozenset[int], list[Entry[FilterResult]]]
        ] = {}
        self._scores: dict[Hashable, tuple[list[int], int]] = {}
        self._weights: dict[Hashable, dict[int, tuple[int, int, int | None]]] = {}
        classes: dict[Hashable, int] = {}
        self.label_class = [
            classes.setdefault(tuple(sorted(c.labels.items())), len(classes)) for c in ctx.clusters
        ]

    def _bound(self, i: int) -> int:
        bounded = sum(w * p.upper_bound(self.ctx, i) for w, p in self.bounded)
        return bounded + self.unbounded

    def _rebound(self, indices: Iterable[int]) -> None:
        """Keep ``order`` sorted by best possible dynamic score after capacity was consumed."""
        for i in indices:
            new = self._bound(i)
            old = self.bound[i]
            if new == old:
                continue
            order = self.orders[self.bound_class[i]]
            del order[bisect.bisect_left(order, (-old, i))]
            bisect.insort(order, (-new, i))
            self.bound[i] = new

    # ------------------------------------------------------------------ feasibility
    def static_candidates(
        self, view: Workload, current: Sequence[int]
    ) -> tuple[list[int], frozenset[int]]:
        """Clusters passing every static filter, in name order (and as a set)."""
        tables = self.static_filters
        keys = tuple(t.wkey(view) for t in tables)
        hit = self._feasible.get(keys)
        if hit is None:
            mask = self.allowed
            entries = [table.entry(key, view) for table, key in zip(tables, keys, strict=True)]
            for entry in entries:
                mask &= entry.mask
            members = bits(mask)
            hit = self._feasible[keys] = (mask, members, frozenset(members), entries)
        mask, candidates, members_set, entries = hit
        if not current or not self.current_filters:
            return candidates, members_set
        changed = False
        for i in current:
            fits = i not in self.excluded and all(
                t.result(e, view, i, True).fits if t.uses_current else e.mask >> i & 1
                for t, e in zip(tables, entries, strict=True)
            )
            if fits != bool(mask >> i & 1):
                if not changed:
                    candidates = list(candidates)
                    changed = True
                if fits:
                    bisect.insort(candidates, i)
                else:
                    candidates.remove(i)
        return (candidates, frozenset(candidates)) if changed else (candidates, members_set)

    def dynamic_candidates(self, view: Workload, candidates: list[int]) -> list[int]:
        """Exact capacity checks on what the static filters left."""
        clusters = self.ctx.clusters
        for plugin, batch in self.batch_filters:
            if not candidates:
                break
            if batch is not None:
                candidates = batch(self.ctx, view, candidates)
            else:
                candidates = [
                    i for i in candidates if plugin.filter(self.ctx, view, clusters[i]).fits
                ]
        return candidates

    # ------------------------------------------------------------------ scoring
    def static_base(self, view: Workload) -> tuple[list[int], int]:
        """Weighted static score of every cluster as if not current, and its maximum."""
        tables = self.static_scores
        keys = tuple(t.wkey(view) for t in tables)
        hit = self._scores.get(keys)
        if hit is None:
            base = [0] * len(self.ctx.clusters)
            for table, key in zip(tables, keys, strict=True):
                base = [a + b for a, b in zip(base, table.entry(key, view).scores, strict=True)]
            hit = self._scores[keys] = (base, max(base, default=0))
        return hit

    def current_bonus(self, view: Workload, current: Sequence[int]) -> dict[int, int]:
        """Static score change on clusters where the workload runs now (e.g. locality)."""
        bonus: dict[int, int] = {}
        if not current:
            return bonus
        for table in self.current_scores:
            entry = table.entry(table.wkey(view), view)
            for i in current:
                delta = table.result(entry, view, i, True) * table.weight - entry.scores[i]
                if delta:
                    bonus[i] = bonus.get(i, 0) + delta
        return bonus

    def totals(
        self,
        view: Workload,
        indices: list[int],
        base: list[int],
        bonus: dict[int, int],
    ) -> list[int]:
        """Exact weighted total score of each index (``base``/``bonus``: see above)."""
        totals = [base[i] for i in indices]
        clusters = self.ctx.clusters
        for plugin, w, batch in self.batch_scores:
            if batch is not None:
                extra = batch(self.ctx, view, indices)
            else:
                extra = [plugin.score(self.ctx, view, clusters[i]) for i in indices]
            totals = [a + w * b for a, b in zip(totals, extra, strict=True)]
        if bonus:
            for p, i in enumerate(indices):
                if i in bonus:
                    totals[p] += bonus[i]
        return totals

    def top(
        self,
        view: Workload,
        *,
        candidates: list[int],
        members: frozenset[int],
        current: Sequence[int],
        limit: int,
        eligible: Callable[[int], bool] | None,
    ) -> list[tuple[int, int]]:
        """The ``limit`` best feasible (index, total) pairs: total descending, then name.

        Small candidate sets are scored outright. Large ones use a threshold algorithm: current
        clusters first, then, class by class (best head first), the others in order of their
        best possible score (static maximum + dynamic bound - the workload's discount); a class
        is left as soon as none of its remaining clusters can reach the ``limit``-th best exact
        total. Only visited clusters pay for capacity checks and exact scores.
        """
        base, base_max = self.static_base(view)
        bonus = self.current_bonus(view, current)
        if len(candidates) <= DIRECT_LIMIT:
            pool = candidates if eligible is None else [i for i in candidates if eligible(i)]
            fitting = self.dynamic_candidates(view, pool)
            totals = self.totals(view, fitting, base, bonus)
            return [
                (i, t)
                for t, i in heapq.nlargest(limit, zip(totals, fitting, strict=True), key=_rank)
            ]
        best: list[tuple[int, int]] = []  # min-heap of (total, -index): root = worst kept

        def evaluate(batch: list[int]) -> int | None:
            fitting = self.dynamic_candidates(view, batch)
            if fitting:
                totals = self.totals(view, fitting, base, bonus)
                for total, i in zip(totals, fitting, strict=True):
                    item = (total, -i)
                    if len(best) < limit:
                        heapq.heappush(best, item)
                    elif item > best[0]:
                        heapq.heapreplace(best, item)
            return best[0][0] if len(best) == limit else None

        def hopeless(bound: float, i: int) -> bool:
            # Exact totals are ints <= bound: beaten outright, or tied and later by name.
            # Within a class order (bound desc, index asc) everything after is hopeless too.
            total, negative_index = best[0]
            return bound < total or (bound < total + 1 and i > -negative_index)

        first = [i for i in current if i in members and (eligible is None or eligible(i))]
        # Current clusters that can fill the limit alone usually end the search at once;
        # otherwise they ride along with the first batch (one round trip fewer).
        alone = len(first) >= limit
        threshold = evaluate(first) if alone else None
        skip = set(current)
        chunk = max(8, 2 * limit)
        discount = [0.0] * len(self.class_keys)
        for (w, plugin), parts in zip(self.bounded, self.class_parts, strict=True):
            for k, d in enumerate(plugin.discounts(self.ctx, view, parts)):
                discount[k] += w * d
        orders = self.orders
        classes = [
            (orders[cls][0][0] - (base_max - d), base_max - d, orders[cls])
            for cls, d in zip(self.class_keys, discount, strict=True)
        ]
        classes.sort(key=_first)
        # A stale (lower) threshold only visits more, so batches may span classes.
        batch: list[int] = [] if alone else first
        for _, slack, order in classes:
            if threshold is not None and hopeless(slack - order[0][0], order[0][1]):
                continue
            for negative_bound, i in order:
                if threshold is not None and hopeless(slack - negative_bound, i):
                    break
                if i in members and i not in skip and (eligible is None or eligible(i)):
                    batch.append(i)
                    if len(batch) >= chunk:
                        threshold = evaluate(batch)
                        batch = []
        if batch:
            evaluate(batch)
        best.sort(reverse=True)
        return [(-negative_i, total) for total, negative_i in best]

    # ------------------------------------------------------------------ division
    def weights_of(self, view: Workload) -> Callable[[int], tuple[int, int, int | None]] | None:
        """(weight, minReplicas, maxReplicas) per cluster index; None when all weigh the same.

        Unlisted clusters get (0, 0, 0). Entries by selector are cached per label class.
        """
        entries = view.placement.replica_scheduling.weights
        if not entries:
            return None
        cache = self._weights.setdefault(entries, {})
        named = any(e.cluster is not None for e in entries)
        clusters, label_class = self.ctx.clusters, self.label_class

        def weight_of(i: int) -> tuple[int, int, int | None]:
            key = -i - 1 if named else label_class[i]
            hit = cache.get(key)
            if hit is None:
                hit = (0, 0, 0)
                for entry in entries:
                    if entry.matches(clusters[i]):
                        hit = (entry.weight, entry.min_replicas, entry.max_replicas)
                        break
                cache[key] = hit
            return hit

        return weight_of

    def divide(
        self, view: Workload, members: frozenset[int], candidates: list[int], current: list[int]
    ) -> tuple[list[tuple[int, int]], str]:
        """(cluster index, replicas) pairs, or a failure text when replicas are left over."""
        policy = view.placement
        kind = policy.replica_scheduling.type
        limit = policy.max_clusters
        replicas = view.replicas
        scores: Sequence[int]
        eligible = None
        weight_of = self.weights_of(view) if kind == "Weighted" else None
        if weight_of is not None:

            def eligible(i: int) -> bool:
                weight, low, high = weight_of(i)
                return (weight > 0 or low > 0) and high != 0

        if limit is not None and len(candidates) > limit:
            best = self.top(
                view,
                candidates=candidates,
                members=members,
                current=current,
                limit=limit,
                eligible=eligible,
            )
            best.sort()
            chosen = [i for i, _ in best]
            scores = [total for _, total in best]
        else:
            chosen = self.dynamic_candidates(view, candidates)
            if eligible is not None:
                chosen = [i for i in chosen if eligible(i)]
            scores = _LazyScores(self, view, chosen, current)
        if not chosen:
            if eligible is not None and not any(eligible(i) for i in candidates):
                return [], "no weight for this cluster in replicaScheduling.weights"
            return [], "no feasible cluster"
        if kind == "Duplicated":
            return [(i, replicas) for i in chosen], ""
        rooms = self.ctx.rooms(view, chosen)
        if kind == "Dynamic":
            allocation = division.dynamic(replicas, scores, rooms, None)
        else:
            triples = [weight_of(i) if weight_of else (1, 0, None) for i in chosen]
            allocation = division.weighted(
                replicas,
                scores,
                [t[0] for t in triples],
                rooms,
                mins=[t[1] for t in triples],
                maxs=[t[2] for t in triples],
            )
        assignment = [(chosen[p], r) for p, r in sorted(allocation.replicas.items()) if r > 0]
        if allocation.complete:
            return assignment, ""
        placed = replicas - allocation.unplaced
        why = "capacity, maxReplicas or weights" if kind == "Weighted" else "capacity"
        return [], (
            f"{kind} division placed only {placed} of {replicas} replicas on the "
            f"{len(chosen)} feasible cluster(s) (limited by {why})"
        )

    # ------------------------------------------------------------------ one workload
    def schedule(self, seq: int, workload: Workload) -> WorkloadDecision:
        """Try each affinity term in order; the first that places every replica wins."""
        index = self.ctx.index
        policy = workload.placement
        current = sorted(index[n] for n in policy.clusters if n in index)
        terms = policy.affinities
        attempts: list[_Attempt] = []
        for t in range(max(1, len(terms))):
            view = workload if len(terms) <= 1 else _term_view(workload, t)
            attempt = _Attempt(view, _term_label(terms, t))
            attempts.append(attempt)
            candidates, members = self.static_candidates(view, current)
            if not candidates:
                attempt.failure = "no feasible cluster"
                continue
            assignment, failure = self.divide(view, members, candidates, current)
            if failure:
                attempt.failure = failure
                continue
            self.ctx.consume(seq, view, assignment)
            if self.bounded:
                self._rebound(i for i, _ in assignment)
            chosen = tuple(ClusterReplicas(self.ctx.clusters[i].name, r) for i, r in assignment)
            return self._decision(seq, workload, attempts, chosen, placed=True)
        return self._decision(seq, workload, attempts, (), placed=False)

    def _decision(
        self,
        seq: int,
        workload: Workload,
        attempts: list[_Attempt],
        chosen: tuple[ClusterReplicas, ...],
        *,
        placed: bool,
    ) -> WorkloadDecision:
        names = {c.name for c in chosen}
        evicted = tuple(sorted(n for n in set(workload.placement.clusters) if n not in names))
        return WorkloadDecision(
            workload=workload.key,
            clusters=chosen,
            unschedulable=not placed,
            reasons=_Reasons(self, seq, workload, attempts, names),
            evicted=evicted,
            affinity=attempts[-1].label if placed and attempts[-1].label else None,
        )

    # ------------------------------------------------------------------ explanations
    def explain(
        self, seq: int, workload: Workload, attempts: list[_Attempt], chosen: Collection[str]
    ) -> dict[str, tuple[str, ...]]:
        """Every rejected cluster with all its reasons (see module docstring)."""
        ctx_then = self.ctx.at(seq)
        current = set(workload.placement.clusters)
        out: dict[str, tuple[str, ...]] = {}
        for i, cluster in enumerate(self.ctx.clusters):
            if i in self.excluded:
                out[cluster.name] = (EXCLUDED,)
                continue
            if cluster.name in chosen:
                continue
            reasons = self._explain_one(ctx_then, i, cluster, cluster.name in current, attempts)
            if reasons:
                out[cluster.name] = reasons
        return out

    def _explain_one(
        self,
        ctx_then: PlacementContext,
        i: int,
        cluster: Cluster,
        is_current: bool,
        attempts: list[_Attempt],
    ) -> tuple[str, ...]:
        reasons: list[str] = []
        governing: _Attempt | None = None
        for attempt in attempts:
            term_reasons = _reasons_of(self.term_filters, attempt.view, i, is_current)
            if not term_reasons:
                governing = attempt
                break
            prefix = f"affinity {attempt.label}: " if attempt.label else ""
            reasons.extend(prefix + r for r in term_reasons)
        view = (governing or attempts[0]).view
        reasons.extend(_reasons_of(self.plain_filters, view, i, is_current))
        if governing is not None and not reasons:
            for plugin in self.dynamic_filters:
                reasons.extend(plugin.filter(ctx_then, view, cluster).reasons)
            if not reasons and governing.failure:
                reasons.append(governing.failure)
        return tuple(dict.fromkeys(reasons))


def _first(item: tuple[float, float, list[tuple[int, int]]]) -> float:
    return item[0]


def _rank(pair: tuple[int, int]) -> tuple[int, int]:
    """Higher total first, then lower index (name order)."""
    return pair[0], -pair[1]


def _reasons_of(tables: list[FilterTable], view: Workload, i: int, current: bool) -> list[str]:
    out: list[str] = []
    for table in tables:
        entry: Entry[FilterResult] = table.entry(table.wkey(view), view)
        out.extend(table.result(entry, view, i, current).reasons)
    return out


def _term_view(workload: Workload, t: int) -> Workload:
    policy = workload.placement
    return dataclasses.replace(
        workload, placement=dataclasses.replace(policy, affinities=(policy.affinities[t],))
    )


def _term_label(terms: Sequence[object], t: int) -> str:
    if len(terms) <= 1:
        return ""
    name = getattr(terms[t], "name", "")
    return str(name) if name else f"#{t}"


class _Reasons(Mapping[str, tuple[str, ...]]):
    """A decision's per-cluster reasons, worked out on first read and then kept."""

    __slots__ = ("_args", "_data", "_scheduler")

    def __init__(
        self,
        scheduler: _Scheduler,
        seq: int,
        workload: Workload,
        attempts: list[_Attempt],
        chosen: Collection[str],
    ) -> None:
        self._scheduler: _Scheduler | None = scheduler
        self._args = (seq, workload, attempts, chosen)
        self._data: dict[str, tuple[str, ...]] | None = None

    def _load(self) -> dict[str, tuple[str, ...]]:
        if self._data is None:
            assert self._scheduler is not None
            self._data = self._scheduler.explain(*self._args)
            self._scheduler = None
        return self._data

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return self._load()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return repr(self._load())


def _select(snapshot: FleetSnapshot, workloads: Iterable[str | Workload] | None) -> list[Workload]:
    if workloads is None:
        chosen = list(snapshot.workloads)
    else:
        by_key = {w.key: w for w in snapshot.workloads}
        chosen = []
        for item in workloads:
            if isinstance(item, Workload):
                chosen.append(item)
            elif item in by_key:
                chosen.append(by_key[item])
            else:
                raise InputError(f"unknown workload {item!r}")
    unique = {w.key: w for w in chosen}
    return [unique[k] for k in sorted(unique)]


def place(
    snapshot: FleetSnapshot,
    *,
    workloads: Iterable[str | Workload] | None = None,
    exclude_clusters: Collection[str] = frozenset(),
    registry: Registry = DEFAULT_REGISTRY,
) -> PlacementResult:
    """Place ``workloads`` (keys or objects; default all) on the snapshot's clusters.

    Workloads not named keep running where they are; their usage is already in ``allocated``.
    ``exclude_clusters`` are treated as unavailable (reason ``excluded``), e.g. the cluster about
    to be upgraded.
    """
    ctx = PlacementContext(snapshot)
    unknown = sorted(set(exclude_clusters) - set(ctx.index))
    if unknown:
        raise InputError(f"unknown cluster(s) to exclude: {', '.join(unknown)}")
    scheduler = _Scheduler(ctx, registry, frozenset(ctx.index[n] for n in exclude_clusters))
    chosen = _select(snapshot, workloads)
    return PlacementResult(tuple(scheduler.schedule(seq, w) for seq, w in enumerate(chosen)))


def find_new_home(
    snapshot: FleetSnapshot,
    workload: Workload | str,
    leaving_cluster: str,
    *,
    registry: Registry = DEFAULT_REGISTRY,
) -> str | None:
    """Where the workload would go if ``leaving_cluster`` were unavailable, or None if nowhere.

    The planner asks this before an upgrade that breaks a workload on ``leaving_cluster``: None
    means the upgrade must be blocked (or the workload fixed) first. A new cluster (not in the
    current placement) is preferred in the answer, since that is where the leaving copy goes.
    """
    result = place(
        snapshot, workloads=[workload], exclude_clusters={leaving_cluster}, registry=registry
    )
    decision = result.decisions[0]
    if decision.unschedulable or not decision.clusters:
        return None
    current = set(_select(snapshot, [workload])[0].placement.clusters)
    fresh = [c.name for c in decision.clusters if c.name not in current]
    return fresh[0] if fresh else decision.clusters[0].name
