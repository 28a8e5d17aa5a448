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

What keeps 10,000 workloads on 1,000 clusters under a second of CPU (``benchmarks/bench_place``):

* a *profile* per distinct static key (feasibility mask, candidates, static scores, answers for
  current clusters), shared by every workload with that key and found by the identity of the
  workload's parts (machine-int ids, not nested dataclass hashes; see ``profile``);
* per bound class, the clusters ordered by an upper bound on their dynamic score, moved only
  when their bound changes noticeably, so that picking ``maxClusters`` of hundreds scores a few
  (``top``);
* dynamic plugins asked through per-workload kernels, as list comprehensions over cluster
  indices, with the static part of the total added in the same pass;
* no per-workload objects beyond the decision (shared lines, lazily built explanations, a
  capacity ledger of plain ints), so the garbage collector has little to trace;
* bounds refreshed only on clusters whose free capacity actually changed.

``tests/orchestrator/placement/reference.py`` places the same fleets the slow, obvious way; the
two must agree on every decision and every reason.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
import math
import operator
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, cast

from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot import (
    Cluster,
    ClusterAffinity,
    FleetSnapshot,
    PlacementPolicy,
    ReplicaScheduling,
    StaticWeight,
    Workload,
)
from orchestrator.placement import division
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.equivalence import (
    Entry,
    FilterTable,
    ScoreTable,
    bits,
    mask_of,
    selectors,
)
from orchestrator.placement.framework import (
    MAX_SCORE,
    WORKLOAD_FACT_PATHS,
    BatchFilter,
    BatchScore,
    BoundedScore,
    FilterKernel,
    FilterPlugin,
    FilterResult,
    Kernel,
    Registry,
    ScoreKernel,
    ScoreKernelFn,
    ScorePlugin,
    WorkloadKeyed,
    depends_on_term,
    is_dynamic,
)
from orchestrator.placement.plugins import DEFAULT_REGISTRY
from orchestrator.placement.plugins.taint_toleration import eviction_times

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
    # Division did what the policy alone does not say (``division.EQUAL_WEIGHTS_NOTE``).
    division_note: str = ""
    # (cluster, when) for chosen clusters a NoExecute toleration holds only for a while.
    evict_at: tuple[tuple[str, str], ...] = ()

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
        if d.division_note:
            item["divisionNote"] = d.division_note
        if d.evict_at:
            item["evictAt"] = dict(d.evict_at)
        decisions.append(item)
    return {"decisions": decisions}


@dataclass(slots=True)
class _Attempt:
    """One affinity term tried for a workload, kept for explaining the decision later."""

    view: Workload
    label: str
    failure: str = ""


class _LazyScores(Sequence[int]):
    """Totals of the candidates, computed (batched) only if division asks for them.

    Through ``at`` (see ``division.scores_at``) only the totals asked for are computed.
    """

    __slots__ = ("_args", "_data", "_scheduler")

    def __init__(
        self,
        scheduler: _Scheduler,
        view: Workload,
        profile: _Profile,
        candidates: list[int],
        current: list[int],
    ) -> None:
        self._scheduler = scheduler
        self._args = (view, profile, candidates, current)
        self._data: list[int] | None = None

    def _load(self) -> list[int]:
        if self._data is None:
            view, profile, candidates, current = self._args
            scheduler = self._scheduler
            bonus = scheduler.current_bonus(profile, view, current)
            self._data = scheduler.totals(view, candidates, profile.base, bonus)
        return self._data

    def __getitem__(self, p: int) -> int:  # type: ignore[override]
        return self._load()[p]

    def __len__(self) -> int:
        return len(self._args[2])

    def at(self, positions: Sequence[int]) -> list[int]:
        """Just these totals (division asks for a few to break a tie): one batch."""
        if self._data is not None:
            return [self._data[p] for p in positions]
        view, profile, candidates, current = self._args
        scheduler = self._scheduler
        bonus = scheduler.current_bonus(profile, view, current)
        return scheduler.totals(view, [candidates[p] for p in positions], profile.base, bonus)


# Added to every bound so that float rounding in a plugin's bound never prunes a cluster.
BOUND_SLACK = 1e-9
# How many of the best-bound pool clusters the threshold algorithm scores first.
PROBE = 4
# How many clusters the threshold algorithm scores at a time after that.
CHUNK = 8
# Past this many clusters in one assignment, re-sorting their bound classes beats moving each.
REORDER_LIMIT = 24
# How far a cluster's bound may fall below the one it is ordered by before it is moved.
ORDER_SLACK = 1.0


class _Weighting:
    """Weighted division's (weight, minReplicas, maxReplicas) of every cluster for one list."""

    __slots__ = ("eligible", "mask", "triples")

    def __init__(self, triples: list[tuple[int, int, int | None]]) -> None:
        self.triples = triples
        # A cluster takes part only with a weight (or minReplicas) and room under maxReplicas.
        self.eligible = [(w > 0 or low > 0) and high != 0 for w, low, high in triples]
        self.mask = mask_of(self.eligible)


class _Profile:
    """What the workloads with equal static keys share; built once per distinct key.

    Feasibility (``mask``, ``candidates`` in name order, ``members``), the weighted static score
    of every cluster as if not current (``base``), answers for current clusters (``current_fits``,
    ``bonus``: exact, asked once per cluster), and for ranking: ``pool``, the candidates that
    Weighted division can use, as a list and as one flag per cluster ``selected``
    (``selected[i]`` is 1 for pool clusters: ``filter`` tests it at C speed), and the best
    static score of the pool in each bound class (``class_base``). 10,000 workloads
    of a generated fleet share ~2,000 profiles.
    """

    __slots__ = (
        "_pool_set",
        "base",
        "bonus",
        "candidates",
        "class_base",
        "current_fits",
        "entries",
        "mask",
        "members",
        "pool",
        "pool_mask",
        "score_entries",
        "selected",
        "settled",
        "weighting",
    )

    def __init__(
        self,
        mask: int,
        entries: list[Entry[FilterResult]],
        score_entries: list[Entry[int]],
        base: list[int],
        weighting: _Weighting | None,
        *,
        same_statics: _Profile | None = None,
    ) -> None:
        self.mask = mask
        self.entries = entries
        self.score_entries = score_entries
        self.base = base
        if same_statics is None:
            self.candidates = bits(mask)
            self.members = frozenset(self.candidates)
            self.current_fits: dict[int, bool] = {}
            self.settled: set[int] = set()
            self.bonus: dict[int, int] = {}
        else:  # the same static keys with other weights: share what does not depend on them
            self.candidates = same_statics.candidates
            self.members = same_statics.members
            self.current_fits = same_statics.current_fits
            self.settled = same_statics.settled
            self.bonus = same_statics.bonus
        self.weighting = weighting
        self.pool_mask = mask if weighting is None else mask & weighting.mask
        self.pool = self.candidates if weighting is None else bits(self.pool_mask)
        self.selected: list[int] = []
        self.class_base: list[tuple[int, int]] | None = None
        self._pool_set: frozenset[int] | None = None

    def pool_set(self) -> frozenset[int]:
        """``pool`` as a set (built on first use)."""
        if self._pool_set is None:
            self._pool_set = self.members if self.pool is self.candidates else frozenset(self.pool)
        return self._pool_set


def _parts(paths: Sequence[str]) -> Callable[[Workload], tuple[object, ...]]:
    """A getter of the objects at ``paths`` (dotted attributes), always as a tuple."""
    if not paths:
        return _no_parts
    getter = operator.attrgetter(*paths)
    if len(paths) == 1:
        return lambda v: (getter(v),)
    return cast(Callable[[Workload], tuple[object, ...]], getter)


def _no_parts(view: Workload) -> tuple[object, ...]:
    return ()


def _weights_key(view: Workload) -> Hashable:
    scheduling = view.placement.replica_scheduling
    return scheduling.weights if scheduling.type == "Weighted" and scheduling.weights else None


class _Scheduler:
    """Plugin tables and caches for one run; places workloads one by one."""

    def __init__(self, ctx: PlacementContext, registry: Registry, excluded: frozenset[int]):
        self.ctx = ctx
        self.excluded = excluded
        self.note = ""  # the last attempt's division note (see ``_attempt``)
        self.allowed = mask_of([i not in excluded for i in range(len(ctx.clusters))])
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
        self.filter_kernels = [
            (p, p.filter_kernel if isinstance(p, FilterKernel) else None)
            for p in self.dynamic_filters
        ]
        self.static_scores = [ScoreTable(p, ctx) for p in scorers if not is_dynamic(p)]
        self.current_scores = [t for t in self.static_scores if t.uses_current]
        dynamic_scores = [p for p in scorers if is_dynamic(p)]
        self.batch_scores = [
            (p, p.weight, p.score_batch if isinstance(p, BatchScore) else None)
            for p in dynamic_scores
        ]
        self.score_kernels = [
            (p, p.weight, p.score_kernel if isinstance(p, ScoreKernel) else None)
            for p in dynamic_scores
        ]
        # One key per workload view covers every static table and the Weighted division's
        # weights: the union of the tables' declared facts (read by one attrgetter), the keys of
        # tables that define their own, and the weights.
        tables: list[FilterTable | ScoreTable] = [*self.static_filters, *self.static_scores]
        paths = sorted(
            {
                path
                for t in tables
                if not isinstance(t.plugin, WorkloadKeyed)
                for fact in t.plugin.workload_facts
                if fact != "current"
                for path in WORKLOAD_FACT_PATHS[fact]
            }
        )
        facts = operator.attrgetter(*paths) if paths else _no_parts
        own = [t.wkey for t in tables if isinstance(t.plugin, WorkloadKeyed)]
        self.profile_key: Callable[[Workload], tuple[Hashable, ...]]
        if len(own) == 1:
            only = own[0]
            self.profile_key = lambda v: (facts(v), only(v), _weights_key(v))
        else:
            self.profile_key = lambda v: (facts(v), *[k(v) for k in own], _weights_key(v))
        self.profiles: dict[Hashable, _Profile] = {}
        # In front of that, profiles by the *identity* of the objects those keys are made of:
        # ids hash and compare as machine ints, where the key above hashes nested dataclasses.
        # A table's own key is worked out once per distinct set of fact objects and interned to
        # a small int (``_tokens``). Equal parts of a parsed snapshot are one object (see
        # ``snapshot_from_mapping``), so this level misses about once per profile; equal parts
        # that are distinct objects only cost a miss. Every object whose id is part of a key is
        # kept (``_alive``, ``_own``), so no id can be reused by another object during the run.
        self._plain = _parts(paths)
        self._own = [
            (
                _parts(
                    sorted(
                        path
                        for fact in t.plugin.workload_facts
                        if fact != "current"
                        for path in WORKLOAD_FACT_PATHS[fact]
                    )
                ),
                t.wkey,
                dict[tuple[int, ...], tuple[tuple[object, ...], int]](),
            )
            for t in tables
            if isinstance(t.plugin, WorkloadKeyed)
        ]
        self._tokens: dict[Hashable, int] = {}
        self.by_identity: dict[tuple[int, ...], _Profile] = {}
        self._alive: list[tuple[object, ...]] = []
        self._single_terms: dict[int, tuple[object, tuple[tuple[ClusterAffinity], ...]]] = {}
        self._scores: dict[Hashable, tuple[list[Entry[int]], list[int]]] = {}
        self._weightings: dict[Hashable, _Weighting] = {}
        self.bounded = [(p.weight, p) for p in dynamic_scores if isinstance(p, BoundedScore)]
        self.unbounded = sum(
            p.weight * MAX_SCORE for p in dynamic_scores if not isinstance(p, BoundedScore)
        )
        self.ub = self._bounds(list(range(len(ctx.clusters))))
        bound_classes: dict[tuple[Hashable, ...], int] = {}
        self.class_of = [
            bound_classes.setdefault(
                tuple(p.bound_class(ctx, i) for _, p in self.bounded), len(bound_classes)
            )
            for i in range(len(ctx.clusters))
        ]
        class_keys = list(bound_classes)
        self.class_parts = [list(parts) for parts in zip(*class_keys, strict=True)]
        self.class_count = len(class_keys)
        # Per bound class, every cluster by upper bound, best first: ``order_keys`` holds
        # -bound ascending and ``order`` the cluster indices, in step (see ``_refresh_bounds``).
        self.class_members: list[list[int]] = [[] for _ in class_keys]
        for i, k in enumerate(self.class_of):
            self.class_members[k].append(i)
        self.held = list(self.ub)
        self.order_keys: list[list[float]] = [[] for _ in class_keys]
        self.order: list[list[int]] = [[] for _ in class_keys]
        for k in range(self.class_count):
            self._sort_class(k)
        self._lines: list[dict[int, ClusterReplicas]] = [{} for _ in ctx.clusters]
        classes: dict[Hashable, int] = {}
        self.label_class = [
            classes.setdefault(tuple(sorted(c.labels.items())), len(classes)) for c in ctx.clusters
        ]
        self.label_reps = [self.label_class.index(c) for c in range(len(classes))]

    def _sort_class(self, k: int) -> None:
        ub, held = self.ub, self.held
        ranked = sorted([(-ub[i], i) for i in self.class_members[k]])
        self.order_keys[k] = [key for key, _ in ranked]
        self.order[k] = [i for _, i in ranked]
        for i in self.class_members[k]:
            held[i] = ub[i]

    def _bounds(self, indices: list[int]) -> list[float]:
        ctx, unbounded = self.ctx, self.unbounded
        if len(self.bounded) == 1 and self.bounded[0][0] == 1 and not unbounded:
            return self.bounded[0][1].upper_bounds(ctx, indices)
        bounds = [float(unbounded)] * len(indices)
        for weight, plugin in self.bounded:
            bounds = [
                b + weight * u
                for b, u in zip(bounds, plugin.upper_bounds(ctx, indices), strict=True)
            ]
        return bounds

    def _refresh_bounds(self, indices: list[int]) -> None:
        """New bounds for clusters that just gave capacity away.

        ``ub`` is always exact. The orders keep each cluster at the bound it had when placed
        there (``held``), which stays a valid bound while it is not below the exact one, so a
        cluster moves only when its bound grew or fell by more than ``ORDER_SLACK``: the many
        small placements do not reshuffle the orders, and ranking re-checks exact bounds.
        """
        ub, held, class_of = self.ub, self.held, self.class_of
        bounds = self._bounds(indices)
        for i, new in zip(indices, bounds, strict=True):
            ub[i] = new
        moved = [
            i
            for i, new in zip(indices, bounds, strict=True)
            if not held[i] - ORDER_SLACK <= new <= held[i]
        ]
        if len(moved) > REORDER_LIMIT:
            for k in sorted({class_of[i] for i in moved}):
                self._sort_class(k)
            return
        for i in moved:
            old, new = held[i], ub[i]
            keys, order = self.order_keys[class_of[i]], self.order[class_of[i]]
            pos = bisect.bisect_left(keys, -old)
            while order[pos] != i:
                pos += 1
            del keys[pos], order[pos]
            pos = bisect.bisect_left(keys, -new)
            keys.insert(pos, -new)
            order.insert(pos, i)
            held[i] = new

    # ------------------------------------------------------------------ feasibility
    def profile(self, view: Workload) -> _Profile:
        """The profile of the view's static keys, built on first use (see ``by_identity``)."""
        parts = (*self._plain(view), _weights_key(view))
        ids = [*map(id, parts)]
        for own_parts, own_key, tokens in self._own:
            facts = own_parts(view)
            facts_ids = tuple(map(id, facts))
            token = tokens.get(facts_ids)
            if token is None:
                number = self._tokens.setdefault(own_key(view), len(self._tokens))
                token = tokens[facts_ids] = (facts, number)
            ids.append(token[1])
        key_ids = tuple(ids)
        found = self.by_identity.get(key_ids)
        if found is None:
            key = self.profile_key(view)
            found = self.profiles.get(key)
            if found is None:
                found = self.profiles[key] = self._new_profile(key, view)
            self.by_identity[key_ids] = found
            self._alive.append(parts)
        return found

    def single_terms(
        self, terms: tuple[ClusterAffinity, ...]
    ) -> tuple[tuple[ClusterAffinity], ...]:
        """Each fallback term as a one-term tuple, made once per distinct list of terms.

        Views of the same term then share their ``affinities`` object (see ``profile``).
        """
        found = self._single_terms.get(id(terms))
        if found is None or found[0] is not terms:
            found = self._single_terms[id(terms)] = (terms, tuple((term,) for term in terms))
        return found[1]

    def _new_profile(self, key: tuple[Hashable, ...], view: Workload) -> _Profile:
        weighting = None
        if key[-1] is not None:
            weights = view.placement.replica_scheduling.weights
            weighting = self._weightings.get(weights)
            if weighting is None:
                weighting = self._weightings[weights] = self._weighting(weights)
            unweighted = self.profiles.get((*key[:-1], None))
            if unweighted is None:
                unweighted = self.profiles[(*key[:-1], None)] = self._new_profile(
                    (*key[:-1], None), view
                )
            return _Profile(
                unweighted.mask,
                unweighted.entries,
                unweighted.score_entries,
                unweighted.base,
                weighting,
                same_statics=unweighted,
            )
        mask = self.allowed
        entries: list[Entry[FilterResult]] = []
        for table in self.static_filters:
            entry = table.entry(table.wkey(view), view)
            mask &= entry.mask
            entries.append(entry)
        score_key = tuple([t.wkey(view) for t in self.static_scores])
        scores = self._scores.get(score_key)
        if scores is None:
            base = [0] * len(self.ctx.clusters)
            score_entries: list[Entry[int]] = []
            for score_table, k in zip(self.static_scores, score_key, strict=True):
                score_entry = score_table.entry(k, view)
                score_entries.append(score_entry)
                base = [a + b for a, b in zip(base, score_entry.scores, strict=True)]
            scores = self._scores[score_key] = (score_entries, base)
        return _Profile(mask, entries, *scores, None)

    def _weighting(self, entries: Sequence[StaticWeight]) -> _Weighting:
        """Every cluster's entry (``division.matching_entry``); by label class unless names are used."""
        clusters = self.ctx.clusters

        def entry_of(cluster: Cluster) -> tuple[int, int, int | None]:
            found = division.matching_entry(entries, cluster)
            if found is None:
                return 0, 0, 0
            return found.weight, found.min_replicas, found.max_replicas

        if any(e.cluster is not None for e in entries):
            triples = [entry_of(cluster) for cluster in clusters]
        else:
            by_class = [entry_of(clusters[i]) for i in self.label_reps]
            triples = [by_class[c] for c in self.label_class]
        return _Weighting(triples)

    def static_candidates(
        self, profile: _Profile, view: Workload, current: Sequence[int]
    ) -> tuple[list[int], frozenset[int]]:
        """Clusters passing every static filter, in name order (and as a set).

        Current clusters are asked exactly (e.g. NoSchedule spares a workload that stays).
        """
        candidates, members = profile.candidates, profile.members
        if not current or not self.current_filters or profile.settled.issuperset(current):
            return candidates, members
        changed: list[int] | None = None
        for i in current:
            fits = profile.current_fits.get(i)
            if fits is None:
                fits = profile.current_fits[i] = i not in self.excluded and all(
                    t.fits_at(e, view, i, True)
                    for t, e in zip(self.static_filters, profile.entries, strict=True)
                )
                if fits == (i in members):
                    profile.settled.add(i)  # as current it is what it is anyway
            if fits != (i in members):
                if changed is None:
                    changed = list(candidates)
                if fits:
                    bisect.insort(changed, i)
                else:
                    changed.remove(i)
        if changed is None:
            return candidates, members
        return changed, frozenset(changed)

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
    def current_bonus(
        self, profile: _Profile, view: Workload, current: Sequence[int]
    ) -> dict[int, int]:
        """Static score change on clusters where the workload runs now (e.g. locality)."""
        bonus: dict[int, int] = {}
        if not current or not self.current_scores:
            return bonus
        for i in current:
            delta = profile.bonus.get(i)
            if delta is None:
                delta = 0
                for table, entry in zip(self.static_scores, profile.score_entries, strict=True):
                    if table.uses_current:
                        answer = table.result(entry, view, i, True)
                        delta += answer * table.weight - entry.scores[i]
                profile.bonus[i] = delta
            if delta:
                bonus[i] = delta
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

    def _kernels(self, view: Workload) -> tuple[list[Kernel], list[tuple[int, ScoreKernelFn]]]:
        """The dynamic plugins as per-workload functions over cluster indices."""
        ctx = self.ctx
        fits: list[Kernel] = []
        for plugin, kernel in self.filter_kernels:
            fits.append(
                kernel(ctx, view) if kernel is not None else _filter_kernel(ctx, plugin, view)
            )
        scores: list[tuple[int, ScoreKernelFn]] = []
        for scorer, weight, score_kernel in self.score_kernels:
            scores.append(
                (
                    weight,
                    score_kernel(ctx, view)
                    if score_kernel is not None
                    else _score_kernel(ctx, scorer, view),
                )
            )
        return fits, scores

    def _pool_bound(self, profile: _Profile) -> float:
        """At least the total of any pool cluster outside the current placement."""
        class_base = self._class_base(profile)
        keys = self.order_keys
        return (
            max((top_base - keys[k][0] for k, top_base in class_base), default=-math.inf)
            + BOUND_SLACK
        )

    def _class_base(self, profile: _Profile) -> list[tuple[int, int]]:
        """(bound class, best static score of the pool in it) for classes the pool touches."""
        if profile.class_base is None:
            best: dict[int, int] = {}
            base, class_of = profile.base, self.class_of
            for i in profile.pool:
                k = class_of[i]
                if base[i] > best.get(k, -(1 << 62)):
                    best[k] = base[i]
            profile.class_base = sorted(best.items())
            profile.selected = list(selectors(profile.pool_mask, len(self.ctx.clusters)))
        return profile.class_base

    def _discounts(self, view: Workload) -> list[float]:
        if len(self.bounded) == 1 and self.bounded[0][0] == 1:
            return self.bounded[0][1].discounts(self.ctx, view, self.class_parts[0])
        discount = [0.0] * self.class_count
        for (w, plugin), parts in zip(self.bounded, self.class_parts, strict=True):
            for k, d in enumerate(plugin.discounts(self.ctx, view, parts)):
                discount[k] += w * d
        return discount

    def top(
        self,
        view: Workload,
        *,
        profile: _Profile,
        candidates: list[int],
        members: frozenset[int],
        current: Sequence[int],
        limit: int,
    ) -> list[tuple[int, int]]:
        """The ``limit`` best feasible (index, total) pairs: total descending, then name.

        Dynamic plugins are asked through per-workload kernels (``FilterKernel``,
        ``ScoreKernel``, or the batch methods wrapped as such). Current clusters carry their
        static bonus (Locality); when they fill the limit and no other cluster's bound reaches
        them, nothing else is scored. Small pools are scored outright (``_direct``).

        Large ones use a threshold algorithm over the bound orders. A pool cluster of bound class
        k totals at most its static score plus its dynamic bound minus the workload's discount
        in the class, and its exact total is an int. Probing the best-bound pool clusters, most
        promising class first, until ``limit`` of them fit gives a ``limit``-th best total; then
        only pool clusters whose bound reaches it can still enter, one bisection per class finds
        them (walking the order and testing pool membership in C: ``filter`` over the profile's
        flags), and they are scored a few at a time while the bar rises. A workload that picks 3
        of 400 clusters scores about a dozen.
        """
        base = profile.base
        weighting = profile.weighting
        fits, scores = self._kernels(view)
        first = (
            [i for i in current if i in members and (weighting is None or weighting.eligible[i])]
            if current
            else []
        )
        bonus = self.current_bonus(profile, view, first) if first else {}
        best: list[tuple[int, int]] = []  # (total, -index)
        if len(first) >= limit or len(candidates) > DIRECT_LIMIT:
            if first:
                fitting, totals = _evaluate(fits, scores, base, first)
                best = [(t + bonus.get(i, 0), -i) for i, t in zip(fitting, totals, strict=True)]
            if len(best) >= limit:
                # Current clusters often fill the limit by themselves (Locality): done if no
                # other pool cluster can reach the worst of them, by any bound.
                best.sort(reverse=True)
                del best[limit:]
                if best[-1][0] > self._pool_bound(profile):
                    return [(-negative_i, total) for total, negative_i in best]
        if len(candidates) <= DIRECT_LIMIT:
            return self._direct(
                profile, fits, scores, current=current, first=first, bonus=bonus, limit=limit
            )
        skip = frozenset(current)
        discount = self._discounts(view)
        class_base = self._class_base(profile)
        selected = profile.selected
        classes = []
        for k, top_base in class_base:
            # The class's best bound, pool member or not: cheap, and still a bound.
            slack = top_base - discount[k] + BOUND_SLACK
            classes.append((self.order_keys[k][0] - slack, slack, top_base, k))
        classes.sort()
        # ``best`` becomes a min-heap of the ``limit`` best so far: its root is the one to beat.
        if len(best) > limit:
            best = heapq.nlargest(limit, best)
        heapq.heapify(best)
        seen = set(skip)
        if len(best) < limit:
            chunk = max(limit - len(best), PROBE)
            for _, _, _, k in classes:
                members_k = filter(selected.__getitem__, self.order[k])
                while len(best) < limit:
                    probe = list(itertools.islice(members_k, chunk))
                    if not probe:
                        break
                    if skip:
                        probe = [i for i in probe if i not in skip]
                    seen.update(probe)
                    _offer(best, *_evaluate(fits, scores, base, probe), limit)
                if len(best) >= limit:
                    break
        if len(best) >= limit:
            ub = self.ub
            # Dynamic scores are never negative, so a cluster totals at least its static score:
            # a class whose best static score reaches the worst kept is read in full.
            most_static = max(top_base for _, _, top_base, _ in classes)
            for negative_head, slack, top_base, k in classes:
                worst = best[0][0]
                if -negative_head < worst and top_base < worst:
                    if most_static < worst:
                        break  # classes come best head first: no later one can reach it
                    continue
                # Pool clusters of the class whose bound (with their own static score) reaches
                # the worst kept, evaluated a few at a time while it rises. A tie with the worst
                # kept loses by name unless the index is lower.
                order = self.order[k]
                cut = (
                    bisect.bisect_right(self.order_keys[k], slack - worst)
                    if top_base < worst
                    else len(order)
                )
                rest = list(filter(selected.__getitem__, itertools.islice(order, cut)))
                offset = slack - top_base
                while rest:
                    worst, negative_i = best[0]
                    if top_base < worst:
                        rest = [
                            i
                            for i in rest
                            if (bound := offset + base[i] + ub[i]) >= worst
                            and (bound >= worst + 1 or i < -negative_i)
                            and i not in seen
                        ]
                    else:
                        rest = [
                            i
                            for i in rest
                            if (bound := base[i] + max(0, offset + ub[i])) >= worst
                            and (bound >= worst + 1 or i < -negative_i)
                            and i not in seen
                        ]
                    batch, rest = rest[:CHUNK], rest[CHUNK:]
                    seen.update(batch)
                    _offer(best, *_evaluate(fits, scores, base, batch), limit)
        best.sort(reverse=True)
        return [(-negative_i, total) for total, negative_i in best]

    def _direct(
        self,
        profile: _Profile,
        fits: list[Kernel],
        scores: list[tuple[int, ScoreKernelFn]],
        *,
        current: Sequence[int],
        first: list[int],
        bonus: dict[int, int],
        limit: int,
    ) -> list[tuple[int, int]]:
        """``top`` for a small pool: score it all, then check fit best first.

        The best clusters are the freest, so they nearly always fit: ranking by exact total
        first and asking the filters only down the ranking skips a filter pass over the pool.
        """
        batch = profile.pool
        if current:
            # The pool holds clusters as if not current; current ones count as ``first`` says.
            pool_set = profile.pool_set()
            extra = [i for i in first if i not in pool_set]
            usable = set(first)
            drop = [i for i in current if i in pool_set and i not in usable]
            if extra or drop:
                batch = sorted(pool_set.difference(drop).union(extra))
        totals = _totals(scores, profile.base, batch)
        for i, plus in bonus.items():
            totals[bisect.bisect_left(batch, i)] += plus
        # Best first; a stable sort keeps equal totals in index (name) order.
        order = sorted(range(len(batch)), key=totals.__getitem__, reverse=True)
        chosen: list[int] = []
        step = max(limit, PROBE)
        for start in range(0, len(order), step):
            part = order[start : start + step]
            asked = [batch[p] for p in part]
            fitting = asked
            for kernel in fits:
                fitting = kernel(fitting)
            if len(fitting) < len(asked):
                ok = set(fitting)
                part = [p for p in part if batch[p] in ok]
            chosen += part[: limit - len(chosen)]
            if len(chosen) >= limit:
                break
        return [(batch[p], totals[p]) for p in chosen]

    # ------------------------------------------------------------------ division
    def divide(
        self,
        view: Workload,
        profile: _Profile,
        candidates: list[int],
        members: frozenset[int],
        current: list[int],
    ) -> tuple[list[tuple[int, int]], str]:
        """(cluster index, replicas) pairs, or a failure text when replicas are left over."""
        policy = view.placement
        kind = policy.replica_scheduling.type
        limit = policy.max_clusters
        replicas = view.replicas
        weighting = profile.weighting
        scores: Sequence[int]
        if limit is not None and len(candidates) > limit:
            best = self.top(
                view,
                profile=profile,
                candidates=candidates,
                members=members,
                current=current,
                limit=limit,
            )
            best.sort()
            chosen = [i for i, _ in best]
            scores = [total for _, total in best]
        else:
            chosen = self.dynamic_candidates(view, candidates)
            if weighting is not None:
                eligible = weighting.eligible
                chosen = [i for i in chosen if eligible[i]]
            scores = _LazyScores(self, view, profile, chosen, current)
        if not chosen:
            return [], "no feasible cluster"
        if kind == "Duplicated":
            return [(i, replicas) for i in chosen], ""
        rooms = self.ctx.rooms(view, chosen)
        if kind == "Dynamic":
            allocation = division.dynamic(replicas, scores, rooms, None)
        elif kind == "Aggregated":
            in_use = frozenset(current)
            allocation = division.aggregated(
                replicas, scores, rooms, [p for p, i in enumerate(chosen) if i in in_use]
            )
        else:
            triples = (
                [weighting.triples[i] for i in chosen]
                if weighting is not None
                else [(1, 0, None)] * len(chosen)
            )
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
        policy = workload.placement
        current: list[int] = []
        if policy.clusters:
            index = self.ctx.index
            current = sorted([index[n] for n in policy.clusters if n in index])
        terms = policy.affinities
        if len(terms) <= 1:
            # One term (the common case): no views, and no attempt list unless it fails.
            assignment, failure = self._attempt(workload, current)
            if failure:
                return self._decision(seq, workload, [_Attempt(workload, "", failure)], ())
            return self._decision(seq, workload, None, self._place(seq, workload, assignment))
        attempts: list[_Attempt] = []
        singles = self.single_terms(terms)
        for t in range(len(terms)):
            view = _term_view(workload, singles[t])
            assignment, failure = self._attempt(view, current)
            attempts.append(_Attempt(view, _term_label(terms, t), failure))
            if not failure:
                return self._decision(seq, workload, attempts, self._place(seq, view, assignment))
        return self._decision(seq, workload, attempts, ())

    def _attempt(self, view: Workload, current: list[int]) -> tuple[list[tuple[int, int]], str]:
        """One affinity term: (cluster index, replicas) pairs, or why it failed."""
        self.note = ""
        profile = self.profile(view)
        candidates, members = self.static_candidates(profile, view, current)
        if not candidates:
            return [], "no feasible cluster"
        eligible = profile.weighting.eligible if profile.weighting is not None else None
        if eligible is not None and not any(map(eligible.__getitem__, candidates)):
            view = _equal_weights(view)  # no weight entry matches a feasible cluster
            profile = self.profile(view)
            self.note = division.EQUAL_WEIGHTS_NOTE
        return self.divide(view, profile, candidates, members, current)

    def _place(
        self, seq: int, view: Workload, assignment: list[tuple[int, int]]
    ) -> tuple[ClusterReplicas, ...]:
        """Consume the capacity of a successful attempt; the decision's lines."""
        changed = self.ctx.consume(seq, view, assignment)
        if changed and self.bounded:
            self._refresh_bounds(changed)
        # Lines are immutable and shared between decisions: fewer objects to keep alive.
        lines = self._lines
        return tuple([lines[i].get(r) or self._line(i, r) for i, r in assignment])

    def _line(self, i: int, replicas: int) -> ClusterReplicas:
        line = self._lines[i][replicas] = ClusterReplicas(self.ctx.clusters[i].name, replicas)
        return line

    def _decision(
        self,
        seq: int,
        workload: Workload,
        attempts: list[_Attempt] | None,
        chosen: tuple[ClusterReplicas, ...],
    ) -> WorkloadDecision:
        """``attempts`` None: the single term succeeded (cheaper to keep; see ``explain``)."""
        placed = attempts is None or not attempts[-1].failure
        evicted: tuple[str, ...] = ()
        current = workload.placement.clusters
        if current:
            names = {c.name for c in chosen}
            evicted = tuple(sorted({n for n in current if n not in names}))
        return WorkloadDecision(
            workload=workload.key,
            clusters=chosen,
            unschedulable=not placed,
            reasons=_Reasons(self, seq, workload, attempts, chosen),
            evicted=evicted,
            affinity=attempts[-1].label or None if placed and attempts is not None else None,
            division_note=self.note if placed else "",
            evict_at=eviction_times(self.ctx, workload, [c.name for c in chosen]),
        )

    # ------------------------------------------------------------------ explanations
    def explain(
        self,
        seq: int,
        workload: Workload,
        attempts: list[_Attempt] | None,
        chosen: Collection[ClusterReplicas],
    ) -> dict[str, tuple[str, ...]]:
        """Every rejected cluster with all its reasons (see module docstring)."""
        if attempts is None:
            attempts = [_Attempt(workload, "")]
        ctx_then = self.ctx.at(seq)
        current = set(workload.placement.clusters)
        chosen_names = {c.name for c in chosen}
        # Cache entries per attempt, looked up once rather than once per cluster.
        terms = [
            [(t, t.entry(t.wkey(a.view), a.view)) for t in self.term_filters] for a in attempts
        ]
        plain: dict[int, list[tuple[FilterTable, Entry[FilterResult]]]] = {}
        out: dict[str, tuple[str, ...]] = {}
        for i, cluster in enumerate(self.ctx.clusters):
            if i in self.excluded:
                out[cluster.name] = (EXCLUDED,)
                continue
            if cluster.name in chosen_names:
                continue
            is_current = cluster.name in current
            reasons: list[str] = []
            governing = -1
            for k, attempt in enumerate(attempts):
                term_reasons = [
                    r for t, e in terms[k] for r in t.result(e, attempt.view, i, is_current).reasons
                ]
                if not term_reasons:
                    governing = k
                    break
                prefix = f"affinity {attempt.label}: " if attempt.label else ""
                reasons.extend(prefix + r for r in term_reasons)
            attempt = attempts[max(governing, 0)]
            view = attempt.view
            tables = plain.get(governing)
            if tables is None:
                tables = plain[governing] = [
                    (t, t.entry(t.wkey(view), view)) for t in self.plain_filters
                ]
            for t, e in tables:
                reasons.extend(t.result(e, view, i, is_current).reasons)
            if governing >= 0 and not reasons:
                for plugin in self.dynamic_filters:
                    reasons.extend(plugin.filter(ctx_then, view, cluster).reasons)
                if not reasons and attempt.failure:
                    reasons.append(attempt.failure)
            if reasons:
                out[cluster.name] = tuple(dict.fromkeys(reasons))
        return out


def _evaluate(
    fits: list[Kernel],
    scores: list[tuple[int, ScoreKernelFn]],
    base: list[int],
    batch: list[int],
) -> tuple[list[int], list[int]]:
    """The clusters of ``batch`` that fit, and their exact totals (static ``base`` included)."""
    for kernel in fits:
        batch = kernel(batch)
        if not batch:
            return [], []
    return batch, _totals(scores, base, batch)


def _totals(
    scores: list[tuple[int, ScoreKernelFn]], base: list[int], batch: list[int]
) -> list[int]:
    """Exact totals of ``batch`` (static ``base`` included), fit or not."""
    if len(scores) == 1 and scores[0][0] == 1:
        return scores[0][1](batch, base)
    totals = [base[i] for i in batch]
    for weight, score in scores:
        totals = [a + weight * b for a, b in zip(totals, score(batch, None), strict=True)]
    return totals


def _offer(best: list[tuple[int, int]], indices: list[int], totals: list[int], limit: int) -> None:
    """Keep the ``limit`` largest (total, -index) items in the min-heap ``best``."""
    for i, total in zip(indices, totals, strict=True):
        item = (total, -i)
        if len(best) < limit:
            heapq.heappush(best, item)
        elif item > best[0]:
            heapq.heapreplace(best, item)


def _filter_kernel(ctx: PlacementContext, plugin: FilterPlugin, view: Workload) -> Kernel:
    """A kernel from a plugin without one: its batch method, or ``filter`` per cluster."""
    if isinstance(plugin, BatchFilter):
        return functools.partial(plugin.filter_batch, ctx, view)
    clusters = ctx.clusters
    return lambda indices: [i for i in indices if plugin.filter(ctx, view, clusters[i]).fits]


def _score_kernel(ctx: PlacementContext, plugin: ScorePlugin, view: Workload) -> ScoreKernelFn:
    """A kernel from a plugin without one: its batch method, or ``score`` per cluster."""
    clusters = ctx.clusters
    if isinstance(plugin, BatchScore):
        batch = plugin.score_batch

        def scores(indices: Sequence[int], offsets: Sequence[int] | None) -> list[int]:
            out = batch(ctx, view, indices)
            if offsets is None:
                return out
            return [offsets[i] + s for i, s in zip(indices, out, strict=True)]

        return scores

    def each(indices: Sequence[int], offsets: Sequence[int] | None) -> list[int]:
        out = [plugin.score(ctx, view, clusters[i]) for i in indices]
        if offsets is None:
            return out
        return [offsets[i] + s for i, s in zip(indices, out, strict=True)]

    return each


def _term_view(workload: Workload, term: tuple[ClusterAffinity]) -> Workload:
    """The workload with only the affinity ``term`` (``dataclasses.replace``, spelled out: faster)."""
    p = workload.placement
    policy = PlacementPolicy(
        affinities=term,
        tolerations=p.tolerations,
        clusters=p.clusters,
        replica_scheduling=p.replica_scheduling,
        max_latency=p.max_latency,
        max_clusters=p.max_clusters,
    )
    w = workload
    return Workload(w.name, w.namespace, w.apis, w.replicas, w.requests, policy)


def _equal_weights(view: Workload) -> Workload:
    """The view with Weighted division and no weight entries: every cluster weighs 1."""
    p = view.placement
    policy = PlacementPolicy(
        affinities=p.affinities,
        tolerations=p.tolerations,
        clusters=p.clusters,
        replica_scheduling=_UNWEIGHTED,
        max_latency=p.max_latency,
        max_clusters=p.max_clusters,
    )
    w = view
    return Workload(w.name, w.namespace, w.apis, w.replicas, w.requests, policy)


_UNWEIGHTED = ReplicaScheduling("Weighted")


def _term_label(terms: Sequence[object], t: int) -> str:
    if len(terms) <= 1:
        return ""
    name = getattr(terms[t], "name", "")
    return str(name) if name else f"#{t}"


class _Reasons(Mapping[str, tuple[str, ...]]):
    """A decision's per-cluster reasons, worked out on first read and then kept."""

    __slots__ = ("_attempts", "_chosen", "_data", "_scheduler", "_seq", "_workload")

    def __init__(
        self,
        scheduler: _Scheduler,
        seq: int,
        workload: Workload,
        attempts: list[_Attempt] | None,
        chosen: tuple[ClusterReplicas, ...],
    ) -> None:
        self._scheduler: _Scheduler | None = scheduler
        self._seq = seq
        self._workload = workload
        self._attempts = attempts
        self._chosen = chosen
        self._data: dict[str, tuple[str, ...]] | None = None

    def _load(self) -> dict[str, tuple[str, ...]]:
        if self._data is None:
            assert self._scheduler is not None
            self._data = self._scheduler.explain(
                self._seq, self._workload, self._attempts, self._chosen
            )
            self._scheduler = None
            self._attempts = None
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
    now: datetime | None = None,
) -> PlacementResult:
    """Place ``workloads`` (keys or objects; default all) on the snapshot's clusters.

    Workloads not named keep running where they are; their usage is already in ``allocated``.
    ``exclude_clusters`` are treated as unavailable (reason ``excluded``), e.g. the cluster about
    to be upgraded. ``now`` (the caller's clock: workflow time, or the CLI's) ends NoExecute
    tolerations whose ``tolerationSeconds`` ran out; without it they hold, and the decision's
    ``evict_at`` says until when.
    """
    ctx = PlacementContext(snapshot, now=now)
    unknown = sorted(set(exclude_clusters) - set(ctx.index))
    if unknown:
        raise InputError(f"unknown cluster(s) to exclude: {', '.join(unknown)}")
    scheduler = _Scheduler(ctx, registry, frozenset(ctx.index[n] for n in exclude_clusters))
    chosen = _select(snapshot, workloads)
    return PlacementResult(tuple(scheduler.schedule(seq, w) for seq, w in enumerate(chosen)))
