from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement import place
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.plugins.resource_fit import ResourceFit
from tests.orchestrator.placement.fleet import cluster, fleet, single, workload

PLUGIN = ResourceFit()
FOUR_CPU = {"cpu": "4", "memory": "16Gi"}


@pytest.mark.parametrize(
    ("allocated", "replicas", "requests", "placement", "reasons"),
    [
        pytest.param(None, 4, {"cpu": "1", "memory": "4Gi"}, {}, (), id="exactly fits"),
        pytest.param(
            {"cpu": "3500m", "memory": "1Gi"},
            2,
            {"cpu": "1", "memory": "1Gi"},
            {},
            ("needs 2 cpu free, has 500m",),
            id="cpu short",
        ),
        pytest.param(
            {"cpu": "0", "memory": "15Gi"},
            1,
            {"cpu": "100m", "memory": "2Gi"},
            {},
            ("needs 2Gi memory free, has 1Gi",),
            id="memory short",
        ),
        pytest.param(
            {"cpu": "4", "memory": "16Gi"},
            1,
            {"cpu": "1", "memory": "1Gi"},
            {},
            ("needs 1 cpu free, has 0", "needs 1Gi memory free, has 0"),
            id="both short",
        ),
        pytest.param(
            {"cpu": "3", "memory": "0"},
            5,
            {"cpu": "1", "memory": "1Gi"},
            {"replicaScheduling": {"type": "Dynamic"}},
            (),
            id="divided workloads need room for one replica",
        ),
        pytest.param(
            {"cpu": "4", "memory": "16Gi"},
            3,
            {"cpu": "1", "memory": "1Gi"},
            {"clusters": ["c1"]},
            (),
            id="a full cluster keeps the copy it already runs",
        ),
    ],
)
def test_filter(
    allocated: dict[str, str] | None,
    replicas: int,
    requests: dict[str, str],
    placement: dict[str, Any],
    reasons: tuple[str, ...],
) -> None:
    ctx, w, c = single(
        cluster("c1", capacity=FOUR_CPU, allocated=allocated),
        workload("w", replicas=replicas, requests=requests, **placement),
    )
    assert PLUGIN.filter(ctx, w, c).reasons == reasons
    assert PLUGIN.filter_batch(ctx, w, [0]) == ([] if reasons else [0])


def test_unknown_capacity_fits() -> None:
    item = cluster("c1")
    del item["capacity"]
    ctx, w, c = single(item, workload("w", replicas=1000, requests={"cpu": "64", "memory": "1Ti"}))
    assert PLUGIN.filter(ctx, w, c).fits
    assert PLUGIN.filter_batch(ctx, w, [0]) == [0]


def test_batch_agrees_with_single_calls() -> None:
    clusters = [
        cluster(
            f"c{n}",
            capacity={"cpu": "8", "memory": "8Gi"},
            allocated={"cpu": f"{n}", "memory": f"{n}Gi"},
        )
        for n in range(9)
    ]
    snapshot = fleet(
        clusters,
        [
            workload(
                "w", replicas=3, requests={"cpu": "1", "memory": "512Mi"}, clusters=["c7", "c8"]
            )
        ],
    )
    ctx = PlacementContext(snapshot)
    w = snapshot.workloads[0]
    single_calls = [i for i, c in enumerate(ctx.clusters) if PLUGIN.filter(ctx, w, c).fits]
    assert PLUGIN.filter_batch(ctx, w, range(len(ctx.clusters))) == single_calls
    assert single_calls == [0, 1, 2, 3, 4, 5, 7, 8]


def test_capacity_is_consumed_across_the_batch() -> None:
    snapshot = fleet(
        [
            cluster("a", capacity={"cpu": "10", "memory": "64Gi"}),
            cluster("b", capacity={"cpu": "8", "memory": "64Gi"}),
        ],
        [
            workload(name, replicas=6, requests={"cpu": "1", "memory": "1Gi"}, maxClusters=1)
            for name in ("w1", "w2", "w3")
        ],
    )
    result = place(snapshot)
    assert result.decision("default/w1").replicas == {"a": 6}
    assert result.decision("default/w2").replicas == {"b": 6}
    third = result.decision("default/w3")
    assert third.unschedulable
    assert third.reasons == {"a": ("needs 6 cpu free, has 4",), "b": ("needs 6 cpu free, has 2",)}


def test_workloads_staying_put_do_not_consume_again() -> None:
    snapshot = fleet(
        [
            cluster(
                "a",
                capacity={"cpu": "10", "memory": "64Gi"},
                allocated={"cpu": "10", "memory": "6Gi"},
            )
        ],
        [workload("w", replicas=6, requests={"cpu": "1", "memory": "1Gi"}, clusters=["a"])],
    )
    assert place(snapshot).decision("default/w").replicas == {"a": 6}
