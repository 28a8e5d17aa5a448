"""Cluster fields (provider, region, zones): where they come from and how selectors match them.

Tables written from the documented rules (docs/decisions.md "Cluster fields", Karmada's
ClusterAffinity.fieldSelector semantics), not from upstream tests.
"""

from __future__ import annotations

import pytest

from orchestrator.domain.errors import InputError
from orchestrator.domain.location import (
    FieldRequirement,
    FieldSelector,
    Location,
    SpreadConstraint,
    cluster_location,
    field_selector_from_mapping,
    groups_of,
    provider_of_kind,
)


@pytest.mark.parametrize(
    ("labels", "kind", "domains", "expected"),
    [
        ({}, None, (), Location()),
        # region: the well-known label wins over the v1 shorthand
        (
            {"topology.kubernetes.io/region": "eu-west", "region": "eu"},
            None,
            (),
            Location(None, "eu-west"),
        ),
        ({"region": "eu"}, None, (), Location(None, "eu")),
        # provider: an explicit label wins over the infrastructure kind
        ({}, "AWSCluster", (), Location("aws")),
        ({}, "AWSManagedCluster", (), Location("aws")),
        ({}, "DockerCluster", (), Location("docker")),
        ({}, "DevCluster", (), Location("dev")),
        ({"calibrator.dev/provider": "on-prem"}, "VSphereCluster", (), Location("on-prem")),
        # zones: the zone label is one zone; else every failure domain, sorted, once
        (
            {},
            None,
            ("eu-west-1b", "eu-west-1a", "eu-west-1b"),
            Location(zones=("eu-west-1a", "eu-west-1b")),
        ),
        ({"topology.kubernetes.io/zone": "z1"}, None, ("fd1", "fd2"), Location(zones=("z1",))),
    ],
)
def test_cluster_location_sources(
    labels: dict[str, str], kind: str | None, domains: tuple[str, ...], expected: Location
) -> None:
    assert cluster_location(labels, infrastructure_kind=kind, failure_domains=domains) == expected


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("AzureCluster", "azure"),
        ("GCPManagedCluster", "gcp"),
        ("OpenStackCluster", "openstack"),
        ("Metal3Cluster", "metal3"),
        ("Cluster", None),  # no provider left in the name
        ("Machine", None),  # not an infrastructure cluster kind
    ],
)
def test_provider_of_kind(kind: str, expected: str | None) -> None:
    assert provider_of_kind(kind) == expected


def test_malformed_failure_domain_names_are_an_input_error() -> None:
    with pytest.raises(InputError, match=r"status\.failureDomains\[0\]: invalid value"):
        cluster_location({}, failure_domains=("zone a",))


EU = Location("aws", "eu", ("eu-a", "eu-b"))
BARE = Location()


@pytest.mark.parametrize(
    ("key", "operator", "values", "location", "matches"),
    [
        ("provider", "In", ("aws",), EU, True),
        ("provider", "In", ("gcp",), EU, False),
        ("provider", "In", ("aws",), BARE, False),
        ("provider", "NotIn", ("gcp",), EU, True),
        ("provider", "NotIn", ("gcp",), BARE, True),  # as a label selector: absent matches NotIn
        ("region", "In", ("eu", "us"), EU, True),
        ("region", "NotIn", ("eu",), EU, False),
        # zone In: any zone of the cluster listed (Karmada since its zones fix), none: no match
        ("zone", "In", ("eu-a", "eu-b", "eu-c"), EU, True),
        ("zone", "In", ("eu-a",), EU, True),
        ("zone", "In", ("eu-b",), EU, True),
        ("zone", "In", ("eu-c",), EU, False),
        ("zone", "In", ("eu-a",), BARE, False),
        # zone NotIn: none of the cluster's zones listed
        ("zone", "NotIn", ("eu-c",), EU, True),
        ("zone", "NotIn", ("eu-b",), EU, False),
        ("zone", "NotIn", ("eu-a",), BARE, True),
    ],
)
def test_field_requirements(
    key: str, operator: str, values: tuple[str, ...], location: Location, matches: bool
) -> None:
    requirement = field_selector_from_mapping(
        {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}, "f"
    ).match_expressions[0]
    assert requirement.matches(location) is matches


def test_field_selector_ands_its_expressions() -> None:
    selector = FieldSelector(
        (
            FieldRequirement("provider", "In", ("aws",)),
            FieldRequirement("zone", "NotIn", ("eu-b",)),
        )
    )
    assert not selector.matches(EU)
    assert selector.matches(Location("aws", "eu", ("eu-a",)))
    assert selector.describe() == "provider in (aws),zone notin (eu-b)"
    assert FieldSelector().matches(BARE)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({}, r"f\.matchExpressions: expected a non-empty list"),
        ({"matchExpressions": []}, "expected a non-empty list"),
        ({"matchLabels": {}}, r"unknown field\(s\) 'matchLabels'"),
        ("region=eu", "expected a mapping"),
        (
            {"matchExpressions": [{"key": "env", "operator": "In", "values": ["x"]}]},
            "key: must be one of provider, region, zone",
        ),
        (
            {"matchExpressions": [{"key": "region", "operator": "Exists"}]},
            "operator: must be one of In, NotIn",
        ),
        ({"matchExpressions": [{"key": "region", "operator": "In"}]}, "needs a non-empty list"),
        (
            {"matchExpressions": [{"key": "region", "operator": "In", "values": "eu"}]},
            "needs a non-empty list",
        ),
        (
            {"matchExpressions": [{"key": "region", "operator": "In", "values": [1]}]},
            r"values\[0\]: must be a string",
        ),
        (
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu west"]}]},
            "invalid value",
        ),
        (
            {
                "matchExpressions": [
                    {"key": "region", "operator": "In", "values": ["eu"], "extra": 1}
                ]
            },
            r"unknown field\(s\) 'extra'",
        ),
        ({"matchExpressions": ["region"]}, r"matchExpressions\[0\]: expected a mapping"),
    ],
)
def test_field_selector_is_strict(raw: object, message: str) -> None:
    with pytest.raises(InputError, match=message):
        field_selector_from_mapping(raw, "f")


@pytest.mark.parametrize(
    ("field", "location", "groups"),
    [
        ("cluster", EU, ("c1",)),
        ("region", EU, ("eu",)),
        ("provider", EU, ("aws",)),
        ("zone", EU, ("eu-a", "eu-b")),
        ("region", BARE, ()),
        ("zone", BARE, ()),
    ],
)
def test_groups_of(field: str, location: Location, groups: tuple[str, ...]) -> None:
    assert groups_of(field, "c1", location) == groups  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("constraint", "text"),
    [
        (SpreadConstraint("region", 2), "at least 2 regions"),
        (SpreadConstraint("zone", 2, 2), "exactly 2 zones"),
        (SpreadConstraint("cluster", 1, 3), "at least 1 and at most 3 clusters"),
    ],
)
def test_spread_constraint_describes_itself(constraint: SpreadConstraint, text: str) -> None:
    assert constraint.describe() == text
