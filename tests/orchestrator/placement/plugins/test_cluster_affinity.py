from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement import place
from orchestrator.placement.plugins.cluster_affinity import ClusterAffinity
from tests.orchestrator.placement.fleet import cluster, fleet, single, workload

PLUGIN = ClusterAffinity()
PROD_EU = {"env": "prod", "region": "eu"}


@pytest.mark.parametrize(
    ("placement", "reasons"),
    [
        ({}, ()),
        ({"clusterAffinity": {"matchLabels": {"env": "prod"}}}, ()),
        ({"clusterAffinity": {"matchLabels": {"env": "dev"}}}, ("labels do not match env=dev",)),
        (
            {
                "clusterAffinity": {
                    "matchExpressions": [{"key": "region", "operator": "In", "values": ["us"]}]
                }
            },
            ("labels do not match region in (us)",),
        ),
        ({"clusterAffinity": {"clusterNames": ["c1", "other"]}}, ()),
        (
            {"clusterAffinity": {"clusterNames": ["other"]}},
            ("not in clusterNames other",),
        ),
        (
            {"clusterAffinity": {"matchLabels": {"env": "prod"}, "exclude": ["c1"]}},
            ("excluded by cluster affinity",),
        ),
    ],
)
def test_filter(placement: dict[str, Any], reasons: tuple[str, ...]) -> None:
    other = cluster("other")
    ctx, w, c = single(cluster("c1", labels=PROD_EU), workload("w", **placement), others=[other])
    assert PLUGIN.filter(ctx, w, c).reasons == reasons


def test_named_clusters_are_the_listed_and_excluded_names() -> None:
    _, w, _ = single(
        cluster("c1"),
        workload("w", clusterAffinity={"clusterNames": ["c1"], "exclude": ["c2"]}),
        others=[cluster("c2")],
    )
    assert set(PLUGIN.named_clusters(w)) == {"c1", "c2"}


FALLBACK: dict[str, Any] = {
    "clusterAffinities": [
        {"name": "prefer-eu", "matchLabels": {"region": "eu"}},
        {"name": "fallback-us", "matchLabels": {"region": "us"}},
    ],
    "maxClusters": 1,
}
UPGRADING = {"key": "calibrator.dev/upgrading", "value": "", "effect": "NoSchedule"}


def test_first_affinity_with_a_feasible_cluster_wins() -> None:
    snapshot = fleet(
        [cluster("eu-1", labels={"region": "eu"}), cluster("us-1", labels={"region": "us"})],
        [workload("w", **FALLBACK)],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"eu-1": 1}
    assert decision.affinity == "prefer-eu"


def test_falls_back_when_the_preferred_term_has_no_feasible_cluster() -> None:
    snapshot = fleet(
        [
            cluster("eu-1", labels={"region": "eu"}, taints=[UPGRADING]),
            cluster("us-1", labels={"region": "us"}),
            cluster("ap-1", labels={"region": "ap"}),
        ],
        [workload("w", **FALLBACK)],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"us-1": 1}
    assert decision.affinity == "fallback-us"
    # The EU cluster is explained by the term that wanted it, not by "wrong region for US".
    assert decision.reasons["eu-1"] == ("untolerated taint calibrator.dev/upgrading=:NoSchedule",)
    assert decision.reasons["ap-1"] == (
        "affinity prefer-eu: labels do not match region=eu",
        "affinity fallback-us: labels do not match region=us",
    )


def test_falls_back_when_the_preferred_term_cannot_hold_every_replica() -> None:
    small = {"cpu": "1", "memory": "4Gi"}
    snapshot = fleet(
        [
            cluster("eu-1", labels={"region": "eu"}, capacity=small),
            cluster("us-1", labels={"region": "us"}),
        ],
        [
            workload(
                "w",
                replicas=4,
                requests={"cpu": "500m", "memory": "1Gi"},
                clusterAffinities=FALLBACK["clusterAffinities"],
                replicaScheduling={"type": "Dynamic"},
            )
        ],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.replicas == {"us-1": 4}
    assert decision.reasons["eu-1"] == (
        "Dynamic division placed only 2 of 4 replicas on the 1 feasible cluster(s) "
        "(limited by capacity)",
    )


def test_no_term_fits_is_unschedulable_with_reasons_for_every_cluster() -> None:
    snapshot = fleet(
        [cluster("ap-1", labels={"region": "ap"}), cluster("ap-2", labels={"region": "ap"})],
        [workload("w", **FALLBACK)],
    )
    decision = place(snapshot).decision("default/w")
    assert decision.unschedulable
    assert decision.clusters == ()
    assert set(decision.reasons) == {"ap-1", "ap-2"}
