"""Profiles: what the workloads with equal static keys share, built once per distinct key.

A workload's static filters and scores (labels, taints, APIs, latency, weights) depend only on a
few of its parts, and a generated fleet of 10,000 workloads has about 2,000 distinct
combinations. The ``ProfileCache`` finds a workload's profile by the *identity* of those parts
first (machine-int ids; equal parts of a parsed snapshot are one object) and by their value only
on a miss, so that looking a profile up costs a tuple of ids, not a hash of nested dataclasses.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Sequence
from typing import cast

from orchestrator.domain.snapshot import Cluster, ClusterAffinity, StaticWeight, Workload
from orchestrator.placement import division
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.equivalence import Entry, FilterTable, ScoreTable, bits, mask_of
from orchestrator.placement.fastpath import WorkloadKeyed
from orchestrator.placement.framework import WORKLOAD_FACT_PATHS, FilterResult


class Weighting:
    """Weighted division's (weight, minReplicas, maxReplicas) of every cluster for one list."""

    __slots__ = ("eligible", "floors", "mask", "triples")

    def __init__(self, triples: list[tuple[int, int, int | None]]) -> None:
        self.triples = triples
        # Some cluster has a minReplicas: a kept assignment must then be checked against every
        # cluster's floor, not only the ones it uses (``driver.kept_whole`` leaves it alone).
        self.floors = any(low > 0 for _, low, _ in triples)
        # A cluster takes part only with a weight (or minReplicas) and room under maxReplicas.
        self.eligible = [(w > 0 or low > 0) and high != 0 for w, low, high in triples]
        self.mask = mask_of(self.eligible)


class Profile:
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
        weighting: Weighting | None,
        *,
        same_statics: Profile | None = None,
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


def parts_getter(paths: Sequence[str]) -> Callable[[Workload], tuple[object, ...]]:
    """A getter of the objects at ``paths`` (dotted attributes), always as a tuple."""
    if not paths:
        return _no_parts
    getter = operator.attrgetter(*paths)
    if len(paths) == 1:
        return lambda v: (getter(v),)
    return cast(Callable[[Workload], tuple[object, ...]], getter)


def _no_parts(view: Workload) -> tuple[object, ...]:
    return ()


def weights_key(view: Workload) -> Hashable:
    """The Weighted division's weights (part of the profile key), else None."""
    scheduling = view.placement.replica_scheduling
    return scheduling.weights if scheduling.type == "Weighted" and scheduling.weights else None


class ProfileCache:
    """Profiles of one run, by the identity and by the value of a workload's static parts."""

    def __init__(
        self,
        ctx: PlacementContext,
        static_filters: list[FilterTable],
        static_scores: list[ScoreTable],
        allowed: int,
    ) -> None:
        self.ctx = ctx
        self.static_filters = static_filters
        self.static_scores = static_scores
        self.allowed = allowed
        # One key per workload view covers every static table and the Weighted division's
        # weights: the union of the tables' declared facts (read by one attrgetter), the keys of
        # tables that define their own, and the weights.
        tables: list[FilterTable | ScoreTable] = [*static_filters, *static_scores]
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
            self.profile_key = lambda v: (facts(v), only(v), weights_key(v))
        else:
            self.profile_key = lambda v: (facts(v), *[k(v) for k in own], weights_key(v))
        self.profiles: dict[Hashable, Profile] = {}
        # In front of that, profiles by the *identity* of the objects those keys are made of:
        # ids hash and compare as machine ints, where the key above hashes nested dataclasses.
        # A table's own key is worked out once per distinct set of fact objects and interned to
        # a small int (``_tokens``). Equal parts of a parsed snapshot are one object (see
        # ``snapshot_from_mapping``), so this level misses about once per profile; equal parts
        # that are distinct objects only cost a miss. Every object whose id is part of a key is
        # kept (``_alive``, ``_own``), so no id can be reused by another object during the run.
        self._plain = parts_getter(paths)
        self._own = [
            (
                parts_getter(
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
        self.by_identity: dict[tuple[int, ...], Profile] = {}
        self._alive: list[tuple[object, ...]] = []
        self._single_terms: dict[int, tuple[object, tuple[tuple[ClusterAffinity], ...]]] = {}
        self._scores: dict[Hashable, tuple[list[Entry[int]], list[int]]] = {}
        self._weightings: dict[Hashable, Weighting] = {}
        classes: dict[Hashable, int] = {}
        self.label_class = [
            classes.setdefault(tuple(sorted(c.labels.items())), len(classes)) for c in ctx.clusters
        ]
        self.label_reps = [self.label_class.index(c) for c in range(len(classes))]

    def profile(self, view: Workload) -> Profile:
        """The profile of the view's static keys, built on first use (see ``by_identity``)."""
        parts = (*self._plain(view), weights_key(view))
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

    def _new_profile(self, key: tuple[Hashable, ...], view: Workload) -> Profile:
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
            return Profile(
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
        return Profile(mask, entries, *scores, None)

    def _weighting(self, entries: Sequence[StaticWeight]) -> Weighting:
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
        return Weighting(triples)
