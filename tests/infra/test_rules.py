from __future__ import annotations

from typing import Any

import pytest

from infra.rules import ALLOWED_POLICY, SKEW_POLICY, ResourceView, fleet_violations
from orchestrator.domain.errors import InputError


def cluster(
    name: str, version: str, pools: tuple[str, ...] = ("md-0",), cls: str = "cc"
) -> ResourceView:
    return ResourceView(
        f"urn:cluster:{name}",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": "fleet"},
            "spec": {
                "topology": {
                    "classRef": {"name": cls},
                    "version": version,
                    "workers": {
                        "machineDeployments": [{"class": "worker", "name": p} for p in pools]
                    },
                }
            },
        },
    )


def plain_cluster(name: str, cp: str, workers: dict[str, str]) -> list[ResourceView]:
    out = [
        ResourceView(
            f"urn:cluster:{name}",
            {
                "apiVersion": "cluster.x-k8s.io/v1beta2",
                "kind": "Cluster",
                "metadata": {"name": name, "namespace": "fleet"},
                "spec": {"controlPlaneRef": {"kind": "KubeadmControlPlane", "name": f"{name}-cp"}},
            },
        ),
        ResourceView(
            f"urn:kcp:{name}",
            {
                "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                "kind": "KubeadmControlPlane",
                "metadata": {"name": f"{name}-cp", "namespace": "fleet"},
                "spec": {"version": cp},
            },
        ),
    ]
    for pool, version in workers.items():
        out.append(
            ResourceView(
                f"urn:md:{name}-{pool}",
                {
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "MachineDeployment",
                    "metadata": {"name": f"{name}-{pool}", "namespace": "fleet"},
                    "spec": {"clusterName": name, "template": {"spec": {"version": version}}},
                },
            )
        )
    return out


def cluster_class(versions: list[str], name: str = "cc") -> ResourceView:
    return ResourceView(
        "urn:cc",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "ClusterClass",
            "metadata": {"name": name, "namespace": "fleet"},
            "spec": {"kubernetesVersions": versions},
        },
    )


def messages(
    views: list[ResourceView], allowed: list[str] | None = None
) -> list[tuple[str, str, str]]:
    return [(v.policy, v.urn, v.message) for v in fleet_violations(views, allowed)]


def test_healthy_fleet_has_no_violations() -> None:
    views = [
        cluster_class(["v1.33.0", "v1.34.0"]),
        cluster("a", "v1.33.0"),
        cluster("b", "v1.34.0"),
        *plain_cluster("c", "v1.34.0", {"md-0": "v1.31.0", "md-1": "v1.34.0"}),
    ]
    assert messages(views) == []


@pytest.mark.parametrize(
    ("cp", "worker", "expected"),
    [
        (
            "v1.34.0",
            "v1.30.5",
            "workers c-md-0 at v1.30.5 are 4 minors behind the control plane at v1.34.0 (kubelets may trail by at most 3)",
        ),
        (
            "v1.33.0",
            "v1.34.0",
            "workers c-md-0 at v1.34.0 are newer than the control plane at v1.33.0",
        ),
        (
            "v1.26.0",
            "v1.23.0",
            "workers c-md-0 at v1.23.0 are 3 minors behind the control plane at v1.26.0 (kubelets may trail by at most 2)",
        ),
        ("v1.34.0-rc.1", "v1.30.0", "4 minors behind"),
    ],
)
def test_skew_violation_names_the_pool(cp: str, worker: str, expected: str) -> None:
    found = messages(plain_cluster("c", cp, {"md-0": worker}))
    assert [(p, u) for p, u, _ in found] == [(SKEW_POLICY, "urn:md:c-md-0")]
    assert expected in found[0][2]
    assert found[0][2].startswith("cluster c: ")


def test_allowed_list_from_config_wins_over_cluster_class() -> None:
    views = [cluster_class(["v1.33.0"]), cluster("a", "v1.33.0")]
    found = messages(views, ["v1.34.0", "v1.35.0"])
    assert (
        ALLOWED_POLICY,
        "urn:cluster:a",
        "cluster a control plane at v1.33.0 is not in the allowed list (v1.34.0, v1.35.0)",
    ) in found


def test_cluster_class_versions_are_the_default_allowed_list() -> None:
    found = messages([cluster_class(["v1.33.0", "v1.34.0"]), cluster("a", "v1.35.0")])
    assert found[0][:2] == (ALLOWED_POLICY, "urn:cluster:a")
    assert "not in ClusterClass cc spec.kubernetesVersions (v1.33.0, v1.34.0)" in found[0][2]


def test_plain_cluster_workers_are_checked_against_the_allowed_list() -> None:
    found = messages(plain_cluster("c", "v1.34.0", {"md-0": "v1.33.2"}), ["v1.33.0", "v1.34.0"])
    assert found == [
        (
            ALLOWED_POLICY,
            "urn:md:c-md-0",
            "cluster c workers c-md-0 at v1.33.2 is not in the allowed list (v1.33.0, v1.34.0)",
        )
    ]


def test_unparseable_versions_are_violations_not_crashes() -> None:
    found = messages([cluster("a", "latest"), *plain_cluster("c", "v1.34.0", {"md-0": "1.33"})])
    assert {u for _, u, _ in found} == {"urn:cluster:a", "urn:md:c-md-0"}
    assert all(p == ALLOWED_POLICY for p, _, _ in found)


def test_bad_allowed_list_is_an_input_error() -> None:
    with pytest.raises(InputError, match="policy config allowedVersions"):
        fleet_violations([], ["v1.x"])


def test_non_capi_resources_are_ignored() -> None:
    other: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    assert messages([ResourceView("urn:ns", other), ResourceView("urn:p", {})]) == []
