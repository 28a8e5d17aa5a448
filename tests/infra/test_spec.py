from __future__ import annotations

from typing import Any

import pytest

from infra.spec import FleetSpecError, parse_fleet
from orchestrator.domain.versions import parse_version

GOOD: dict[str, Any] = {
    "namespace": "fleet",
    "clusters": [
        {"name": "prod-eu", "version": "v1.33.0", "labels": {"env": "prod"}},
        {
            "name": "dev-eu",
            "version": "1.32.0",
            "topology": False,
            "controlPlaneReplicas": 3,
            "machineDeployments": [
                {"name": "md-0", "replicas": 2, "version": "v1.30.0"},
                {"name": "md-1"},
            ],
        },
    ],
    "workloads": [
        {"name": "web", "namespace": "fleet", "apis": ["apps/v1/Deployment"], "replicas": 2}
    ],
}


def test_parses_defaults_and_versions() -> None:
    spec = parse_fleet(GOOD)
    assert spec.backend == "in-memory" and spec.wait_for_available
    prod, dev = spec.clusters
    assert prod.topology and prod.version == parse_version("v1.33.0")
    assert [md.name for md in prod.machine_deployments] == ["md-0"]
    assert dev.control_plane_replicas == 3
    assert [str(dev.worker_version(md)) for md in dev.machine_deployments] == [
        "v1.30.0",
        "v1.32.0",
    ]


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def _cluster(**changes: Any) -> dict[str, Any]:
    return {"clusters": [{"name": "a", "version": "v1.33.0", **changes}]}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"clusters": []}, "clusters: a fleet needs at least one cluster"),
        ({}, "clusters: a fleet needs at least one cluster"),
        ({"clusters": "a"}, "clusters: must be a list"),
        (_cluster(version="1.33"), "clusters[0].version: "),
        (_cluster(version=None), "clusters[0].version: "),
        ({"clusters": [{"name": "a"}]}, "clusters[0]: missing required field 'version'"),
        (_cluster(name="Prod_EU"), "clusters[0].name: 'Prod_EU' is not a DNS-1123 label"),
        (
            _cluster(controlPlaneReplicas=0),
            "clusters[0].controlPlaneReplicas: must be an integer >= 1",
        ),
        (_cluster(topology="yes"), "clusters[0].topology: must be true or false"),
        (_cluster(region="eu"), "clusters[0]: unknown field(s) region"),
        (_cluster(labels={"env": 1}), "clusters[0].labels: keys and values must be strings"),
        (
            _cluster(machineDeployments=[{"name": "md-0", "version": "v1.32.0"}]),
            "clusters[0].machineDeployments[0].version: a managed-topology cluster runs every pool",
        ),
        (
            _cluster(machineDeployments=[{"name": "md-0"}, {"name": "md-0"}]),
            "clusters[0].machineDeployments: duplicate names",
        ),
        (
            _cluster(machineDeployments=[{"name": "md-0", "replicas": -1}]),
            "clusters[0].machineDeployments[0].replicas: must be an integer >= 0",
        ),
        (
            {
                "clusters": [
                    {"name": "a", "version": "v1.33.0"},
                    {"name": "a", "version": "v1.34.0"},
                ]
            },
            "clusters: duplicate cluster name(s) a",
        ),
        (_with(backend="vsphere"), "backend: must be one of in-memory, docker"),
        (
            _with(
                backend="docker", clusters=[{"name": "a", "version": "v1.33.0", "topology": False}]
            ),
            "clusters[0].topology: the docker backend has only the ClusterClass template",
        ),
        (_with(waitForAvailable="no"), "waitForAvailable: must be true or false"),
        (_with(colour="blue"), "config: unknown field(s) colour"),
        (_with(workloads=[{"name": "w", "replicas": "many"}]), "workloads[0].replicas"),
        (
            _with(workloads=[{"name": "w", "placement": {"clusters": ["nowhere"]}}]),
            "unknown cluster 'nowhere'",
        ),
    ],
)
def test_bad_config_is_one_precise_error(config: dict[str, Any], message: str) -> None:
    with pytest.raises(FleetSpecError) as err:
        parse_fleet(config)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
