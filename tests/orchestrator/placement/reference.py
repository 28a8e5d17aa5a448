"""A straightforward, slow placement: the semantics of ``place()`` with no caching at all.

Every (workload, cluster) pair asks every plugin directly, every feasible cluster is scored
outright, and reasons are worked out eagerly from the same answers. No equivalence classes, no
masks, no bounds, no batch methods, no lazy explanations: if the scheduler's shortcuts ever change
a decision, comparing the two on a generated fleet shows it.

It follows the rules written in ``orchestrator.placement`` (package and scheduler docstrings):

* workloads in ``namespace/name`` order, each consuming free capacity beyond its credited
  replicas; capacity freed by leaving workloads is not reused;
* ordered fallback affinities: the first term whose filters *and* division succeed wins;
* ``maxClusters``: the best clusters by total score (weighted sum of every score plugin), ties by
  name; Weighted division only considers clusters with a weight (or minReplicas) and a non-zero
  maxReplicas, taking each cluster's largest matching weight entry; when no entry matches a
  feasible cluster, every feasible cluster weighs 1 and the decision says so;
* division by Webster's method, one replica at a time (``plain_division``);
* spread constraints: groups taken down the ranking while within maxGroups, clusters whose
  groups were all taken, a cover of each group first under a cluster cap, and the replicas
  spanning minGroups of every constraint (``orchestrator.placement.spread``, done plainly);
* NoExecute tolerations with ``tolerationSeconds`` end at ``now`` when given; chosen clusters
  that such a toleration holds are listed with their eviction time;
* reasons: every rejected cluster with every reason, with the capacity the workload saw;
* scores: every cluster the winning term (else the first) finds feasible, with each score
  plugin's answer and the weighted total, best first, ties by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import datetime

from orchestrator.domain.location import SpreadConstraint, groups_of
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, ReplicaScheduling, Workload
from orchestrator.domain.taints import eviction_time, format_time
from orchestrator.placement import division
from orchestrator.placement.context import PlacementContext, credited_replicas
from orchestrator.placement.framework import FilterResult, Registry
from orchestrator.placement.plugins import DEFAULT_REGISTRY
from orchestrator.placement.result import EXCLUDED
from tests.orchestrator.placement.plain_division import (
    plain_aggregated,
    plain_dynamic,
    plain_weighted,
)


@dataclasses.dataclass
class RefDecision:
    """What ``WorkloadDecision`` holds, with plain types."""

    workload: str
    clusters: tuple[tuple[str, int], ...]
    unschedulable: bool
    reasons: dict[str, tuple[str, ...]]
    evicted: tuple[str, ...]
    affinity: str | None
    division_note: str = ""
    evict_at: tuple[tuple[str, str], ...] = ()
    # (cluster, total, ((plugin, score), ...)), best first
    scores: tuple[tuple[str, int, tuple[tuple[str, int], ...]], ...] = ()


def _dynamic(plugin: object) -> bool:
    return "capacity" in getattr(plugin, "cluster_facts", frozenset())


def _term(plugin: object) -> bool:
    return "affinity" in getattr(plugin, "workload_facts", frozenset())


class _Plugins:
    """The registry's plugins by role (isinstance checks on protocols are slow: once)."""

    def __init__(self, registry: Registry) -> None:
        self.static = [p for p in registry.filters if not _dynamic(p)]
        self.term = [p for p in self.static if _term(p)]
        self.plain = [p for p in self.static if not _term(p)]
        self.dynamic = [p for p in registry.filters if _dynamic(p)]
        self.scorers = registry.scorers


def _weight(view: Workload, cluster: Cluster) -> tuple[int, int, int | None]:
    scheduling = view.placement.replica_scheduling
    if not scheduling.weights:
        return 1, 0, None
    matching = [e for e in scheduling.weights if e.matches(cluster)]
    if not matching:
        return 0, 0, 0
    top = max(e.weight for e in matching)
    entry = next(e for e in matching if e.weight == top)
    return entry.weight, entry.min_replicas, entry.max_replicas


def _groups(c: SpreadConstraint, cluster: Cluster) -> set[str]:
    return set(groups_of(c.field, cluster.name, cluster.location))


def _spread(
    view: Workload, clusters: tuple[Cluster, ...], ranked: list[int]
) -> tuple[list[int], str]:
    """The clusters a spread-constrained workload divides over (by rank), or the failure."""
    policy = view.placement
    located = [c for c in policy.spread_constraints if c.field != "cluster"]
    per_cluster = [c for c in policy.spread_constraints if c.field == "cluster"]
    cap = policy.max_clusters
    if per_cluster and per_cluster[0].max_groups is not None:
        cap = per_cluster[0].max_groups
    usable = list(ranked)
    if located:
        c = located[0]
        taken: list[str] = []
        for i in ranked:
            new = sorted(_groups(c, clusters[i]) - set(taken))
            if c.max_groups is None or len(taken) + len(new) <= c.max_groups:
                taken += new
        if len(taken) < c.min_groups:
            noun = c.field if len(taken) == 1 else f"{c.field}s"
            return [], (
                f"spread by {c.field}: the feasible clusters span {len(taken)} {noun}, "
                f"need {c.describe()}"
            )
        usable = [i for i in ranked if _groups(c, clusters[i]) <= set(taken)]
        if cap is not None and len(usable) > cap:
            picked: list[int] = []
            for group in taken:
                covered = set().union(*(_groups(c, clusters[i]) for i in picked))
                if len(picked) < cap and group not in covered:
                    picked.append(next(i for i in usable if group in _groups(c, clusters[i])))
            usable = picked + [i for i in usable if i not in picked][: cap - len(picked)]
    elif cap is not None:
        usable = usable[:cap]
    if per_cluster and len(usable) < per_cluster[0].min_groups:
        noun = "cluster" if len(usable) == 1 else "clusters"
        return [], (
            f"spread by cluster: {len(usable)} {noun} can be used, need {per_cluster[0].describe()}"
        )
    return sorted(usable), ""


def _spans(
    view: Workload, clusters: tuple[Cluster, ...], assignment: list[tuple[int, int]], kind: str
) -> str:
    """Why the replicas span too few groups, or ""."""
    used = [i for i, r in assignment if r > 0]
    for c in view.placement.spread_constraints if used else ():
        spanned = set().union(*(_groups(c, clusters[i]) for i in used))
        if len(spanned) < c.min_groups:
            noun = c.field if len(spanned) == 1 else f"{c.field}s"
            return f"{kind} division put the replicas on {len(spanned)} {noun}, need {c.describe()}"
    return ""


def _attempt(
    ctx: PlacementContext,
    plugins: _Plugins,
    view: Workload,
    excluded: Collection[str],
    static: dict[str, list[FilterResult]],
    notes: list[str],
) -> tuple[list[tuple[int, int]], str]:
    """(cluster index, replicas) for one affinity term, or the failure text.

    ``static`` holds every static filter's answer per cluster for this view (by plugin name);
    a division note, if any, is appended to ``notes``.
    """
    clusters = ctx.clusters
    candidates = [
        i
        for i, c in enumerate(clusters)
        if c.name not in excluded and all(answers[i].fits for answers in static.values())
    ]
    if not candidates:
        return [], "no feasible cluster"
    policy = view.placement
    kind = policy.replica_scheduling.type
    weighted = kind == "Weighted" and bool(policy.replica_scheduling.weights)

    def eligible(i: int) -> bool:
        weight, low, high = _weight(view, clusters[i])
        return (weight > 0 or low > 0) and high != 0

    if weighted and not any(eligible(i) for i in candidates):
        weighted = False
        view = dataclasses.replace(
            view,
            placement=dataclasses.replace(policy, replica_scheduling=ReplicaScheduling("Weighted")),
        )
        notes.append(division.EQUAL_WEIGHTS_NOTE)

    fitting = [
        i
        for i in candidates
        if all(p.filter(ctx, view, clusters[i]).fits for p in plugins.dynamic)
        and (not weighted or eligible(i))
    ]
    totals = {
        i: sum(p.weight * p.score(ctx, view, clusters[i]) for p in plugins.scorers) for i in fitting
    }
    ranked = sorted(fitting, key=lambda i: (-totals[i], i))
    limit = policy.max_clusters
    chosen = sorted(ranked if limit is None else ranked[:limit])
    if not chosen:
        return [], "no feasible cluster"
    if policy.spread_constraints:
        chosen, failure = _spread(view, clusters, ranked)
        if failure:
            return [], failure
    if kind == "Duplicated":
        duplicated = [(i, view.replicas) for i in chosen]
        failure = _spans(view, clusters, duplicated, kind)
        return ([], failure) if failure else (duplicated, "")
    scores = [totals[i] for i in chosen]
    rooms = [ctx.replicas_fitting(i, view) for i in chosen]
    if kind == "Dynamic":
        allocation = plain_dynamic(view.replicas, scores, rooms)
    elif kind == "Aggregated":
        current = set(policy.clusters)
        in_use = [p for p, i in enumerate(chosen) if clusters[i].name in current]
        allocation = plain_aggregated(view.replicas, scores, rooms, in_use)
    else:
        triples = [_weight(view, clusters[i]) for i in chosen]
        allocation = plain_weighted(
            view.replicas,
            scores,
            [t[0] for t in triples],
            rooms,
            [t[1] for t in triples],
            [t[2] for t in triples],
        )
    if allocation.complete:
        assignment = [(chosen[p], r) for p, r in sorted(allocation.replicas.items()) if r > 0]
        failure = _spans(view, clusters, assignment, kind)
        return ([], failure) if failure else (assignment, "")
    placed = view.replicas - allocation.unplaced
    why = "capacity, maxReplicas or weights" if kind == "Weighted" else "capacity"
    return [], (
        f"{kind} division placed only {placed} of {view.replicas} replicas on the "
        f"{len(chosen)} feasible cluster(s) (limited by {why})"
    )


def reference_place(
    snapshot: FleetSnapshot,
    *,
    exclude_clusters: Collection[str] = frozenset(),
    registry: Registry = DEFAULT_REGISTRY,
    now: datetime | None = None,
) -> list[RefDecision]:
    """Decisions for every workload of the snapshot, in ``namespace/name`` order."""
    ctx = PlacementContext(snapshot, now=now)
    clusters = ctx.clusters
    plugins = _Plugins(registry)
    out: list[RefDecision] = []
    for workload in sorted(snapshot.workloads, key=lambda w: w.key):
        terms = workload.placement.affinities
        # view, label, failure, every static filter's answer per cluster
        attempts: list[tuple[Workload, str, str, dict[str, list[FilterResult]]]] = []
        assignment: list[tuple[int, int]] = []
        notes: list[str] = []
        for t in range(max(1, len(terms))):
            notes.clear()
            view = workload
            label = ""
            if len(terms) > 1:
                view = dataclasses.replace(
                    workload,
                    placement=dataclasses.replace(workload.placement, affinities=(terms[t],)),
                )
                label = terms[t].name or f"#{t}"
            static = {p.name: [p.filter(ctx, view, c) for c in clusters] for p in plugins.static}
            assignment, failure = _attempt(ctx, plugins, view, exclude_clusters, static, notes)
            attempts.append((view, label, failure, static))
            if not failure:
                break
        placed = not attempts[-1][2]
        chosen = {clusters[i].name for i, _ in assignment}
        # Reasons with the capacity this workload saw: before it consumes any.
        reasons: dict[str, tuple[str, ...]] = {}
        for i, c in enumerate(clusters):
            if c.name in exclude_clusters:
                reasons[c.name] = (EXCLUDED,)
                continue
            if c.name in chosen:
                continue
            found: list[str] = []
            governing = None
            for attempt in attempts:
                view, label, _, static = attempt
                term_reasons = [r for p in plugins.term for r in static[p.name][i].reasons]
                if not term_reasons:
                    governing = attempt
                    break
                found += [(f"affinity {label}: " if label else "") + r for r in term_reasons]
            view, _, failure, static = governing or attempts[0]
            found += [r for p in plugins.plain for r in static[p.name][i].reasons]
            if governing is not None and not found:
                found += [r for p in plugins.dynamic for r in p.filter(ctx, view, c).reasons]
                if not found and failure:
                    found.append(failure)
            if found:
                reasons[c.name] = tuple(dict.fromkeys(found))
        view, _, _, static = attempts[-1] if placed else attempts[0]
        rows = []
        for i, c in enumerate(clusters):
            if c.name in exclude_clusters or not all(a[i].fits for a in static.values()):
                continue
            if not all(p.filter(ctx, view, c).fits for p in plugins.dynamic):
                continue
            answers = tuple((p.name, p.score(ctx, view, c)) for p in plugins.scorers)
            total = sum(p.weight * a for p, (_, a) in zip(plugins.scorers, answers, strict=True))
            rows.append((-total, i, (c.name, total, answers)))
        scores = tuple(row[2] for row in sorted(rows))
        if placed:
            view = attempts[-1][0]
            req = view.requests
            for i, replicas in assignment:
                if ctx.known[i]:
                    extra = replicas - credited_replicas(view, clusters[i].name)
                    if extra > 0:
                        ctx.free_cpu[i] -= extra * req.cpu_milli
                        ctx.free_mem[i] -= extra * req.memory_bytes
        current = set(workload.placement.clusters)
        evict_at: list[tuple[str, str]] = []
        for i, _ in assignment if placed else ():
            bound = eviction_time(clusters[i].taints, workload.placement.tolerations)
            if bound is not None:
                until, seconds = bound
                evict_at.append(
                    (
                        clusters[i].name,
                        format_time(until)
                        if until
                        else f"{seconds}s after the taint was added (no timeAdded recorded)",
                    )
                )
        out.append(
            RefDecision(
                workload=workload.key,
                clusters=tuple((clusters[i].name, r) for i, r in assignment) if placed else (),
                unschedulable=not placed,
                reasons=reasons,
                evicted=tuple(sorted(current - chosen)),
                affinity=(attempts[-1][1] or None) if placed else None,
                division_note=notes[0] if placed and notes else "",
                evict_at=tuple(evict_at),
                scores=scores,
            )
        )
    return out
