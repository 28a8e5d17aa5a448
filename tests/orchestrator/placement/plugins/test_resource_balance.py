from __future__ import annotations

from orchestrator.placement.context import PlacementContext
from orchestrator.placement.plugins.resource_balance import ResourceBalance
from tests.orchestrator.placement.fleet import cluster, fleet, workload

PLUGIN = ResourceBalance()


def _fleet() -> PlacementContext:
    unknown = cluster("unknown")
    del unknown["capacity"]
    return PlacementContext(
        fleet(
            [
                cluster("empty", capacity={"cpu": "8", "memory": "32Gi"}),
                cluster(
                    "half",
                    capacity={"cpu": "8", "memory": "32Gi"},
                    allocated={"cpu": "4", "memory": "16Gi"},
                ),
                cluster(
                    "big",
                    capacity={"cpu": "64", "memory": "256Gi"},
                    allocated={"cpu": "32", "memory": "128Gi"},
                ),
                cluster("odd", capacity={"cpu": "0", "memory": "96Gi"}),
                unknown,
            ],
            [
                workload("w", replicas=2, requests={"cpu": "1", "memory": "4Gi"}),
                workload(
                    "cur", replicas=2, requests={"cpu": "1", "memory": "4Gi"}, clusters=["half"]
                ),
            ],
        )
    )


def test_scores_free_share_after_placing() -> None:
    ctx = _fleet()
    w = ctx.snapshot.workloads[0]
    scores = {c.name: PLUGIN.score(ctx, w, c) for c in ctx.clusters}
    # empty: (6/8 + 24/32) * 50 = 75; half: (2/8 + 8/32) * 50 = 25; big: (30/64 + 120/256) * 50
    assert scores == {"empty": 75, "half": 25, "big": 46, "odd": 45, "unknown": 0}


def test_batch_bound_and_discount_agree_with_score() -> None:
    ctx = _fleet()
    everything = list(range(len(ctx.clusters)))
    for w in ctx.snapshot.workloads:
        singles = [PLUGIN.score(ctx, w, c) for c in ctx.clusters]
        assert PLUGIN.score_batch(ctx, w, everything) == singles
        for i, cluster_ in enumerate(ctx.clusters):
            bound = PLUGIN.upper_bound(ctx, i)
            assert singles[i] <= bound <= 100
            if cluster_.name not in w.placement.clusters:
                discount = PLUGIN.discounts(ctx, w, [PLUGIN.bound_class(ctx, i)])[0]
                assert singles[i] <= bound - discount


def test_current_cluster_scores_with_its_credit() -> None:
    ctx = _fleet()
    w = ctx.snapshot.workloads[1]
    half = ctx.clusters[ctx.index["half"]]
    assert PLUGIN.score(ctx, w, half) == 50  # its replicas already count in allocated
