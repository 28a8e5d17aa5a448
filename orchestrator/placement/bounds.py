"""The bound index: per bound class, the clusters ordered by an upper bound on their dynamic score.

A workload that needs only its ``maxClusters`` best clusters out of hundreds (``topk``) walks
these orders best bound first and stops once no cluster left can beat what it has, so it scores
a dozen clusters instead of every feasible one. Capacity consumed by each placement lowers the
bounds of the clusters that took it; ``refresh`` moves a cluster in its order only when its bound
changed noticeably, so the many small placements do not reshuffle anything.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Hashable

from orchestrator.domain.snapshot import Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.equivalence import selectors
from orchestrator.placement.fastpath import BoundedScore
from orchestrator.placement.framework import MAX_SCORE, ScorePlugin
from orchestrator.placement.profiles import Profile

# Added to every bound so that float rounding in a plugin's bound never prunes a cluster.
BOUND_SLACK = 1e-9
# Past this many clusters in one assignment, re-sorting their bound classes beats moving each.
REORDER_LIMIT = 24
# How far a cluster's bound may fall below the one it is ordered by before it is moved.
ORDER_SLACK = 1.0


class BoundIndex:
    """Bounds of every cluster and, per bound class, the clusters ordered by them."""

    def __init__(self, ctx: PlacementContext, dynamic_scores: list[ScorePlugin]) -> None:
        self.ctx = ctx
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
        # -bound ascending and ``order`` the cluster indices, in step (see ``refresh``).
        self.class_members: list[list[int]] = [[] for _ in class_keys]
        for i, k in enumerate(self.class_of):
            self.class_members[k].append(i)
        self.held = list(self.ub)
        self.order_keys: list[list[float]] = [[] for _ in class_keys]
        self.order: list[list[int]] = [[] for _ in class_keys]
        for k in range(self.class_count):
            self._sort_class(k)

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

    def refresh(self, indices: list[int]) -> None:
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

    def pool_bound(self, profile: Profile) -> float:
        """At least the total of any pool cluster outside the current placement."""
        class_base = self.class_base(profile)
        keys = self.order_keys
        return (
            max((top_base - keys[k][0] for k, top_base in class_base), default=-math.inf)
            + BOUND_SLACK
        )

    def class_base(self, profile: Profile) -> list[tuple[int, int]]:
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

    def discounts(self, view: Workload) -> list[float]:
        """Per bound class, how far the workload's dynamic score stays below the bound."""
        if len(self.bounded) == 1 and self.bounded[0][0] == 1:
            return self.bounded[0][1].discounts(self.ctx, view, self.class_parts[0])
        discount = [0.0] * self.class_count
        for (w, plugin), parts in zip(self.bounded, self.class_parts, strict=True):
            for k, d in enumerate(plugin.discounts(self.ctx, view, parts)):
                discount[k] += w * d
        return discount
