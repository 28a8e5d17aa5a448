"""Spread constraints: which feasible clusters a workload uses so that it spans enough groups.

A spread by region (zone, provider) groups the feasible clusters by that field; a spread by
cluster counts clusters. The rules, in the order they apply (docs/decisions.md "Spread
constraints" says where they differ from Karmada's):

1. Rank the feasible clusters by total score, then name (the ``maxClusters`` order).
2. Groups: walk the ranking and take each cluster's groups while the union stays within
   ``maxGroups`` (all groups when there is no cap). Groups are thereby ranked by their best
   cluster. Fewer than ``minGroups`` groups: the attempt fails, saying how many there are.
3. Usable clusters: those whose every group was taken (a cluster spanning zones a and b is
   usable only when both were taken, so it cannot widen the spread past ``maxGroups``).
4. Cluster cap (``maxClusters`` or the cluster spread's ``maxGroups``): first the best usable
   cluster of each group not yet covered, best group first, then the rest by rank.
5. A cluster spread's ``minGroups``: fewer usable clusters than that fails the attempt.
6. After division, the clusters that got replicas must still span ``minGroups`` of each
   constraint (a divided workload with fewer replicas than groups cannot), else it fails.

Everything here is per workload over its feasible clusters; the scheduler calls it only for
workloads with spread constraints, so other workloads pay nothing for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.domain.location import PLURAL, SpreadConstraint, SpreadField, groups_of
from orchestrator.domain.snapshot import Cluster


def _count(n: int, field: SpreadField) -> str:
    return f"{n} {field if n == 1 else PLURAL[field]}"


def _split(
    constraints: Sequence[SpreadConstraint],
) -> tuple[SpreadConstraint | None, SpreadConstraint | None]:
    """(the region/zone/provider constraint, the cluster constraint), each None if absent."""
    located = per_cluster = None
    for c in constraints:
        if c.field == "cluster":
            per_cluster = c
        else:
            located = c
    return located, per_cluster


def select(
    constraints: Sequence[SpreadConstraint],
    clusters: Sequence[Cluster],
    indices: Sequence[int],
    totals: Sequence[int],
    max_clusters: int | None,
) -> tuple[list[int], str]:
    """The clusters to divide over (ascending indices), or "" and why it cannot be done.

    ``indices`` are the feasible clusters (indices into ``clusters``), ``totals`` their scores.
    """
    ranked = [i for _, i in sorted(zip((-t for t in totals), indices, strict=True))]
    located, per_cluster = _split(constraints)
    cap = max_clusters
    if per_cluster is not None and per_cluster.max_groups is not None:
        cap = per_cluster.max_groups
    usable = ranked
    if located is not None:
        field = located.field
        groups = {i: groups_of(field, clusters[i].name, clusters[i].location) for i in ranked}
        taken: dict[str, None] = {}  # insertion-ordered: best group first
        for i in ranked:
            new = [g for g in groups[i] if g not in taken]
            if located.max_groups is None or len(taken) + len(new) <= located.max_groups:
                taken.update(dict.fromkeys(new))
        if len(taken) < located.min_groups:
            return [], (
                f"spread by {field}: the feasible clusters span {_count(len(taken), field)}, "
                f"need {located.describe()}"
            )
        usable = [i for i in ranked if all(g in taken for g in groups[i])]
        if cap is not None and len(usable) > cap:
            picked: list[int] = []
            covered: set[str] = set()
            for group in taken:
                if len(picked) >= cap:
                    break
                if group not in covered:
                    best = next(i for i in usable if group in groups[i] and i not in picked)
                    picked.append(best)
                    covered.update(groups[best])
            chosen = set(picked)
            picked += [i for i in usable if i not in chosen][: cap - len(picked)]
            usable = picked
    elif cap is not None:
        usable = ranked[:cap]
    if per_cluster is not None and len(usable) < per_cluster.min_groups:
        return [], (
            f"spread by cluster: {_count(len(usable), 'cluster')} can be used, "
            f"need {per_cluster.describe()}"
        )
    return sorted(usable), ""


def coverage_failure(
    constraints: Sequence[SpreadConstraint],
    clusters: Sequence[Cluster],
    assignment: Sequence[tuple[int, int]],
    kind: str,
) -> str:
    """Why the divided replicas span too few groups ("" when they span enough).

    Only clusters that got replicas count; a workload of 0 replicas spans nothing and needs not.
    """
    used = [i for i, replicas in assignment if replicas > 0]
    if not used:
        return ""
    for c in constraints:
        spanned: set[str] = set()
        for i in used:
            spanned.update(groups_of(c.field, clusters[i].name, clusters[i].location))
        if len(spanned) < c.min_groups:
            return (
                f"{kind} division put the replicas on {_count(len(spanned), c.field)}, "
                f"need {c.describe()}"
            )
    return ""
