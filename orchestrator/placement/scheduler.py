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
workload saw, the first time a decision's ``summary`` or ``reasons`` are read (``explain``):
``place()`` stays fast, and only a caller who asks pays for workloads x clusters reasons.

The parts, one module each: ``result`` (decision types and the JSON contract), ``profiles``
(what workloads with equal static keys share), ``bounds`` (the bound index), ``topk`` (the
``maxClusters`` search), ``driver`` (division driver), ``explain`` (lazy reasons and summary).
This module keeps the per-workload flow: feasibility, scoring, fallback terms, capacity.

What keeps 10,000 workloads on 1,000 clusters under a second of CPU (``benchmarks/bench_place``):

* a *profile* per distinct static key (feasibility mask, candidates, static scores, answers for
  current clusters), shared by every workload with that key and found by the identity of the
  workload's parts (machine-int ids, not nested dataclass hashes; see ``profiles``);
* per bound class, the clusters ordered by an upper bound on their dynamic score, moved only
  when their bound changes noticeably, so that picking ``maxClusters`` of hundreds scores a few
  (``bounds``, ``topk``);
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
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import datetime

from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot import (
    ClusterAffinity,
    FleetSnapshot,
    PlacementPolicy,
    ReplicaScheduling,
    Workload,
)
from orchestrator.placement import division
from orchestrator.placement.bounds import BoundIndex
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.driver import divide
from orchestrator.placement.equivalence import FilterTable, ScoreTable, mask_of
from orchestrator.placement.explain import Attempt, DecisionExplanation, Explainer
from orchestrator.placement.fastpath import BatchFilter, BatchScore
from orchestrator.placement.framework import (
    FilterPlugin,
    Registry,
    depends_on_term,
    is_dynamic,
)
from orchestrator.placement.plugins import DEFAULT_REGISTRY
from orchestrator.placement.plugins.taint_toleration import eviction_times
from orchestrator.placement.profiles import Profile, ProfileCache
from orchestrator.placement.result import ClusterReplicas, PlacementResult, WorkloadDecision
from orchestrator.placement.topk import TopK


class Scheduler:
    """Plugin tables and caches for one run; places workloads one by one."""

    def __init__(self, ctx: PlacementContext, registry: Registry, excluded: frozenset[int]):
        self.ctx = ctx
        self.names = [c.name for c in ctx.clusters]  # by index, sorted (``stable`` bisects it)
        self.excluded = excluded
        self.note = ""  # the last attempt's division note (see ``_attempt``)
        self.placed = 0  # workloads scheduled so far (``Explainer`` rebuilds what read the ledger)
        self.profile: Profile | None = None  # the last attempt's (its explanation reuses it)
        self.allowed = mask_of([i not in excluded for i in range(len(ctx.clusters))])
        filters = registry.filters
        scorers = self.scorers = registry.scorers
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
        self.profiles = ProfileCache(ctx, self.static_filters, self.static_scores, self.allowed)
        self.bounds = BoundIndex(ctx, dynamic_scores)
        self.topk = TopK(ctx, self.bounds, self.dynamic_filters, dynamic_scores, self.current_bonus)
        self.explainer = Explainer(self)
        self._lines: list[dict[int, ClusterReplicas]] = [{} for _ in ctx.clusters]

    # ------------------------------------------------------------------ feasibility
    def static_candidates(
        self, profile: Profile, view: Workload, current: Sequence[int]
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
        self, profile: Profile, view: Workload, current: Sequence[int]
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

    # ------------------------------------------------------------------ one workload
    def schedule(self, seq: int, workload: Workload) -> WorkloadDecision:
        """Try each affinity term in order; the first that places every replica wins."""
        self.placed += 1
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
                attempt = Attempt(workload, "", failure, self.profile)
                return self._decision(seq, workload, [attempt], ())
            chosen = self._place(seq, workload, assignment)
            return self._decision(seq, workload, None, chosen, profile=self.profile)
        attempts: list[Attempt] = []
        singles = self.profiles.single_terms(terms)
        for t in range(len(terms)):
            view = term_view(workload, singles[t])
            assignment, failure = self._attempt(view, current)
            attempts.append(Attempt(view, term_label(terms, t), failure, self.profile))
            if not failure:
                return self._decision(seq, workload, attempts, self._place(seq, view, assignment))
        return self._decision(seq, workload, attempts, ())

    def _attempt(self, view: Workload, current: list[int]) -> tuple[list[tuple[int, int]], str]:
        """One affinity term: (cluster index, replicas) pairs, or why it failed."""
        self.note = ""
        profile = self.profile = self.profiles.profile(view)
        candidates, members = self.static_candidates(profile, view, current)
        if not candidates:
            return [], "no feasible cluster"
        eligible = profile.weighting.eligible if profile.weighting is not None else None
        if eligible is not None and not any(map(eligible.__getitem__, candidates)):
            view = _equal_weights(view)  # no weight entry matches a feasible cluster
            profile = self.profiles.profile(view)
            self.note = division.EQUAL_WEIGHTS_NOTE
        return divide(self, view, profile, candidates=candidates, members=members, current=current)

    def _place(
        self, seq: int, view: Workload, assignment: list[tuple[int, int]]
    ) -> tuple[ClusterReplicas, ...]:
        """Consume the capacity of a successful attempt; the decision's lines."""
        changed = self.ctx.consume(seq, view, assignment)
        if changed and self.bounds.bounded:
            self.bounds.refresh(changed)
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
        attempts: list[Attempt] | None,
        chosen: tuple[ClusterReplicas, ...],
        *,
        profile: Profile | None = None,
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
            explanation=DecisionExplanation(
                self.explainer, seq, workload, attempts, chosen, profile=profile
            ),
            evicted=evicted,
            affinity=attempts[-1].label or None if placed and attempts is not None else None,
            division_note=self.note if placed else "",
            evict_at=eviction_times(self.ctx, workload, [c.name for c in chosen]),
            origin=workload,
        )


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
        spread_constraints=p.spread_constraints,
        current_replicas=p.current_replicas,
    )
    w = view
    return Workload(w.name, w.namespace, w.apis, w.replicas, w.requests, policy)


_UNWEIGHTED = ReplicaScheduling("Weighted")


def term_view(workload: Workload, term: tuple[ClusterAffinity]) -> Workload:
    """The workload with only the affinity ``term`` (``dataclasses.replace``, spelled out: faster)."""
    p = workload.placement
    policy = PlacementPolicy(
        affinities=term,
        tolerations=p.tolerations,
        clusters=p.clusters,
        replica_scheduling=p.replica_scheduling,
        max_latency=p.max_latency,
        max_clusters=p.max_clusters,
        spread_constraints=p.spread_constraints,
        current_replicas=p.current_replicas,
    )
    w = workload
    return Workload(w.name, w.namespace, w.apis, w.replicas, w.requests, policy)


def term_label(terms: Sequence[object], t: int) -> str:
    """How a decision names a fallback term: its name, else ``#index`` ("" when it is the only)."""
    if len(terms) <= 1:
        return ""
    name = getattr(terms[t], "name", "")
    return str(name) if name else f"#{t}"


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
    return PlacementResult(
        tuple(
            decide(
                snapshot,
                workloads=workloads,
                exclude_clusters=exclude_clusters,
                registry=registry,
                now=now,
            )
        )
    )


def decide(
    snapshot: FleetSnapshot,
    *,
    workloads: Iterable[str | Workload] | None = None,
    exclude_clusters: Collection[str] = frozenset(),
    registry: Registry = DEFAULT_REGISTRY,
    now: datetime | None = None,
) -> Iterator[WorkloadDecision]:
    """``place``'s decisions one at a time, each made when it is asked for (input checked now)."""
    ctx = PlacementContext(snapshot, now=now)
    unknown = sorted(set(exclude_clusters) - set(ctx.index))
    if unknown:
        raise InputError(f"unknown cluster(s) to exclude: {', '.join(unknown)}")
    scheduler = Scheduler(ctx, registry, frozenset(ctx.index[n] for n in exclude_clusters))
    chosen = _select(snapshot, workloads)
    return (scheduler.schedule(seq, w) for seq, w in enumerate(chosen))
