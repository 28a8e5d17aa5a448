"""The division driver: from a workload's feasible clusters to replicas per cluster.

It picks the clusters division may use (the ``maxClusters`` best through ``topk``, else every
cluster that passes the dynamic filters, minus those a weight list leaves out), hands their
scores and rooms to ``division`` (the apportionment rules themselves), and turns the outcome into
(cluster index, replicas) pairs or a failure text for the decision's explanation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from orchestrator.domain.snapshot import Workload
from orchestrator.placement import division, stable
from orchestrator.placement.profiles import Profile

if TYPE_CHECKING:
    from orchestrator.placement.scheduler import Scheduler


def divide(
    scheduler: Scheduler,
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
    scores: Sequence[int]
    if limit is not None and len(candidates) > limit:
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
        chosen = scheduler.dynamic_candidates(view, candidates)
        if weighting is not None:
            eligible = weighting.eligible
            chosen = [i for i in chosen if eligible[i]]
        scores = LazyScores(scheduler, view, profile, chosen, current)
    if not chosen:
        return [], "no feasible cluster"
    if kind == "Duplicated":
        return [(i, replicas) for i in chosen], ""
    rooms = scheduler.ctx.rooms(view, chosen)
    # Recorded current counts: re-placement scales from them (``stable``), else from scratch.
    counts = view.placement.current()
    held = stable.kept_positions(counts, scheduler.names, chosen) if counts else None
    allocation: division.Allocation | None = None
    if kind == "Dynamic":
        if held:
            allocation = stable.dynamic(replicas, scores, rooms, held)
        if allocation is None:
            allocation = division.dynamic(replicas, scores, rooms, None)
    elif kind == "Aggregated":
        if held:
            allocation = stable.aggregated(replicas, scores, rooms, held)
        if allocation is None:
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
        weights = [t[0] for t in triples]
        mins = [t[1] for t in triples]
        maxs = [t[2] for t in triples]
        if held:
            allocation = stable.weighted(
                replicas, scores, weights, rooms, held, mins=mins, maxs=maxs
            )
        if allocation is None:
            allocation = division.weighted(replicas, scores, weights, rooms, mins=mins, maxs=maxs)
    assignment = [(chosen[p], r) for p, r in sorted(allocation.replicas.items()) if r > 0]
    if allocation.complete:
        return assignment, ""
    placed = replicas - allocation.unplaced
    why = "capacity, maxReplicas or weights" if kind == "Weighted" else "capacity"
    return [], (
        f"{kind} division placed only {placed} of {replicas} replicas on the "
        f"{len(chosen)} feasible cluster(s) (limited by {why})"
    )


class LazyScores(Sequence[int]):
    """Totals of the candidates, computed (batched) only if division asks for them.

    Through ``at`` (see ``division.scores_at``) only the totals asked for are computed.
    """

    __slots__ = ("_args", "_data", "_scheduler")

    def __init__(
        self,
        scheduler: Scheduler,
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
