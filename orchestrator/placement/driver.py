"""The division driver: from a workload's feasible clusters to replicas per cluster.

It picks the clusters division may use (the ``maxClusters`` best through ``topk``, else every
cluster that passes the dynamic filters, minus those a weight list leaves out; for a workload with
spread constraints, the groups and clusters ``spread.select`` picks), hands their
scores and rooms to ``division`` (the apportionment rules themselves), and turns the outcome into
(cluster index, replicas) pairs or a failure text for the decision's explanation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from orchestrator.domain.snapshot import Workload
from orchestrator.placement import division, spread, stable
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.profiles import Profile
from orchestrator.placement.topk import TopK


class Ranking(Protocol):
    """What division draws on of the scheduler (``scheduler.Scheduler``, which is one).

    Declared here, not imported from the scheduler: the scheduler calls ``divide`` with itself,
    so only it imports the other module (the import-linter contract on
    ``orchestrator.placement`` keeps it that way).
    """

    ctx: PlacementContext
    names: list[str]  # cluster names by index, sorted
    topk: TopK

    def dynamic_candidates(self, view: Workload, candidates: list[int]) -> list[int]:
        """Those of ``candidates`` the dynamic (capacity) filters admit."""
        ...

    def current_bonus(
        self, profile: Profile, view: Workload, current: Sequence[int]
    ) -> dict[int, int]:
        """Static score change on clusters where the workload runs now."""
        ...

    def totals(
        self, view: Workload, indices: list[int], base: list[int], bonus: dict[int, int]
    ) -> list[int]:
        """Exact weighted total score of each index."""
        ...


Triples = list[tuple[int, int, int | None]]  # Weighted: (weight, minReplicas, maxReplicas)
# Weighted without a weight list: every cluster weighs 1, with no floor and no cap.
UNWEIGHTED = (1, 0, None)


def divide(
    scheduler: Ranking,
    view: Workload,
    profile: Profile,
    *,
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
    # Recorded current counts: re-placement scales from them (``stable``), else from scratch.
    counts = policy.current()
    scores: Sequence[int]
    constraints = policy.spread_constraints
    if constraints:
        # Spreading needs every feasible cluster's total (groups rank by their best cluster).
        chosen = scheduler.dynamic_candidates(view, candidates)
        if not chosen:
            return [], "no feasible cluster"
        bonus = scheduler.current_bonus(profile, view, current)
        totals = scheduler.totals(view, chosen, profile.base, bonus)
        by_index = dict(zip(chosen, totals, strict=True))
        chosen, failure = spread.select(constraints, scheduler.ctx.clusters, chosen, totals, limit)
        if failure:
            return [], failure
        scores = [by_index[i] for i in chosen]
    elif limit is not None and len(candidates) > limit:
        best = scheduler.topk.top(
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
        kept = kept_whole(scheduler, view, profile, members, counts) if counts else None
        if kept is not None:
            return kept, ""
        chosen = scheduler.dynamic_candidates(view, candidates)
        if weighting is not None:
            eligible = weighting.eligible
            chosen = [i for i in chosen if eligible[i]]
        scores = LazyScores(scheduler, view, profile, chosen, current)
    if not chosen:
        return [], "no feasible cluster"
    if kind == "Duplicated":
        duplicated = [(i, replicas) for i in chosen]
        if constraints:
            failure = spread.coverage_failure(constraints, scheduler.ctx.clusters, duplicated, kind)
            if failure:
                return [], failure
        return duplicated, ""
    rooms = scheduler.ctx.rooms(view, chosen)
    triples: Triples = []  # Weighted only
    if kind == "Weighted":
        triples = (
            [weighting.triples[i] for i in chosen]
            if weighting is not None
            else [UNWEIGHTED] * len(chosen)
        )
    held = stable.kept_positions(counts, scheduler.names, chosen) if counts else None
    allocation = (
        _from_current(
            kind, replicas, scores, rooms, held=held, triples=triples, observed=view.policy_observed
        )
        if held
        else None
    )
    if allocation is not None and allocation.complete and constraints:
        kept = [(chosen[p], r) for p, r in allocation.replicas.items()]
        if spread.coverage_failure(constraints, scheduler.ctx.clusters, kept, kind):
            # Scaled from the current assignment, the replicas span too few groups (a spread
            # added or raised): that no longer meets the policy, so divide from scratch.
            allocation = None
    if allocation is None:
        allocation = _from_scratch(
            kind, replicas, scores, rooms, triples=triples, chosen=chosen, current=current
        )
    assignment = [(chosen[p], r) for p, r in sorted(allocation.replicas.items()) if r > 0]
    if allocation.complete:
        if constraints:
            failure = spread.coverage_failure(constraints, scheduler.ctx.clusters, assignment, kind)
            if failure:
                return [], failure
        return assignment, ""
    placed = replicas - allocation.unplaced
    why = "capacity, maxReplicas or weights" if kind == "Weighted" else "capacity"
    return [], (
        f"{kind} division placed only {placed} of {replicas} replicas on the "
        f"{len(chosen)} feasible cluster(s) (limited by {why})"
    )


def kept_whole(
    scheduler: Ranking,
    view: Workload,
    profile: Profile,
    members: frozenset[int],
    counts: dict[str, int],
) -> list[tuple[int, int]] | None:
    """The current assignment unchanged, told from its own clusters alone (None: divide).

    Re-placement after a step asks every workload the cluster could host, and nearly all of them
    keep every replica where it runs. ``divide`` would find that out by filtering and sizing every
    feasible cluster first, which made each step cost workloads x clusters (1.75 CPU s per
    cluster-step at 300 clusters, docs/benchmarks.md). For a divided workload outside
    ``maxClusters`` and spreads, the stable rules (``stable``) keep the current counts exactly
    when every cluster holding replicas is still feasible, takes part in the division and has
    room for what it holds, and the counts add up to the replicas: then no other cluster can
    change the outcome. Weighted adds two conditions that are about the used clusters only:
    ``maxReplicas`` not below a count, and, unless the counts were decided under this very
    policy, counts that are a Webster apportionment of the weights. A weight list with any
    ``minReplicas`` is left to ``divide``: a floor on an unused cluster would move replicas.
    ``tests/orchestrator/placement/test_kept_whole.py`` holds it to the full path's answers.
    """
    kind = view.placement.replica_scheduling.type
    weighting = profile.weighting
    if kind == "Duplicated" or (weighting is not None and weighting.floors):
        return None
    index = scheduler.ctx.index
    held: list[tuple[int, int]] = []
    total = 0
    for name, replicas in counts.items():
        if replicas <= 0:
            continue
        i = index.get(name, -1)
        if i not in members or (weighting is not None and not weighting.eligible[i]):
            return None
        held.append((i, replicas))
        total += replicas
    if total != view.replicas or not held:
        return None
    held.sort()
    indices = [i for i, _ in held]
    if len(scheduler.dynamic_candidates(view, indices)) != len(indices):
        return None
    rooms = scheduler.ctx.rooms(view, indices)
    weights: list[int] = []
    if kind == "Weighted":
        triples = (
            [weighting.triples[i] for i in indices]
            if weighting is not None
            else [UNWEIGHTED] * len(indices)
        )
        rooms = [stable.capped_room(room, t[2]) for room, t in zip(rooms, triples, strict=True)]
        weights = [t[0] for t in triples]
    if any(room is not None and room < r for room, (_, r) in zip(rooms, held, strict=True)):
        return None
    if (
        weights
        and not view.policy_observed
        and not stable.webster_consistent(
            {p: r for p, (_, r) in enumerate(held)}, weights, rooms, [0] * len(held)
        )
    ):
        return None
    return held


def _from_current(
    kind: str,
    replicas: int,
    scores: Sequence[int],
    rooms: Sequence[int | None],
    *,
    held: dict[int, int],
    triples: Triples,
    observed: bool,
) -> division.Allocation | None:
    """Division that scales the current assignment (None: nothing kept, divide from scratch)."""
    if kind == "Dynamic":
        return stable.dynamic(replicas, scores, rooms, held)
    if kind == "Aggregated":
        return stable.aggregated(replicas, scores, rooms, held)
    return stable.weighted(
        replicas,
        scores,
        [t[0] for t in triples],
        rooms,
        held,
        mins=[t[1] for t in triples],
        maxs=[t[2] for t in triples],
        observed=observed,
    )


def _from_scratch(
    kind: str,
    replicas: int,
    scores: Sequence[int],
    rooms: Sequence[int | None],
    *,
    triples: Triples,
    chosen: list[int],
    current: list[int],
) -> division.Allocation:
    """Division by the mode's own rule (first placement, or no usable current assignment)."""
    if kind == "Dynamic":
        return division.dynamic(replicas, scores, rooms, None)
    if kind == "Aggregated":
        in_use = frozenset(current)
        return division.aggregated(
            replicas, scores, rooms, [p for p, i in enumerate(chosen) if i in in_use]
        )
    return division.weighted(
        replicas,
        scores,
        [t[0] for t in triples],
        rooms,
        mins=[t[1] for t in triples],
        maxs=[t[2] for t in triples],
    )


class LazyScores(Sequence[int]):
    """Totals of the candidates, computed (batched) only if division asks for them.

    Through ``at`` (see ``division.scores_at``) only the totals asked for are computed.
    """

    __slots__ = ("_args", "_data", "_scheduler")

    def __init__(
        self,
        scheduler: Ranking,
        view: Workload,
        profile: Profile,
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
