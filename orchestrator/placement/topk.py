"""Top-k search: a workload's ``maxClusters`` best feasible clusters, scoring as few as possible.

Small pools are scored outright (``direct``); large ones use a threshold algorithm over the
``BoundIndex`` orders (``top``). Dynamic plugins are asked through per-workload kernels
(``fastpath.FilterKernel`` / ``ScoreKernel``, or their batch and plain methods wrapped as such).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import itertools
from collections.abc import Callable, Sequence

from orchestrator.domain.snapshot import Workload
from orchestrator.placement.bounds import BOUND_SLACK, BoundIndex
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.fastpath import (
    BatchFilter,
    BatchScore,
    FilterKernel,
    Kernel,
    ScoreKernel,
    ScoreKernelFn,
)
from orchestrator.placement.framework import FilterPlugin, ScorePlugin
from orchestrator.placement.profiles import Profile

# Up to this many feasible clusters, scoring all beats walking the bound order (measured).
DIRECT_LIMIT = 96
# How many of the best-bound pool clusters the threshold algorithm scores first.
PROBE = 4
# How many clusters the threshold algorithm scores at a time after that.
CHUNK = 8

# Static score change of a workload on its current clusters (see ``Scheduler.current_bonus``).
BonusFn = Callable[[Profile, Workload, Sequence[int]], dict[int, int]]


class TopK:
    """Ranks the feasible clusters of one run's workloads (dynamic plugins through kernels)."""

    def __init__(
        self,
        ctx: PlacementContext,
        bounds: BoundIndex,
        dynamic_filters: Sequence[FilterPlugin],
        dynamic_scores: Sequence[ScorePlugin],
        bonus: BonusFn,
    ) -> None:
        self.ctx = ctx
        self.bounds = bounds
        self.bonus = bonus
        self.filter_kernels = [
            (p, p.filter_kernel if isinstance(p, FilterKernel) else None) for p in dynamic_filters
        ]
        self.score_kernels = [
            (p, p.weight, p.score_kernel if isinstance(p, ScoreKernel) else None)
            for p in dynamic_scores
        ]

    def kernels(self, view: Workload) -> tuple[list[Kernel], list[tuple[int, ScoreKernelFn]]]:
        """The dynamic plugins as per-workload functions over cluster indices."""
        ctx = self.ctx
        fits: list[Kernel] = []
        for plugin, kernel in self.filter_kernels:
            fits.append(
                kernel(ctx, view) if kernel is not None else filter_kernel_of(ctx, plugin, view)
            )
        scores: list[tuple[int, ScoreKernelFn]] = []
        for scorer, weight, score_kernel in self.score_kernels:
            scores.append(
                (
                    weight,
                    score_kernel(ctx, view)
                    if score_kernel is not None
                    else score_kernel_of(ctx, scorer, view),
                )
            )
        return fits, scores

    def top(
        self,
        view: Workload,
        *,
        profile: Profile,
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
        fits, scores = self.kernels(view)
        first = (
            [i for i in current if i in members and (weighting is None or weighting.eligible[i])]
            if current
            else []
        )
        bonus = self.bonus(profile, view, first) if first else {}
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
                if best[-1][0] > self.bounds.pool_bound(profile):
                    return [(-negative_i, total) for total, negative_i in best]
        if len(candidates) <= DIRECT_LIMIT:
            return self.direct(
                profile, fits, scores, current=current, first=first, bonus=bonus, limit=limit
            )
        skip = frozenset(current)
        discount = self.bounds.discounts(view)
        class_base = self.bounds.class_base(profile)
        selected = profile.selected
        classes = []
        for k, top_base in class_base:
            # The class's best bound, pool member or not: cheap, and still a bound.
            slack = top_base - discount[k] + BOUND_SLACK
            classes.append((self.bounds.order_keys[k][0] - slack, slack, top_base, k))
        classes.sort()
        # ``best`` becomes a min-heap of the ``limit`` best so far: its root is the one to beat.
        if len(best) > limit:
            best = heapq.nlargest(limit, best)
        heapq.heapify(best)
        seen = set(skip)
        if len(best) < limit:
            chunk = max(limit - len(best), PROBE)
            for _, _, _, k in classes:
                members_k = filter(selected.__getitem__, self.bounds.order[k])
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
            ub = self.bounds.ub
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
                order = self.bounds.order[k]
                cut = (
                    bisect.bisect_right(self.bounds.order_keys[k], slack - worst)
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

    def direct(
        self,
        profile: Profile,
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


def filter_kernel_of(ctx: PlacementContext, plugin: FilterPlugin, view: Workload) -> Kernel:
    """A kernel from a plugin without one: its batch method, or ``filter`` per cluster."""
    if isinstance(plugin, BatchFilter):
        return functools.partial(plugin.filter_batch, ctx, view)
    clusters = ctx.clusters
    return lambda indices: [i for i in indices if plugin.filter(ctx, view, clusters[i]).fits]


def score_kernel_of(ctx: PlacementContext, plugin: ScorePlugin, view: Workload) -> ScoreKernelFn:
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
