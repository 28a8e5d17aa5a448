"""The snapshot's cluster fields, fieldSelector and spreadConstraints (issue 15 §2): strict input."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.domain.location import FieldRequirement, SpreadConstraint
from orchestrator.domain.snapshot import Cluster, SnapshotError
from orchestrator.domain.snapshot_dump import dump_snapshot, snapshot_to_mapping
from orchestrator.domain.snapshot_load import load_snapshot, snapshot_from_mapping


def _cluster(**fields: Any) -> Cluster:
    item = {"name": "a", "controlPlane": {"version": "v1.33.0"}, **fields}
    return snapshot_from_mapping({"clusters": [item]}).clusters[0]


def _placement(**placement: Any) -> Any:
    raw = {
        "clusters": [{"name": "a", "controlPlane": {"version": "v1.33.0"}}],
        "workloads": [{"name": "w", "placement": placement}],
    }
    return snapshot_from_mapping(raw).workloads[0].placement


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, (None, None, ())),
        (
            {"provider": "aws", "region": "eu-west-1", "zones": ["eu-west-1b", "eu-west-1a"]},
            ("aws", "eu-west-1", ("eu-west-1a", "eu-west-1b")),
        ),
        # a snapshot from before the fields: derived from the labels, as placement read them
        (
            {"labels": {"region": "eu", "topology.kubernetes.io/zone": "eu-1"}},
            (None, "eu", ("eu-1",)),
        ),
        ({"labels": {"calibrator.dev/provider": "gcp"}}, ("gcp", None, ())),
        # an explicit field wins over the label
        ({"labels": {"region": "eu"}, "region": "us"}, (None, "us", ())),
        # a label value that is no valid field value still loads, as it did before
        ({"labels": {"region": "Europe West"}}, (None, "Europe West", ())),
    ],
)
def test_cluster_fields(fields: dict[str, Any], expected: tuple[Any, ...]) -> None:
    cluster = _cluster(**fields)
    assert (cluster.provider, cluster.region, cluster.zones) == expected


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"provider": 7}, r"clusters\[0\]\.provider: must be a string"),
        ({"provider": None}, r"clusters\[0\]\.provider: must be a string"),
        ({"region": ""}, r"clusters\[0\]\.region: invalid value"),
        ({"region": "eu west"}, "invalid value"),
        ({"region": "x" * 64}, "longer than 63 characters"),
        ({"region": ["eu"]}, "must be a string"),
        ({"zones": "eu-1a"}, r"clusters\[0\]\.zones: expected a list of zones"),
        ({"zones": ["a", "a"]}, "duplicate zones"),
        ({"zones": ["a", True]}, r"zones\[1\]: must be a string"),
        ({"zones": [f"z{i}" for i in range(33)]}, "more than 32 zones"),
        ({"zone": "a"}, r"unknown field\(s\) zone"),
    ],
)
def test_cluster_fields_are_strict(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        _cluster(**fields)


def test_cluster_fields_round_trip_and_label_only_files_stay_as_they_were() -> None:
    raw = {
        "clusters": [
            {"name": "a", "controlPlane": {"version": "v1.33.0"}, "labels": {"region": "eu"}},
            {
                "name": "b",
                "controlPlane": {"version": "v1.33.0"},
                "labels": {"region": "eu"},
                "provider": "aws",
                "region": "us",
                "zones": ["us-1a", "us-1b"],
            },
        ]
    }
    snapshot = snapshot_from_mapping(raw)
    dumped = snapshot_to_mapping(snapshot)["clusters"]
    assert isinstance(dumped, list)
    assert not {"provider", "region", "zones"} & set(dumped[0])  # implied by its labels
    assert (dumped[1]["provider"], dumped[1]["region"], dumped[1]["zones"]) == (
        "aws",
        "us",
        ["us-1a", "us-1b"],
    )
    assert load_snapshot(dump_snapshot(snapshot)) == snapshot


def test_field_selector_parses_into_the_affinity_term_and_round_trips() -> None:
    affinity = {
        "matchLabels": {"env": "prod"},
        "fieldSelector": {
            "matchExpressions": [
                {"key": "region", "operator": "In", "values": ["us", "eu"]},
                {"key": "zone", "operator": "NotIn", "values": ["eu-1c"]},
            ]
        },
    }
    snapshot = snapshot_from_mapping(
        {
            "clusters": [{"name": "a", "controlPlane": {"version": "v1.33.0"}}],
            "workloads": [{"name": "w", "placement": {"clusterAffinity": affinity}}],
        }
    )
    (term,) = snapshot.workloads[0].placement.affinities
    assert term.field_selector.match_expressions == (
        FieldRequirement("region", "In", ("eu", "us")),
        FieldRequirement("zone", "NotIn", ("eu-1c",)),
    )
    assert term.describe() == "labels env=prod; fields region in (eu,us),zone notin (eu-1c)"
    assert load_snapshot(dump_snapshot(snapshot)) == snapshot


def test_field_selector_errors_name_the_term() -> None:
    with pytest.raises(
        SnapshotError,
        match=r"placement\.clusterAffinities\[1\]\.fieldSelector\.matchExpressions\[0\]\.key",
    ):
        _placement(
            clusterAffinities=[
                {"matchLabels": {"env": "prod"}},
                {"fieldSelector": {"matchExpressions": [{"key": "cloud", "operator": "In"}]}},
            ]
        )


@pytest.mark.parametrize(
    ("spread", "expected"),
    [
        ([{"spreadByField": "region"}], (SpreadConstraint("region", 1, None),)),
        (  # sorted cluster first, whatever the order given
            [
                {"spreadByField": "zone", "minGroups": 2, "maxGroups": 3},
                {"spreadByField": "cluster", "minGroups": 2},
            ],
            (SpreadConstraint("cluster", 2, None), SpreadConstraint("zone", 2, 3)),
        ),
        ([{"spreadByField": "provider", "maxGroups": 1}], (SpreadConstraint("provider", 1, 1),)),
    ],
)
def test_spread_constraints_parse_and_round_trip(
    spread: list[dict[str, Any]], expected: tuple[SpreadConstraint, ...]
) -> None:
    policy = _placement(spreadConstraints=spread)
    assert policy.spread_constraints == expected
    raw = {
        "clusters": [{"name": "a", "controlPlane": {"version": "v1.33.0"}}],
        "workloads": [{"name": "w", "placement": {"spreadConstraints": spread}}],
    }
    snapshot = snapshot_from_mapping(raw)
    assert load_snapshot(dump_snapshot(snapshot)) == snapshot


@pytest.mark.parametrize(
    ("placement", "message"),
    [
        ({"spreadConstraints": {"spreadByField": "region"}}, "expected a list"),
        (
            {"spreadConstraints": [{}]},
            r"spreadConstraints\[0\]: missing required field 'spreadByField'",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "rack"}]},
            "must be one of cluster, region, zone, provider",
        ),
        ({"spreadConstraints": [{"spreadByLabel": "env"}]}, r"unknown field\(s\) spreadByLabel"),
        (
            {"spreadConstraints": [{"spreadByField": "region", "minGroups": 0}]},
            "minGroups: must be an integer from 1",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "region", "minGroups": "2"}]},
            "minGroups: must be an integer",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "region", "minGroups": True}]},
            "minGroups: must be an integer",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "region", "maxGroups": 1.5}]},
            "maxGroups: must be an integer",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "region", "minGroups": 3, "maxGroups": 2}]},
            "maxGroups 2 is below minGroups 3",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "zone"}, {"spreadByField": "zone"}]},
            "a second constraint spreading by zone",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "zone"}, {"spreadByField": "region"}]},
            "spread by one of region, zone or provider, not zone and region",
        ),
        (
            {
                "spreadConstraints": [{"spreadByField": "region"}],
                "replicaScheduling": {
                    "type": "Weighted",
                    "weights": [{"cluster": "a", "weight": 1}],
                },
            },
            "do not combine with static weights",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "cluster", "maxGroups": 2}], "maxClusters": 2},
            "give maxClusters or a cluster spread's maxGroups, not both",
        ),
        (
            {"spreadConstraints": [{"spreadByField": "region", "minGroups": 3}], "maxClusters": 2},
            "minGroups 3 regions can never be met on at most 2 clusters",
        ),
        (
            {
                "spreadConstraints": [
                    {"spreadByField": "provider", "minGroups": 2},
                    {"spreadByField": "cluster", "maxGroups": 1},
                ]
            },
            "minGroups 2 providers can never be met on at most 1 cluster",
        ),
    ],
)
def test_spread_constraints_are_strict(placement: dict[str, Any], message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        _placement(**placement)


def test_a_zone_minimum_above_the_cluster_cap_is_allowed() -> None:
    """One cluster can span several zones, so the cap does not rule the minimum out."""
    policy = _placement(
        spreadConstraints=[{"spreadByField": "zone", "minGroups": 3}], maxClusters=1
    )
    assert policy.spread_constraints == (SpreadConstraint("zone", 3, None),)
