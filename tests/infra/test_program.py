"""The fleet program under Pulumi mocks: the resource graph it registers, and what the policy
pack's rules make of it (infra.rules reads the same inputs the engine would hand the pack)."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from infra.program import build_fleet, main
from infra.rules import SKEW_POLICY, ResourceView, fleet_violations
from infra.spec import FleetSpecError, parse_fleet
from tests.infra.conftest import RecordingMocks, set_config

FLEET: dict[str, Any] = {
    "namespace": "fleet",
    "clusters": [
        {
            "name": "prod-eu",
            "version": "v1.34.0",
            "labels": {"env": "prod", "region": "eu"},
            "controlPlaneReplicas": 3,
            "machineDeployments": [
                {"name": "md-0", "replicas": 2},
                {"name": "md-1", "replicas": 1},
            ],
        },
        {
            "name": "dev-eu",
            "version": "v1.33.0",
            "topology": False,
            "machineDeployments": [{"name": "md-0", "version": "v1.31.0"}],
        },
    ],
    "workloads": [
        {
            "name": "web",
            "namespace": "fleet",
            "apis": ["apps/v1/Deployment"],
            "replicas": 3,
            "placement": {"clusterAffinity": {"matchLabels": {"env": "prod"}}},
        },
    ],
}


def run(fn: Any) -> None:
    pulumi.runtime.test(fn)()  # type: ignore[no-untyped-call]


def views(mocks: RecordingMocks) -> list[ResourceView]:
    return [ResourceView(f"urn:{r.typ}::{r.name}", r.inputs) for r in mocks.resources]


def test_resource_graph_of_a_fleet(mocks: RecordingMocks) -> None:
    run(lambda: build_fleet(parse_fleet(FLEET), provider=None))
    # The SDK registers resources asynchronously: assert the set and the graph, never the order.
    capi = {r.name: r for r in mocks.of_type("calibrator:fleet:CapiCluster")}
    assert set(capi) == {"prod-eu", "dev-eu"}
    (bundle,) = mocks.of_type("calibrator:fleet:ClusterClass")
    (cc,) = mocks.objects("ClusterClass")
    assert cc.inputs["metadata"]["name"] == "calibrator-in-memory"
    # The ClusterClass waits for its templates, the templates for the namespace; every cluster
    # waits for the ClusterClass (a dependency on a component is one on its children).
    (ns,) = mocks.of_type("kubernetes:core/v1:Namespace")
    in_bundle = [r for r in mocks.resources if r.parent == bundle.urn]
    templates = {r.urn for r in in_bundle if r is not cc and r is not ns}
    assert len(templates) == 5 and ns.parent == bundle.urn
    assert templates | {ns.urn} <= cc.dependencies
    assert all(ns.urn in mocks.by_urn(t).dependencies for t in templates)
    assert all(cc.urn in c.dependencies for c in capi.values())
    # Every CAPI object of a cluster is parented by its component, and the Cluster depends on
    # the others (CAPI reconciles it at once and expects what it references).
    for name, component in capi.items():
        children = [r for r in mocks.resources if r.parent == component.urn]
        (cluster,) = [r for r in children if r.inputs.get("kind") == "Cluster"]
        assert cluster.inputs["metadata"]["name"] == name
        assert {r.urn for r in children if r is not cluster} <= cluster.dependencies
    # FleetWorkloads wait for every cluster's Cluster object.
    (fw,) = mocks.objects("FleetWorkload")
    clusters_urns = {r.urn for r in mocks.objects("Cluster")}
    assert len(clusters_urns) == 2 and clusters_urns <= fw.dependencies
    clusters = {r.inputs["metadata"]["name"]: r.inputs for r in mocks.objects("Cluster")}
    prod = clusters["prod-eu"]
    assert prod["metadata"]["namespace"] == "fleet"
    assert prod["metadata"]["labels"] == {"env": "prod", "region": "eu"}
    assert prod["metadata"]["annotations"]["pulumi.com/waitFor"] == "condition=Available"
    topology = prod["spec"]["topology"]
    assert topology["version"] == "v1.34.0"
    assert topology["controlPlane"]["replicas"] == 3
    assert topology["workers"]["machineDeployments"] == [
        {"class": "worker", "name": "md-0", "replicas": 2},
        {"class": "worker", "name": "md-1", "replicas": 1},
    ]
    # The plain cluster: KCP at the control-plane version, each pool at its own version.
    (kcp,) = mocks.objects("KubeadmControlPlane")
    assert kcp.inputs["spec"]["version"] == "v1.33.0"
    (md,) = mocks.objects("MachineDeployment")
    assert md.inputs["metadata"]["name"] == "dev-eu-md-0"
    assert md.inputs["spec"]["template"]["spec"]["version"] == "v1.31.0"
    assert md.inputs["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] == "dev-eu-md-0"
    (workload,) = mocks.objects("FleetWorkload")
    assert workload.inputs["apiVersion"] == "calibrator.dev/v1alpha1"
    assert workload.inputs["metadata"]["name"] == "web"
    # Background deletion everywhere: foreground needs a garbage collector the plane lacks.
    objects = [r for r in mocks.resources if "kind" in r.inputs and r.inputs["kind"] != "Namespace"]
    assert {
        r.inputs["metadata"]["annotations"]["pulumi.com/deletionPropagationPolicy"] for r in objects
    } == {"background"}
    assert workload.inputs["spec"]["replicas"] == 3
    assert workload.inputs["spec"]["placement"] == {
        "clusterAffinity": {"matchLabels": {"env": "prod"}}
    }


def test_every_object_is_in_the_fleet_namespace(mocks: RecordingMocks) -> None:
    run(lambda: build_fleet(parse_fleet(FLEET), provider=None))
    namespaced = [
        r for r in mocks.resources if r.inputs.get("kind") and r.inputs.get("kind") != "Namespace"
    ]
    assert namespaced and {r.inputs["metadata"]["namespace"] for r in namespaced} == {"fleet"}
    (ns,) = mocks.of_type("kubernetes:core/v1:Namespace")
    assert ns.inputs["metadata"]["name"] == "fleet"


def test_declared_fleet_passes_the_policy(mocks: RecordingMocks) -> None:
    run(lambda: build_fleet(parse_fleet(FLEET), provider=None))
    assert fleet_violations(views(mocks)) == []


def test_policy_rejects_a_skewed_plain_cluster(mocks: RecordingMocks) -> None:
    fleet = {
        **FLEET,
        "clusters": [
            {
                "name": "old",
                "version": "v1.35.0",
                "topology": False,
                "machineDeployments": [{"name": "md-0", "version": "v1.31.0"}],
            },
        ],
        "workloads": [],
    }
    run(lambda: build_fleet(parse_fleet(fleet), provider=None))
    found = fleet_violations(views(mocks))
    assert [(v.policy, v.urn) for v in found] == [
        (
            SKEW_POLICY,
            "urn:kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment::machinedeployment-old-md-0",
        )
    ]
    assert "4 minors behind the control plane at v1.35.0" in found[0].message


def test_policy_rejects_a_version_the_cluster_class_does_not_list(mocks: RecordingMocks) -> None:
    fleet = {**FLEET, "clusters": [{"name": "future", "version": "v1.36.0"}], "workloads": []}
    run(lambda: build_fleet(parse_fleet(fleet), provider=None))
    (violation,) = fleet_violations(views(mocks))
    assert (
        "cluster future control plane at v1.36.0 is not in ClusterClass calibrator-in-memory"
        in violation.message
    )


def test_main_reads_stack_config_and_uses_the_kubeconfig_secret(mocks: RecordingMocks) -> None:
    set_config({**FLEET, "environment": "local", "kubeconfig": "apiVersion: v1\nkind: Config\n"})
    run(main)
    (provider,) = mocks.of_type("pulumi:providers:kubernetes")
    # The kubeconfig reaches the provider as a secret (Pulumi's secret signature), never plain.
    secret = provider.inputs["kubeconfig"]
    assert secret[pulumi.runtime.rpc._special_sig_key] == pulumi.runtime.rpc._special_secret_sig
    assert secret["value"] == "apiVersion: v1\nkind: Config\n"
    assert all(
        r.provider and "management" in r.provider for r in mocks.resources if r.inputs.get("kind")
    )
    assert not mocks.of_type("command:local:Command")


def test_kind_stack_creates_the_management_cluster_first(mocks: RecordingMocks) -> None:
    set_config(
        {
            **FLEET,
            "environment": "kind",
            "backend": "docker",
            "clusters": [{"name": "kind-a", "version": "v1.34.0"}],
            "workloads": [],
        }
    )
    run(main)
    commands = {r.name: r.inputs for r in mocks.of_type("command:local:Command")}
    assert set(commands) == {"kind-cluster", "kind-kubeconfig", "clusterctl-init"}
    assert commands["kind-cluster"]["create"].startswith(
        "kind create cluster --name calibrator-mgmt --config "
    )
    assert commands["kind-cluster"]["delete"] == "kind delete cluster --name calibrator-mgmt"
    assert "clusterctl init --infrastructure docker" in commands["clusterctl-init"]["create"]
    assert commands["clusterctl-init"]["environment"] == {"CLUSTER_TOPOLOGY": "true"}
    crds = {
        r.inputs["metadata"]["name"]
        for r in mocks.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
    }
    assert crds == {"fleetworkloads.calibrator.dev", "placementdecisions.calibrator.dev"}
    assert [r.inputs["spec"]["topology"]["classRef"]["name"] for r in mocks.objects("Cluster")] == [
        "calibrator-docker"
    ]


def test_bad_stack_config_fails_before_any_resource(mocks: RecordingMocks) -> None:
    set_config({"environment": "local", "clusters": [{"name": "a", "version": "one"}]})
    with pytest.raises(FleetSpecError, match=r"clusters\[0\].version"):
        run(main)
    assert mocks.resources == []


def test_unknown_environment_is_rejected(mocks: RecordingMocks) -> None:
    set_config({**FLEET, "environment": "cloud"})
    with pytest.raises(FleetSpecError, match="environment: must be one of local, kind"):
        run(main)
    assert mocks.resources == []
