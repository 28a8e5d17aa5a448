"""Why a decision is what it is: per-cluster reasons on demand, their summary by default.

Both are worked out lazily, after the run, with the free capacity the workload saw.

``reasons`` (``explain``) walks every cluster: for each one, the term filters of each affinity
term tried (until one admits it, prefixed with the term's name when there are several), the other
static filters, and, for a cluster nothing static rejected, the dynamic filters and the failure of
the term's division. That is workloads x clusters strings, so only ``--explain`` and
``--workload`` ask for it.

``summary`` (``Explainer.summary``) gives the same reasons counted per reason, without building
them per cluster. The answers of a static filter are per equivalence class, so each cache entry
is turned once into one bitmask of clusters per (summarised) reason; a workload's counts are then
a few mask intersections and ``int.bit_count`` calls. What is not per class is done exactly: the
dynamic filters run as one kernel over the clusters every static filter admits (at the
capacity the workload saw, replayed from the run's ledger), and clusters where the workload runs
now are explained one by one. ``tests/orchestrator/placement/test_explain.py`` holds the summary
to the aggregate of ``explain``.

``scores`` (``--explain`` too) gives every feasible cluster's score per score plugin and in
total, from the same tables and kernels the scheduler ranked with, at the capacity the workload
saw: ties and preferences become visible without re-running anything.
"""

from __future__ import annotations

import bisect
import copy
import itertools
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from orchestrator.domain.snapshot import Workload
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.equivalence import Entry, FilterTable, ScoreTable, bits, mask_of
from orchestrator.placement.fastpath import (
    CapacityNeeds,
    FilterKernel,
    Kernel,
    ScoreKernel,
    SummarizedReasons,
)
from orchestrator.placement.framework import (
    FilterPlugin,
    FilterResult,
    Plugin,
    ReasonSummary,
    ScorePlugin,
    is_dynamic,
)
from orchestrator.placement.profiles import Profile, ProfileCache
from orchestrator.placement.result import (
    EXCLUDED,
    ClusterReplicas,
    ClusterScore,
    FitSummary,
    Scores,
)
from orchestrator.placement.topk import filter_kernel_of, score_kernel_of


class ScheduledRun(Protocol):
    """What explanations read of the run's scheduler (``scheduler.Scheduler``, which is one).

    Declared here, not imported from the scheduler: the scheduler builds the ``Explainer`` and
    hands itself in, so only it imports the other module (the import-linter contract on
    ``orchestrator.placement`` keeps it that way).
    """

    ctx: PlacementContext
    excluded: frozenset[int]
    allowed: int  # mask of the clusters not excluded
    placed: int  # workloads scheduled so far
    static_filters: list[FilterTable]
    term_filters: list[FilterTable]
    plain_filters: list[FilterTable]
    dynamic_filters: list[FilterPlugin]
    static_scores: list[ScoreTable]
    scorers: tuple[ScorePlugin, ...]
    profiles: ProfileCache
    explainer: Explainer

    def static_candidates(
        self, profile: Profile, view: Workload, current: Sequence[int]
    ) -> tuple[list[int], frozenset[int]]:
        """Clusters passing every static filter, in name order (and as a set)."""
        ...


@dataclass(slots=True)
class Attempt:
    """One affinity term tried for a workload, kept for explaining the decision later."""

    view: Workload
    label: str
    failure: str = ""
    # The view's profile as the scheduler found it (None: look it up again).
    profile: Profile | None = None


def explain(
    scheduler: ScheduledRun,
    seq: int,
    workload: Workload,
    attempts: list[Attempt] | None,
    chosen: Collection[ClusterReplicas],
    *,
    ctx_then: PlacementContext | None = None,
    only: Iterable[int] | None = None,
    short: bool = False,
) -> dict[str, tuple[str, ...]]:
    """Every rejected cluster (of ``only``, default all) with all its reasons, in index order.

    ``attempts`` None means the single term succeeded; ``ctx_then`` is the context with the free
    capacity the workload saw (default: rebuilt from the ledger, per cluster); ``short`` gives
    each reason in its summarised form (``framework.ReasonSummary``).
    """
    s = scheduler
    cut = s.explainer.summarizer if short else _keep
    if attempts is None:
        attempts = [Attempt(workload, "")]
    if ctx_then is None:
        ctx_then = s.ctx.at(seq)
    current = set(workload.placement.clusters)
    chosen_names = {c.name for c in chosen}
    # Cache entries per attempt, looked up once rather than once per cluster (every view
    # explained was placed, so its profile holds them: found by identity, not by hashing).
    # Each with its plugin's ``cut``, looked up once per call too.
    terms = [
        [(t, e, cut(t.plugin)) for t, e in s.explainer.term_entries(a.view, a.profile)]
        for a in attempts
    ]
    plain: dict[int, list[tuple[FilterTable, Entry[FilterResult], Callable[[str], str]]]] = {}
    out: dict[str, tuple[str, ...]] = {}
    clusters = s.ctx.clusters
    for i in range(len(clusters)) if only is None else only:
        cluster = clusters[i]
        if i in s.excluded:
            out[cluster.name] = (EXCLUDED,)
            continue
        if cluster.name in chosen_names:
            continue
        is_current = cluster.name in current
        reasons: list[str] = []
        governing = -1
        for k, attempt in enumerate(attempts):
            term_reasons = [
                short_form(r)
                for t, e, short_form in terms[k]
                for r in t.result(e, attempt.view, i, is_current).reasons
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
                (t, e, cut(t.plugin)) for t, e in s.explainer.plain_entries(view, attempt.profile)
            ]
        for t, e, short_form in tables:
            reasons.extend(map(short_form, t.result(e, view, i, is_current).reasons))
        if governing >= 0 and not reasons:
            for plugin in s.dynamic_filters:
                reasons.extend(map(cut(plugin), plugin.filter(ctx_then, view, cluster).reasons))
            if not reasons and attempt.failure:
                reasons.append(attempt.failure)
        if reasons:
            out[cluster.name] = tuple(dict.fromkeys(reasons))
    return out


def _as_is(reason: str) -> str:
    return reason


def _keep(plugin: Plugin) -> Callable[[str], str]:
    return _as_is


def summarizer(plugin: Plugin) -> Callable[[str], str]:
    """The plugin's ``summarize`` (``framework.ReasonSummary``), or the reason as it is."""
    return plugin.summarize if isinstance(plugin, ReasonSummary) else _as_is


class DecisionExplanation:
    """One decision's ``reasons`` and ``summary`` (``result.Explanation``), each built once."""

    __slots__ = (
        "_attempts",
        "_explainer",
        "_profile",
        "_reasons",
        "_scores",
        "_summary",
        "chosen",
        "seq",
        "workload",
    )

    def __init__(
        self,
        explainer: Explainer,
        seq: int,
        workload: Workload,
        attempts: list[Attempt] | None,
        chosen: tuple[ClusterReplicas, ...],
        *,
        profile: Profile | None = None,
    ) -> None:
        self._explainer = explainer
        self._profile = profile
        self.seq = seq
        self.workload = workload
        self._attempts = attempts
        self.chosen = chosen
        self._reasons: Mapping[str, tuple[str, ...]] | None = None
        self._summary: FitSummary | None = None
        self._scores: Scores | None = None

    @property
    def attempts(self) -> list[Attempt]:
        """The terms tried, in order (one, named "", when the only term succeeded)."""
        if self._attempts is not None:
            return self._attempts
        return [Attempt(self.workload, "", profile=self._profile)]

    @property
    def reasons(self) -> Mapping[str, tuple[str, ...]]:
        """Every rejected cluster with all its reasons (``explain``), built on first read."""
        if self._reasons is None:
            self._reasons = explain(
                self._explainer.scheduler, self.seq, self.workload, self._attempts, self.chosen
            )
        return self._reasons

    @property
    def summary(self) -> FitSummary:
        """The reasons counted per summarised reason (``Explainer.summary``)."""
        if self._summary is None:
            self._summary = self._explainer.summary(self)
        return self._summary

    @property
    def placed(self) -> bool:
        """Some term succeeded (``attempts`` None: the only one did)."""
        return self._attempts is None or not self._attempts[-1].failure

    @property
    def scores(self) -> Scores:
        """Every feasible cluster's scores (``Explainer.scores``), built on first read."""
        if self._scores is None:
            self._scores = self._explainer.scores(self)
        return self._scores


class Explainer:
    """What one run's summaries share: reason masks per cache entry and the capacity replay.

    The replay: the ledger records every consumption with the sequence number of the workload
    that made it, so the free capacity workload ``seq`` saw is the capacity before the run minus
    what workloads ``0..seq-1`` consumed. Summaries read in order (as the JSON writer does) walk
    the ledger once; one read out of order starts over.
    """

    def __init__(self, scheduler: ScheduledRun) -> None:
        self.scheduler = scheduler
        n = len(scheduler.ctx.clusters)
        self.everyone = (1 << n) - 1
        self.excluded_mask = self.everyone & ~scheduler.allowed
        self._masks: dict[int, tuple[Entry[FilterResult], list[tuple[str, int]]]] = {}
        static = scheduler.static_filters
        self._term_pos = [static.index(t) for t in scheduler.term_filters]
        self._plain_pos = [static.index(t) for t in scheduler.plain_filters]
        self._summarizers: dict[int, Callable[[str], str]] = {}
        self._dynamic = [
            (
                p,
                self.summarizer(p),
                _kernel_factory(p),
                p if isinstance(p, CapacityNeeds) else None,
            )
            for p in scheduler.dynamic_filters
        ]
        self._low: dict[tuple[int, int], int] = {}
        self._ledgers: list[list[tuple[list[int], list[int]]]] | None = None
        self._short_since: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        self._by_profile: dict[
            int, tuple[Profile, tuple[list[tuple[str, int]], int, list[tuple[str, int]], int]]
        ] = {}
        self._merged: dict[
            tuple[int, ...],
            tuple[tuple[Entry[FilterResult], ...], tuple[list[tuple[str, int]], int]],
        ] = {}
        self._replay: PlacementContext | None = None
        self._start: tuple[list[int], list[int]] = ([], [])
        self._events: dict[int, list[tuple[int, int, int]]] = {}
        self._cursor = 0
        self._built_for = 0  # ``scheduler.placed`` when the ledger's caches above were built

    def _fresh(self) -> None:
        """Forget what was built from the ledger if workloads were placed since.

        A decision may be explained while later ones are still being made (a writer rendering
        the first decisions early): the shortage masks and the replay then hold the ledger of
        that moment, and a later decision needs the longer one.
        """
        placed = self.scheduler.placed
        if placed != self._built_for:
            self._built_for = placed
            self._low.clear()
            self._ledgers = None
            self._short_since.clear()
            self._replay = None
            self._events.clear()
            self._cursor = 0

    def term_entries(
        self, view: Workload, profile: Profile | None = None
    ) -> list[tuple[FilterTable, Entry[FilterResult]]]:
        """The view's cache entry in each filter that depends on the affinity term."""
        if profile is None:
            profile = self.scheduler.profiles.profile(view)
        static, entries = self.scheduler.static_filters, profile.entries
        return [(static[p], entries[p]) for p in self._term_pos]

    def plain_entries(
        self, view: Workload, profile: Profile | None = None
    ) -> list[tuple[FilterTable, Entry[FilterResult]]]:
        """The view's cache entry in each other static filter (``profile``: the view's)."""
        if profile is None:
            profile = self.scheduler.profiles.profile(view)
        static, entries = self.scheduler.static_filters, profile.entries
        return [(static[p], entries[p]) for p in self._plain_pos]

    def summarizer(self, plugin: Plugin) -> Callable[[str], str]:
        """``summarizer(plugin)``, cached: a runtime Protocol check costs microseconds."""
        found = self._summarizers.get(id(plugin))
        if found is None:
            found = self._summarizers[id(plugin)] = summarizer(plugin)
        return found

    # ------------------------------------------------------------------ capacity replay
    def context_at(self, seq: int) -> PlacementContext:
        """A context whose free capacity is what workload ``seq`` saw (shared, moved forward)."""
        self._fresh()
        ctx = self.scheduler.ctx
        if self._replay is None:
            start_cpu, start_mem = list(ctx.free_cpu), list(ctx.free_mem)
            events = self._events
            for i, (dones, cpus, mems) in enumerate(ctx.ledgers()):
                if dones:
                    start_cpu[i] += sum(cpus)
                    start_mem[i] += sum(mems)
                    for done, cpu, mem in zip(dones, cpus, mems, strict=True):
                        events.setdefault(done, []).append((i, cpu, mem))
            self._start = (start_cpu, start_mem)
            self._replay = replay = copy.copy(ctx)
            replay.seq = None
            replay.free_cpu, replay.free_mem = list(start_cpu), list(start_mem)
            self._cursor = 0
        replay = self._replay
        if seq < self._cursor:
            replay.free_cpu[:], replay.free_mem[:] = self._start
            self._cursor = 0
        fc, fm, events = replay.free_cpu, replay.free_mem, self._events
        for done in range(self._cursor, seq):
            for i, cpu, mem in events.get(done, ()):
                fc[i] -= cpu
                fm[i] -= mem
        self._cursor = seq
        return replay

    def _short(
        self,
        seq: int,
        plugin: CapacityNeeds,
        view: Workload,
        open_: int,
        add: Callable[[str, int], None],
    ) -> int:
        """The clusters of ``open_`` that ``plugin`` rejected for workload ``seq``, counted.

        Free capacity only falls during a run, so a cluster short for workload ``seq`` stays
        short for every later one: ``_short_since`` answers with one bisection per resource.
        """
        unfit = 0
        for resource, need in enumerate(plugin.needs(view)):
            if not open_ & self._below(resource, need):
                continue
            since, masks = self._short_since_of(resource, need)
            m = masks[bisect.bisect_right(since, seq)] & open_
            if m:
                add(plugin.shortages[resource], m)
                unfit |= m
        return unfit

    def _short_since_of(self, resource: int, need: int) -> tuple[list[int], list[int]]:
        """When each cluster short at the end of the run became short, and prefix masks.

        ``since`` ascending: the first workload that saw the cluster with less than ``need``
        of cpu (0) or memory (1) free; ``masks[k]``: the clusters of ``since[:k]``. So the
        clusters short for workload ``seq`` are ``masks[bisect_right(since, seq)]``.
        """
        found = self._short_since.get((resource, need))
        if found is not None:
            return found
        falls = self._falls()[resource]
        firsts: list[tuple[int, int]] = []
        for i in bits(self._below(resource, need)):
            dones, minus_free = falls[i]
            k = bisect.bisect_right(minus_free, -need)  # the first free value below ``need``
            firsts.append((dones[k - 1] + 1 if k else 0, i))
        firsts.sort()
        masks = [0]
        for _, i in firsts:
            masks.append(masks[-1] | 1 << i)
        found = self._short_since[(resource, need)] = ([first for first, _ in firsts], masks)
        return found

    def _falls(self) -> list[list[tuple[list[int], list[int]]]]:
        """Per resource and cluster: (workload of each consumption, minus the free capacity).

        ``minus_free[0]`` is before the run, ``minus_free[k]`` after the k-th consumption: never
        decreasing, so the first free value below a need is found by bisection.
        """
        if self._ledgers is None:
            ctx = self.scheduler.ctx
            ledgers = ctx.ledgers()
            self._ledgers = []
            for resource, end in enumerate((ctx.free_cpu, ctx.free_mem)):
                per_cluster = []
                for i, (dones, *amounts) in enumerate(ledgers):
                    used = amounts[resource]
                    # minus the free capacity before the run, then after each consumption
                    minus_free = list(itertools.accumulate(used, initial=-(end[i] + sum(used))))
                    per_cluster.append((dones, minus_free))
                self._ledgers.append(per_cluster)
        return self._ledgers

    def _profile_masks(
        self, view: Workload, profile: Profile | None = None
    ) -> tuple[list[tuple[str, int]], int, list[tuple[str, int]], int]:
        """The view's reason masks: (term filters', all they reject, other filters', ditto).

        Kept per profile, which the ~5 workloads with equal static keys share.
        """
        if profile is None:
            profile = self.scheduler.profiles.profile(view)
        found = self._by_profile.get(id(profile))
        if found is not None and found[0] is profile:
            return found[1]
        entries = profile.entries
        terms, rejected = self._merged_masks(self._term_pos, entries)
        plain, plain_rejected = self._merged_masks(self._plain_pos, entries)
        masks = (terms, rejected, plain, plain_rejected)
        self._by_profile[id(profile)] = (profile, masks)
        return masks

    def _merged_masks(
        self, positions: list[int], entries: list[Entry[FilterResult]]
    ) -> tuple[list[tuple[str, int]], int]:
        """The reason masks of the entries at ``positions`` merged, and all they reject.

        Kept per tuple of entries: profiles that differ elsewhere share them (a generated
        1k x 10k fleet has ~2,000 profiles but ~900 term entries and ~100 sets of the others).
        """
        chosen = tuple([entries[p] for p in positions])
        key = tuple(map(id, chosen))
        found = self._merged.get(key)
        if found is not None and found[0] == chosen:  # tuples compare items by identity first
            return found[1]
        static = self.scheduler.static_filters
        merged: dict[str, int] = {}
        rejected = 0
        for p, entry in zip(positions, chosen, strict=True):
            for reason, m in self._reason_masks(static[p], entry):
                merged[reason] = merged.get(reason, 0) | m
                rejected |= m
        result = (list(merged.items()), rejected)
        self._merged[key] = (chosen, result)
        return result

    def _below(self, resource: int, need: int) -> int:
        """Clusters with less than ``need`` of cpu (0) or memory (1) free at the end of the run."""
        found = self._low.get((resource, need))
        if found is None:
            ctx = self.scheduler.ctx
            free = ctx.free_cpu if resource == 0 else ctx.free_mem
            found = self._low[(resource, need)] = mask_of([f < need for f in free])
        return found

    # ------------------------------------------------------------------ static reasons
    def _reason_masks(
        self, table: FilterTable, entry: Entry[FilterResult]
    ) -> list[tuple[str, int]]:
        """(summarised reason, clusters it rejects as a bitmask) for one cache entry.

        Built once per entry: one question per rejected class (each cluster of a per-cluster
        table, each named cluster), answered from the entry's cache. Clusters in the workload's
        current placement may get another answer; the summary asks for those exactly.
        """
        found = self._masks.get(id(entry))
        if found is not None and found[0] is entry:
            return found[1]
        rejected = self.everyone & ~entry.mask
        out: dict[str, int] = {}
        if rejected:
            summarize = self.summarizer(table.plugin)
            view = entry.workload
            named = 0
            for i in entry.named:
                named |= 1 << i
            if entry.shared >= 0:
                # One answer for every cluster not named (``only_named``: a pinned list): ask
                # its cluster once, not once per class (~800 such entries x 25 classes).
                unnamed = rejected & ~named
                groups = [(unnamed, entry.shared)] if unnamed else []
            elif table.per_cluster and isinstance(table.plugin, SummarizedReasons):
                # Per cluster (a measured RTT): the summarised reasons come without the text.
                indices = bits(rejected & ~named)
                clusters = table.clusters
                answers = table.plugin.summarized_reasons(
                    table.ctx, view, [clusters[i] for i in indices]
                )
                for i, reasons in zip(indices, answers, strict=True):
                    for key in reasons:
                        out[key] = out.get(key, 0) | 1 << i
                groups = []
            elif table.per_cluster:
                groups = [(1 << i, i) for i in bits(rejected & ~named)]
            else:
                groups = []
                for group in table.group_mask:
                    m = group & rejected & ~named
                    if m:
                        groups.append((m, (m & -m).bit_length() - 1))
            groups += [(1 << i, i) for i in entry.named if rejected >> i & 1]
            for m, rep in groups:
                for reason in table.result(entry, view, rep, False).reasons:
                    key = summarize(reason)
                    out[key] = out.get(key, 0) | m
        masks = list(out.items())
        self._masks[id(entry)] = (entry, masks)
        return masks

    # ------------------------------------------------------------------ one summary
    def summary(self, decision: DecisionExplanation) -> FitSummary:
        """``explain`` counted per summarised reason, at the cost of a few mask operations.

        Mirrors ``explain`` exactly: a cluster's term reasons count for each term tried while
        every earlier term rejected it too; the other static filters count everywhere; the
        dynamic filters and the first term's failure count only where nothing static (of the
        first term) said no. Excluded clusters count once, as ``excluded``.
        """
        self._fresh()
        s = self.scheduler
        ctx = s.ctx
        attempts = decision.attempts
        index = ctx.index
        chosen = 0
        for line in decision.chosen:
            chosen |= 1 << index[line.name]
        current = sorted({index[n] for n in decision.workload.placement.clusters if n in index})
        current_mask = 0
        for i in current:
            current_mask |= 1 << i
        eligible = self.everyone & ~self.excluded_mask & ~chosen & ~current_mask
        masks: dict[str, int] = {}
        if self.excluded_mask:
            masks[EXCLUDED] = self.excluded_mask

        def add(reason: str, m: int) -> None:
            if m:
                masks[reason] = masks.get(reason, 0) | m

        first_rejected = 0
        still = eligible  # rejected by the term filters of every term so far
        for k, attempt in enumerate(attempts):
            label = f"affinity {attempt.label}: " if attempt.label else ""
            terms, rejected, plain, plain_rejected = self._profile_masks(
                attempt.view, attempt.profile
            )
            for reason, m in terms:
                add(label + reason, m & still)
            if k == 0:
                first_rejected = rejected
                for reason, m in plain:
                    add(reason, m & eligible)
                first_plain_rejected = plain_rejected
            still &= rejected
            if not still:
                break
        first = attempts[0]
        plain_rejected = first_plain_rejected
        open_ = eligible & ~first_rejected & ~plain_rejected
        if open_:
            unfit = 0
            for plugin, summarize, kernel, capacity in self._dynamic:
                if capacity is not None:
                    unfit |= self._short(decision.seq, capacity, first.view, open_, add)
                    continue
                then = self.context_at(decision.seq)
                indices = bits(open_)
                kept = kernel(then, first.view)(indices)
                if len(kept) == len(indices):
                    continue
                for i in set(indices).difference(kept):
                    unfit |= 1 << i
                    for reason in plugin.filter(then, first.view, ctx.clusters[i]).reasons:
                        add(summarize(reason), 1 << i)
            if first.failure:
                add(first.failure, open_ & ~unfit)
        # Current clusters may get other answers (NoSchedule spares a workload that stays).
        exact = [i for i in current if not (chosen | self.excluded_mask) >> i & 1]
        if exact:
            then = self.context_at(decision.seq)
            found = explain(
                s,
                decision.seq,
                decision.workload,
                attempts,
                decision.chosen,
                ctx_then=then,
                only=exact,
                short=True,
            )
            for name, reasons in found.items():
                bit = 1 << index[name]
                for reason in reasons:
                    add(reason, bit)
        union = 0
        for m in masks.values():
            union |= m
        rejected_counts = sorted(
            ((reason, m.bit_count()) for reason, m in masks.items()), key=_most_first
        )
        return FitSummary(
            len(ctx.clusters), len(ctx.clusters) - union.bit_count(), tuple(rejected_counts)
        )

    # ------------------------------------------------------------------ scores
    def scores(self, decision: DecisionExplanation) -> Scores:
        """Each feasible cluster's score per plugin and its weighted total, best first.

        The term is the one that won (or the first, when none did). Feasible: not excluded,
        admitted by the static filters (current clusters asked exactly, as the scheduler does)
        and by the dynamic filters at the capacity the workload saw. Static scores come from
        the run's score tables (current clusters exactly), dynamic ones from the plugins'
        kernels at that capacity; the totals are the ones the scheduler ranked by.
        """
        s = self.scheduler
        attempts = decision.attempts
        view = attempts[-1].view if decision.placed else attempts[0].view
        index = s.ctx.index
        current = sorted({index[n] for n in decision.workload.placement.clusters if n in index})
        profile = s.profiles.profile(view)
        candidates, _ = s.static_candidates(profile, view, current)
        then = self.context_at(decision.seq)
        feasible = list(candidates)
        for _, _, kernel, _ in self._dynamic:
            if feasible:
                feasible = kernel(then, view)(feasible)
        is_current = set(current)
        columns: list[list[int]] = []
        static = dict(
            zip(
                (id(t.plugin) for t in s.static_scores),
                zip(s.static_scores, profile.score_entries, strict=True),
                strict=True,
            )
        )
        for plugin in s.scorers:
            if is_dynamic(plugin):
                kernel_fn = (
                    plugin.score_kernel(then, view)
                    if isinstance(plugin, ScoreKernel)
                    else score_kernel_of(then, plugin, view)
                )
                columns.append(kernel_fn(feasible, None))
            else:
                table, entry = static[id(plugin)]
                columns.append([table.result(entry, view, i, i in is_current) for i in feasible])
        weights = tuple((p.name, p.weight) for p in s.scorers)
        rows: list[tuple[int, int, ClusterScore]] = []
        clusters = s.ctx.clusters
        for p, i in enumerate(feasible):
            plugins = tuple(
                (name, column[p]) for (name, _), column in zip(weights, columns, strict=True)
            )
            total = sum(w * column[p] for (_, w), column in zip(weights, columns, strict=True))
            rows.append((-total, i, ClusterScore(clusters[i].name, total, plugins)))
        rows.sort(key=_rank)
        return Scores(weights, tuple(row[2] for row in rows))


def _rank(row: tuple[int, int, ClusterScore]) -> tuple[int, int]:
    return row[0], row[1]


def _most_first(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _kernel_factory(plugin: FilterPlugin) -> Callable[[PlacementContext, Workload], Kernel]:
    """How to ask the dynamic ``plugin`` about many clusters at once (its fastest path)."""
    if isinstance(plugin, FilterKernel):
        return plugin.filter_kernel
    return lambda ctx, view: filter_kernel_of(ctx, plugin, view)
