from __future__ import annotations

from typing import Any

import pytest

from orchestrator.placement import place
from orchestrator.placement.plugins.cluster_affinity import ClusterAffinityFilter
from tests.orchestrator.placement.fleet import cluster, fleet, single, workload

PLUGIN = ClusterAffinityFilter()
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


def _fields(*expressions: tuple[str, str, list[str]]) -> dict[str, Any]:
    return {
        "matchExpressions": [{"key": k, "operator": op, "values": v} for k, op, v in expressions]
    }


@pytest.mark.parametrize(
    ("cluster_fields", "field_selector", "reasons"),
    [
        ({"provider": "aws"}, _fields(("provider", "In", ["aws"])), ()),
        (
            {"provider": "aws"},
            _fields(("provider", "NotIn", ["aws"])),
            ("fields do not match provider notin (aws)",),
        ),
        ({}, _fields(("provider", "NotIn", ["aws"])), ()),  # no provider: NotIn holds
        ({}, _fields(("region", "In", ["eu"])), ("fields do not match region in (eu)",)),
        ({"zones": ["eu-a", "eu-b"]}, _fields(("zone", "In", ["eu-a", "eu-b", "eu-c"])), ()),
        # zone In: any of the cluster's zones listed places it (Karmada's zones fix)
        ({"zones": ["eu-a", "eu-b"]}, _fields(("zone", "In", ["eu-a"])), ()),
        ({"zones": ["zone1", "zone2", "zone3"]}, _fields(("zone", "In", ["zone2"])), ()),
        (
            {"zones": ["eu-a", "eu-b"]},
            _fields(("zone", "In", ["eu-c"])),
            ("fields do not match zone in (eu-c)",),
        ),
        ({}, _fields(("zone", "In", ["eu-a"])), ("fields do not match zone in (eu-a)",)),
        ({}, _fields(("zone", "NotIn", ["eu-a"])), ()),  # no zones: NotIn holds
        (
            {"zones": ["eu-a"], "region": "eu"},
            _fields(("region", "In", ["eu"]), ("zone", "NotIn", ["eu-a"])),
            ("fields do not match region in (eu),zone notin (eu-a)",),
        ),
    ],
)
def test_field_selector(
    cluster_fields: dict[str, Any], field_selector: dict[str, Any], reasons: tuple[str, ...]
) -> None:
    item = {**cluster("c1"), **cluster_fields}
    w = workload("w", clusterAffinity={"fieldSelector": field_selector})
    ctx, wl, c = single(item, w)
    assert PLUGIN.filter(ctx, wl, c).reasons == reasons
    assert PLUGIN.fits(ctx, wl, c) == (not reasons)


def test_labels_and_fields_both_give_their_reason() -> None:
    item = {**cluster("c1", labels={"env": "dev"}), "region": "us"}
    affinity = {"matchLabels": {"env": "prod"}, "fieldSelector": _fields(("region", "In", ["eu"]))}
    ctx, w, c = single(item, workload("w", clusterAffinity=affinity))
    assert PLUGIN.filter(ctx, w, c).reasons == (
        "labels do not match env=prod",
        "fields do not match region in (eu)",
    )


def test_field_selector_places_on_matching_fields_only() -> None:
    snapshot = fleet(
        [
            {**cluster("aws-eu"), "provider": "aws", "region": "eu"},
            {**cluster("gcp-eu"), "provider": "gcp", "region": "eu"},
            {**cluster("aws-us"), "provider": "aws", "region": "us"},
        ],
        [
            workload(
                "w",
                clusterAffinity={
                    "fieldSelector": _fields(("provider", "In", ["aws"]), ("region", "In", ["eu"]))
                },
            )
        ],
    )
    (decision,) = place(snapshot).decisions
    assert decision.replicas == {"aws-eu": 1}
    assert decision.summary.text == (
        "1/3 clusters available: 2 fields do not match provider in (aws),region in (eu)"
    )


def test_clusternames_beside_a_selector_explain_each_class() -> None:
    """Names and a selector: every unnamed cluster says both, each with its own selector reason."""
    snapshot = fleet(
        [
            cluster("a", labels={"env": "prod"}),
            cluster("b", labels={"env": "dev"}),
            cluster("c", labels={"env": "prod"}),
        ],
        [workload("w", clusterAffinity={"clusterNames": ["a"], "matchLabels": {"env": "prod"}})],
    )
    (decision,) = place(snapshot).decisions
    assert dict(decision.reasons) == {
        "b": ("not in clusterNames a", "labels do not match env=prod"),
        "c": ("not in clusterNames a",),
    }
