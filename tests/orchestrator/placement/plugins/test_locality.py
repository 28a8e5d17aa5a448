from __future__ import annotations

from orchestrator.placement import place
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.plugins.locality import ClusterLocality
from tests.orchestrator.placement.fleet import cluster, fleet, workload

PLUGIN = ClusterLocality()


def test_score_is_full_on_the_current_placement_only() -> None:
    snapshot = fleet([cluster("a"), cluster("b")], [workload("w", clusters=["b"])])
    ctx = PlacementContext(snapshot)
    w = snapshot.workloads[0]
    assert [PLUGIN.score(ctx, w, c) for c in ctx.clusters] == [0, 100]


def test_stays_put_although_another_cluster_is_emptier() -> None:
    snapshot = fleet(
        [
            cluster("busy", allocated={"cpu": "12", "memory": "48Gi"}),
            cluster("idle"),
        ],
        [workload("w", clusters=["busy"], maxClusters=1)],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"busy": 1}
    assert decision.evicted == ()
    assert decision.reasons == {}  # idle was feasible, just not chosen
