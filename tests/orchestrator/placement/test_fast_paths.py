"""Every fast path a plugin or the scheduler offers gives the answers of the plain one."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.domain.snapshot import Cluster, FleetSnapshot, Workload
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.placement import DEFAULT_REGISTRY, bounds, place, scheduler
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.equivalence import bits, mask_of, selectors
from orchestrator.placement.fastpath import FitsFilter, SummarizedReasons
from orchestrator.placement.framework import ReasonSummary
from orchestrator.placement.plugins import ResourceBalance, ResourceFit
from testkit.fleetgen import generate_fleet, generate_fleet_mapping


@pytest.fixture(scope="module")
def fleet() -> FleetSnapshot:
    return generate_fleet(40, 300, seed=21)


def _views(snapshot: FleetSnapshot) -> list[Workload]:
    """Every workload, each affinity term on its own, and each without its current placement."""
    out: list[Workload] = []
    for w in snapshot.workloads:
        terms = w.placement.affinities
        views = [w] + [scheduler.term_view(w, (term,)) for term in terms]
        out += views
        out += [
            dataclasses.replace(v, placement=dataclasses.replace(v.placement, clusters=()))
            for v in views
        ]
    return out


@given(st.integers(min_value=0, max_value=(1 << 300) - 1))
def test_bit_helpers(mask: int) -> None:
    positions = [i for i in range(mask.bit_length()) if mask >> i & 1]
    assert bits(mask) == positions
    flags = selectors(mask, 310)
    assert len(flags) == 310
    assert [i for i, flag in enumerate(flags) if flag] == positions
    assert mask_of([bool(f) for f in flags]) == mask


def test_fits_is_filter_without_reasons(fleet: FleetSnapshot) -> None:
    ctx = PlacementContext(fleet)
    plugins = [p for p in DEFAULT_REGISTRY.filters if isinstance(p, FitsFilter)]
    assert {p.name for p in plugins} == {
        "ClusterAffinity",
        "SpreadConstraint",
        "TaintToleration",
        "APICompatibility",
        "NetworkLatency",
    }
    for view in _views(fleet)[::3]:
        for cluster in ctx.clusters:
            for plugin in plugins:
                assert plugin.fits(ctx, view, cluster) == plugin.filter(ctx, view, cluster).fits


def test_summarized_reasons_are_the_filters_reasons_summarised(fleet: FleetSnapshot) -> None:
    ctx = PlacementContext(fleet)
    plugins = [p for p in DEFAULT_REGISTRY.filters if isinstance(p, SummarizedReasons)]
    assert {p.name for p in plugins} == {"NetworkLatency"}
    clusters = list(ctx.clusters)
    for view in _views(fleet):
        for plugin in plugins:
            assert isinstance(plugin, ReasonSummary)
            expected = [
                tuple(map(plugin.summarize, plugin.filter(ctx, view, c).reasons)) for c in clusters
            ]
            assert plugin.summarized_reasons(ctx, view, clusters) == expected
            assert plugin.summarized_reasons(ctx, view, clusters[::-3]) == expected[::-3]


def _consume_some(ctx: PlacementContext, snapshot: FleetSnapshot) -> None:
    """Uneven free capacity, as in the middle of a run."""
    rng = random.Random(3)
    for seq, w in enumerate(snapshot.workloads[:120]):
        picks = rng.sample(range(len(ctx.clusters)), 3)
        ctx.consume(seq, w, [(i, rng.randint(1, 4)) for i in picks])


def test_capacity_kernels_and_batches_match_single_answers(fleet: FleetSnapshot) -> None:
    ctx = PlacementContext(fleet)
    _consume_some(ctx, fleet)
    fit, balance = ResourceFit(), ResourceBalance()
    everyone = list(range(len(ctx.clusters)))
    offsets = [7 * i for i in everyone]
    for view in _views(fleet)[::2]:
        fitting = [i for i in everyone if fit.filter(ctx, view, ctx.clusters[i]).fits]
        assert fit.filter_kernel(ctx, view)(everyone) == fitting
        assert fit.filter_batch(ctx, view, everyone) == fitting
        some = everyone[::3]
        assert fit.filter_kernel(ctx, view)(some) == [i for i in fitting if i in some]
        scores = [balance.score(ctx, view, c) for c in ctx.clusters]
        assert balance.score_batch(ctx, view, everyone) == scores
        kernel = balance.score_kernel(ctx, view)
        assert kernel(everyone, None) == scores
        assert kernel(some, offsets) == [offsets[i] + scores[i] for i in some]
    bounds = [balance.upper_bound(ctx, i) for i in everyone]
    assert balance.upper_bounds(ctx, everyone) == bounds


def test_bounds_and_discounts_hold_on_a_fleet(fleet: FleetSnapshot) -> None:
    ctx = PlacementContext(fleet)
    _consume_some(ctx, fleet)
    balance = ResourceBalance()
    for view in _views(fleet)[::5]:
        current = set(view.placement.clusters)
        for i, cluster in enumerate(ctx.clusters):
            if cluster.name in current:
                continue
            score = balance.score(ctx, view, cluster)
            discount = balance.discounts(ctx, view, [balance.bound_class(ctx, i)])[0]
            bound = balance.upper_bound(ctx, i)
            assert 0 <= bound <= 100
            # Scores never go below 0, bounds minus discounts may (the scheduler allows for it).
            assert score <= max(0.0, bound - discount) + bounds.BOUND_SLACK


def test_term_view_is_replace(fleet: FleetSnapshot) -> None:
    for w in fleet.workloads:
        for t in range(len(w.placement.affinities)):
            policy = dataclasses.replace(w.placement, affinities=(w.placement.affinities[t],))
            term = (w.placement.affinities[t],)
            assert scheduler.term_view(w, term) == dataclasses.replace(w, placement=policy)


def test_parsing_shares_equal_parts() -> None:
    """Equal parts of workloads are one object (placement's keys compare them by identity)."""
    mapping = generate_fleet_mapping(20, 200, seed=2)
    snapshot = snapshot_from_mapping(mapping)
    for attr in ("apis", "requests"):
        values = [getattr(w, attr) for w in snapshot.workloads]
        assert len({id(v) for v in values}) == len(set(values))
    for attr in ("affinities", "tolerations", "replica_scheduling", "max_latency"):
        values = [getattr(w.placement, attr) for w in snapshot.workloads]
        assert len({id(v) for v in values}) == len(set(values))
    again = snapshot_from_mapping(mapping)
    assert again == snapshot


def test_rooms_match_replicas_fitting(fleet: FleetSnapshot) -> None:
    ctx = PlacementContext(fleet)
    _consume_some(ctx, fleet)
    everyone = list(range(len(ctx.clusters)))
    for view in _views(fleet)[::2]:
        for indices in (everyone, everyone[1::3]):
            assert ctx.rooms(view, indices) == [ctx.replicas_fitting(i, view) for i in indices]


def test_ledger_gives_the_free_capacity_each_workload_saw(fleet: FleetSnapshot) -> None:
    ctx = PlacementContext(fleet)
    seen: list[list[tuple[int, int] | None]] = []
    rng = random.Random(5)
    for seq, w in enumerate(fleet.workloads[:60]):
        seen.append([_free(ctx, c) for c in ctx.clusters])
        picks = rng.sample(range(len(ctx.clusters)), 3)
        changed = ctx.consume(seq, w, [(i, rng.randint(1, 4)) for i in picks])
        assert set(changed) <= set(picks)
    for seq, expected in enumerate(seen):
        then = ctx.at(seq)
        assert [_free(then, c) for c in ctx.clusters] == expected
    # The same ledger per cluster, as three lists (what the summaries' replay reads).
    ledgers = ctx.ledgers()
    assert len(ledgers) == len(ctx.clusters)
    assert [
        (seq, i, cpu, mem)
        for i, (seqs, cpus, mems) in enumerate(ledgers)
        for seq, cpu, mem in zip(seqs, cpus, mems, strict=True)
    ] == list(ctx.consumption())


def _free(ctx: PlacementContext, cluster: Cluster) -> tuple[int, int] | None:
    free = ctx.free(cluster)
    return None if free is None else (free.cpu_milli, free.memory_bytes)


def test_profiles_do_not_depend_on_shared_objects(fleet: FleetSnapshot) -> None:
    """Profiles are found by the identity of a workload's parts first: equal parts that are
    distinct objects (not parsed together) must give the same decisions."""
    unshared = dataclasses.replace(
        fleet, workloads=tuple(copy.deepcopy(w) for w in fleet.workloads)
    )
    assert unshared.workloads[0].apis is not fleet.workloads[0].apis
    shared, separate = place(fleet), place(unshared)
    for a, b in zip(shared.decisions, separate.decisions, strict=True):
        assert (a.clusters, a.unschedulable, a.evicted, a.affinity) == (
            b.clusters,
            b.unschedulable,
            b.evicted,
            b.affinity,
        )
        assert dict(a.reasons) == dict(b.reasons)
