from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from orchestrator.kube.templates import (
    TEMPLATES,
    TemplateError,
    cluster_class_objects,
    cluster_objects,
    substitute,
)

ROOT = Path(__file__).parents[3]


def test_substitute_values_defaults_and_missing() -> None:
    assert substitute("${A} ${B:=2} ${C:-3}", {"A": 1, "C": "x"}) == "1 2 x"
    with pytest.raises(TemplateError, match="template variables without a value: A, Z"):
        substitute("${Z} ${A} ${A}", {})


@pytest.mark.parametrize("topology", [True, False])
def test_cluster_objects(topology: bool) -> None:
    objs = cluster_objects(
        "c1",
        "fleet",
        "v1.33.0",
        control_plane_replicas=3,
        worker_replicas=2,
        labels={"env": "prod"},
        topology=topology,
    )
    cluster = next(o for o in objs if o["kind"] == "Cluster")
    assert cluster["metadata"] == {"name": "c1", "namespace": "fleet", "labels": {"env": "prod"}}
    if topology:
        assert cluster["spec"]["topology"]["version"] == "v1.33.0"
        assert cluster["spec"]["topology"]["controlPlane"]["replicas"] == 3
        assert cluster["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"] == 2
    else:
        kinds = sorted(o["kind"] for o in objs)
        assert kinds == [
            "Cluster",
            "DevCluster",
            "DevMachineTemplate",
            "KubeadmConfigTemplate",
            "KubeadmControlPlane",
            "MachineDeployment",
        ]
        kcp = next(o for o in objs if o["kind"] == "KubeadmControlPlane")
        assert (kcp["spec"]["version"], kcp["spec"]["replicas"]) == ("v1.33.0", 3)
        dev = next(o for o in objs if o["kind"] == "DevCluster")
        assert dev["metadata"]["annotations"], (
            "CAPD v1.13.4 panics on a DevCluster without annotations"
        )


@pytest.mark.parametrize("backend", ["in-memory", "docker"])
@pytest.mark.parametrize("topology", [True, False])
def test_every_template_renders_to_namespaced_objects(backend: str, topology: bool) -> None:
    objs = cluster_class_objects("fleet", backend) + cluster_objects(
        "c", "fleet", "v1.34.0", backend=backend, topology=topology
    )
    for obj in objs:
        if obj["kind"] != "ConfigMap":  # the docker load balancer's configuration template
            assert obj["apiVersion"].endswith(("v1beta2",)), obj["kind"]
        assert obj["metadata"]["namespace"] == "fleet"
    cc = next(o for o in objs if o["kind"] == "ClusterClass")
    node_images = ["v1.34.12", "v1.35.8"] if backend == "docker" else []
    assert cc["spec"]["kubernetesVersions"] == sorted(
        ["v1.31.0", "v1.32.0", "v1.33.0", "v1.34.0", "v1.35.0", *node_images],
        key=lambda v: tuple(int(p) for p in v[1:].split(".")),
    )


def test_docker_load_balancer_image_is_the_one_tools_build_makes() -> None:
    """CAPD runs <imageRepository>/haproxy:<imageTag>; no registry can supply another."""
    build = (TEMPLATES.parent / "tools" / "build.sh").read_text()
    pinned = next(
        line.split("=", 1)[1].split()[0]
        for line in build.splitlines()
        if line.startswith("HAPROXY_IMAGE=")
    )
    objs = cluster_class_objects("fleet", "docker")
    template = next(o for o in objs if o["kind"] == "DockerClusterTemplate")
    lb = template["spec"]["template"]["spec"]["loadBalancer"]
    assert f"{lb['imageRepository']}/haproxy:{lb['imageTag']}" == pinned


def test_template_directory_layout() -> None:
    assert sorted(p.relative_to(TEMPLATES).as_posix() for p in TEMPLATES.rglob("*.yaml")) == [
        "docker/cluster-kcp.yaml",
        "docker/cluster-topology.yaml",
        "docker/clusterclass.yaml",
        "in-memory/cluster-kcp.yaml",
        "in-memory/cluster-topology.yaml",
        "in-memory/clusterclass.yaml",
    ]


def test_kind_configs() -> None:
    mgmt = yaml.safe_load((ROOT / "kind-configs" / "management.yaml").read_text())
    assert mgmt["kind"] == "Cluster" and mgmt["apiVersion"] == "kind.x-k8s.io/v1alpha4"
    mounts = mgmt["nodes"][0]["extraMounts"]
    assert {"hostPath": "/var/run/docker.sock", "containerPath": "/var/run/docker.sock"} in mounts
    for name in ("workload-single.yaml", "workload-ha.yaml"):
        doc = yaml.safe_load((ROOT / "kind-configs" / name).read_text())
        assert doc["networking"]["apiServerAddress"] == "127.0.0.1"
