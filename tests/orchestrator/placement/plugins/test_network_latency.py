from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement.context import PlacementContext
from orchestrator.placement.plugins.network_latency import NetworkLatency
from tests.orchestrator.placement.fleet import cluster, fleet, workload

PLUGIN = NetworkLatency()
CLUSTERS = [
    cluster("eu-1", labels={"region": "eu"}),
    cluster("eu-2", labels={"region": "eu"}),
    cluster("us-1", labels={"region": "us"}),
    cluster("ap-1", labels={"topology.kubernetes.io/region": "ap"}),
    cluster("lone"),
]
NETWORK = [
    {"from": "eu-1", "to": "us-1", "rttMs": 90},
    {"from": "eu-2", "to": "us-1", "rttMs": 120},
    {"from": "us-1", "to": "ap-1", "rttMs": 150},
    {"from": "ap-1", "to": "us-1", "rttMs": 170},  # both directions given: asymmetric
    {"from": "eu-1", "to": "eu-2", "rttMs": 4},
]


def _reasons(max_latency: dict[str, Any], cluster_name: str) -> tuple[str, ...]:
    snapshot = fleet(CLUSTERS, [workload("w", maxLatency=max_latency)], NETWORK)
    ctx = PlacementContext(snapshot)
    return PLUGIN.filter(ctx, snapshot.workloads[0], snapshot.cluster(cluster_name)).reasons


@pytest.mark.parametrize(
    ("max_latency", "cluster_name", "reasons"),
    [
        ({"cluster": "us-1", "rttMs": 100}, "eu-1", ()),
        ({"cluster": "us-1", "rttMs": 100}, "eu-2", ("RTT 120ms to cluster us-1 exceeds 100ms",)),
        ({"cluster": "eu-1", "rttMs": 100}, "us-1", ()),  # symmetric when one way is given
        ({"cluster": "us-1", "rttMs": 0}, "us-1", ()),  # to itself
        ({"cluster": "us-1", "rttMs": 160}, "ap-1", ("RTT 170ms to cluster us-1 exceeds 160ms",)),
        ({"cluster": "ap-1", "rttMs": 160}, "us-1", ()),
        ({"cluster": "ap-1", "rttMs": 500}, "eu-1", ("no RTT measured to cluster ap-1",)),
        ({"region": "us", "rttMs": 100}, "eu-1", ()),
        ({"region": "us", "rttMs": 100}, "eu-2", ("RTT 120ms to region us exceeds 100ms",)),
        ({"region": "eu", "rttMs": 100}, "us-1", ()),  # best of the region's clusters (90)
        ({"region": "eu", "rttMs": 0}, "eu-2", ()),  # inside the region
        ({"region": "ap", "rttMs": 200}, "eu-1", ("no RTT measured to region ap",)),
        ({"region": "eu", "rttMs": 200}, "lone", ("no RTT measured to region eu",)),
        ({"region": "mars", "rttMs": 200}, "eu-1", ("no RTT measured to region mars",)),
    ],
)
def test_filter(max_latency: dict[str, Any], cluster_name: str, reasons: tuple[str, ...]) -> None:
    assert _reasons(max_latency, cluster_name) == reasons


def test_no_constraint_fits_everywhere() -> None:
    snapshot = fleet(CLUSTERS, [workload("w")], NETWORK)
    ctx = PlacementContext(snapshot)
    assert all(PLUGIN.filter(ctx, snapshot.workloads[0], c).fits for c in ctx.clusters)


@pytest.mark.parametrize(
    "max_latency",
    [
        None,
        {"cluster": "us-1", "rttMs": 100},
        {"cluster": "ap-1", "rttMs": 160},
        {"cluster": "us-1", "rttMs": 0},
        {"region": "us", "rttMs": 100},
        {"region": "eu", "rttMs": 0},
        {"region": "mars", "rttMs": 200},
        {"region": "us", "rttMs": 12.5},
    ],
)
def test_summarized_reasons(max_latency: dict[str, Any] | None) -> None:
    """Each cluster's reasons, summarised: the RTT itself left out, the budget kept."""
    extra: dict[str, Any] = {} if max_latency is None else {"maxLatency": max_latency}
    snapshot = fleet(CLUSTERS, [workload("w", **extra)], NETWORK)
    ctx = PlacementContext(snapshot)
    view = snapshot.workloads[0]
    expected = [
        tuple(map(PLUGIN.summarize, PLUGIN.filter(ctx, view, c).reasons)) for c in ctx.clusters
    ]
    assert PLUGIN.summarized_reasons(ctx, view, ctx.clusters) == expected
    assert PLUGIN.summarized_reasons(ctx, view, []) == []
