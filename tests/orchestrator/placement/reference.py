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
* NoExecute tolerations with ``tolerationSeconds`` end at ``now`` when given; chosen clusters
  that such a toleration holds are listed with their eviction time;
* reasons: every rejected cluster with every reason, with the capacity the workload saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import datetime

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
    if kind == "Duplicated":
        return [(i, view.replicas) for i in chosen], ""
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
        return [(chosen[p], r) for p, r in sorted(allocation.replicas.items()) if r > 0], ""
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
            )
        )
    return out
