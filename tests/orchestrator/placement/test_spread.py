"""Spread constraints end to end, from the rules in ``placement.spread`` and docs/decisions.md.

The fleet: four clusters in three regions whose free capacity ranks them e1 > u1 > e2 > a1
(ResourceBalance prefers the freer), one cluster with no region at all.
"""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement import place
from tests.orchestrator.placement.fleet import cluster, fleet, workload


def _cluster(name: str, used_cpu: int, **fields: Any) -> dict[str, Any]:
    allocated = {"cpu": str(used_cpu), "memory": f"{used_cpu * 4}Gi"} if used_cpu else None
    return {**cluster(name, allocated=allocated), **fields}


CLUSTERS = [
    _cluster("e1", 0, region="eu", provider="aws", zones=["eu-a", "eu-b"]),
    _cluster("u1", 2, region="us", provider="gcp", zones=["us-a"]),
    _cluster("e2", 4, region="eu", provider="aws", zones=["eu-a"]),
    _cluster("a1", 8, region="ap", provider="aws", zones=["ap-a"]),
    _cluster("x1", 1),  # no region, provider or zones
]


def _place(replicas: int = 1, **placement: Any) -> Any:
    snapshot = fleet(CLUSTERS, [workload("w", replicas=replicas, **placement)])
    (decision,) = place(snapshot).decisions
    return decision


def _spread(*items: tuple[str, int, int | None]) -> list[dict[str, Any]]:
    return [
        {"spreadByField": f, "minGroups": low, **({"maxGroups": high} if high else {})}
        for f, low, high in items
    ]


@pytest.mark.parametrize(
    ("placement", "replicas", "expected"),
    [
        # every region, every cluster with one (x1 has none)
        (
            {"spreadConstraints": _spread(("region", 1, None))},
            1,
            {"e1": 1, "e2": 1, "u1": 1, "a1": 1},
        ),
        # the two regions with the best clusters, all their clusters
        ({"spreadConstraints": _spread(("region", 2, 2))}, 1, {"e1": 1, "u1": 1, "e2": 1}),
        # a cluster cap covers each region first, then goes by rank
        ({"spreadConstraints": _spread(("region", 2, 2)), "maxClusters": 2}, 1, {"e1": 1, "u1": 1}),
        (
            {"spreadConstraints": _spread(("region", 1, 3), ("cluster", 1, 3))},
            1,
            {"e1": 1, "u1": 1, "a1": 1},
        ),
        # one provider: the best cluster's
        ({"spreadConstraints": _spread(("provider", 1, 1))}, 1, {"e1": 1, "e2": 1, "a1": 1}),
        # zones: e1 spans eu-a and eu-b, so two zones admit e1 and e2 (eu-a) only
        ({"spreadConstraints": _spread(("zone", 2, 2))}, 1, {"e1": 1, "e2": 1}),
        # three zones: e1's two, then u1's; e2 (eu-a) fits inside them, a1 does not
        ({"spreadConstraints": _spread(("zone", 1, 3))}, 1, {"e1": 1, "u1": 1, "e2": 1}),
        # divided: the replicas must land on at least two regions, and do
        (
            {
                "spreadConstraints": _spread(("region", 2, 2)),
                "replicaScheduling": {"type": "Dynamic"},
            },
            6,
            {"e1": 2, "u1": 2, "e2": 2},
        ),
        (
            {
                "spreadConstraints": _spread(("region", 2, 2)),
                "replicaScheduling": {"type": "Weighted"},
            },
            2,
            {"e1": 1, "u1": 1},
        ),
    ],
)
def test_spread_places(placement: dict[str, Any], replicas: int, expected: dict[str, int]) -> None:
    decision = _place(replicas, **placement)
    assert not decision.unschedulable, decision.summary.text
    if placement.get("replicaScheduling", {}).get("type") == "Dynamic":
        # Webster by free room: where each replica lands is division's business, not spread's.
        assert set(decision.replicas) == set(expected)
        assert sum(decision.replicas.values()) == replicas
    else:
        assert decision.replicas == expected


@pytest.mark.parametrize(
    ("placement", "replicas", "failure"),
    [
        (
            {"spreadConstraints": _spread(("region", 4, None))},
            1,
            "spread by region: the feasible clusters span 3 regions, need at least 4 regions",
        ),
        (
            {"spreadConstraints": _spread(("provider", 3, None))},
            1,
            "spread by provider: the feasible clusters span 2 providers, need at least 3 providers",
        ),
        (
            {"spreadConstraints": _spread(("cluster", 6, None))},
            1,
            "spread by cluster: 5 clusters can be used, need at least 6 clusters",
        ),
        (  # one replica cannot be in two regions
            {
                "spreadConstraints": _spread(("region", 2, None)),
                "replicaScheduling": {"type": "Weighted"},
            },
            1,
            "Weighted division put the replicas on 1 region, need at least 2 regions",
        ),
        (  # Aggregated takes the fewest clusters: all on e1, one region
            {
                "spreadConstraints": _spread(("region", 2, None)),
                "replicaScheduling": {"type": "Aggregated"},
            },
            3,
            "Aggregated division put the replicas on 1 region, need at least 2 regions",
        ),
        (  # a cap of one cluster covers one zone only (e1 spans two: then fine, so ask three)
            {"spreadConstraints": _spread(("zone", 3, None)), "maxClusters": 1},
            1,
            "Duplicated division put the replicas on 2 zones, need at least 3 zones",
        ),
    ],
)
def test_spread_failures_explain_themselves(
    placement: dict[str, Any], replicas: int, failure: str
) -> None:
    decision = _place(replicas, **placement)
    assert decision.unschedulable
    assert decision.clusters == ()
    # Every cluster the filters admitted carries the failure, counted once in the summary.
    counts = dict(decision.summary.rejected)
    assert counts[failure] == sum(1 for rs in decision.reasons.values() if failure in rs) > 0
    assert failure in decision.summary.text


def test_clusters_without_the_field_are_rejected_by_name() -> None:
    decision = _place(spreadConstraints=_spread(("region", 1, None)))
    assert decision.reasons["x1"] == ("no region to spread by",)
    assert decision.summary.text == "4/5 clusters available: 1 no region to spread by"


def test_a_failed_spread_falls_back_to_the_next_affinity_term() -> None:
    decision = _place(
        clusterAffinities=[
            {
                "name": "eu-only",
                "fieldSelector": {
                    "matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]
                },
            },
            {"name": "anywhere"},
        ],
        spreadConstraints=_spread(("region", 2, 2)),
    )
    assert decision.affinity == "anywhere"
    assert decision.replicas == {"e1": 1, "u1": 1, "e2": 1}
    assert decision.reasons["a1"] == ("affinity eu-only: fields do not match region in (eu)",)
