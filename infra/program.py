"""The fleet stack's Pulumi program: config -> management cluster -> ClusterClass -> clusters.

One program serves both stacks. ``environment: local`` targets an existing management plane
(``calibrator env up``, whose kubeconfig arrives as the secret config ``kubeconfig``);
``environment: kind`` first creates a kind management cluster and installs CAPI with CAPD's
docker backend. Everything below the management cluster is the same declaration, so a fleet
tested on the local plane is the fleet provisioned on kind.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.components import CapiCluster, ClusterClassBundle, fleet_workloads
from infra.kind import KindManagementCluster
from infra.spec import CONFIG_NAMESPACE, FleetSpec, FleetSpecError, parse_fleet
from orchestrator.kube.fleetapi import crd_manifests

ENVIRONMENTS = ("local", "kind")
TEXT_KEYS = ("namespace", "backend")
OBJECT_KEYS = ("clusters", "workloads", "waitForAvailable")


def read_config() -> tuple[str, FleetSpec, pulumi.Output[str] | None]:
    """The stack's environment, its validated fleet and the kubeconfig secret (if any)."""
    cfg = pulumi.Config(CONFIG_NAMESPACE)
    environment = cfg.get("environment") or "local"
    if environment not in ENVIRONMENTS:
        raise FleetSpecError(
            f"environment: must be one of {', '.join(ENVIRONMENTS)}, got {environment!r}"
        )
    raw: dict[str, Any] = {}
    for key in TEXT_KEYS:
        if (text := cfg.get(key)) is not None:
            raw[key] = text
    for key in OBJECT_KEYS:
        try:
            value = cfg.get_object(key)
        except pulumi.ConfigTypeError:
            raise FleetSpecError(f"{key}: not valid YAML/JSON: {cfg.get(key)!r}") from None
        if value is not None:
            raw[key] = value
    return environment, parse_fleet(raw), cfg.get_secret("kubeconfig")


def calibrator_crds(opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """FleetWorkload and PlacementDecision CRDs, for management clusters we create ourselves."""
    return [
        k8s.apiextensions.v1.CustomResourceDefinition(
            f"crd-{crd['metadata']['name']}", metadata=crd["metadata"], spec=crd["spec"], opts=opts
        )
        for crd in crd_manifests()
    ]


def build_fleet(
    spec: FleetSpec,
    provider: k8s.Provider | None,
    depends_on: list[pulumi.Resource] | None = None,
) -> dict[str, CapiCluster]:
    """Register the ClusterClass, every cluster and every FleetWorkload of ``spec``."""
    opts = pulumi.ResourceOptions(provider=provider, depends_on=depends_on or [])
    bundle = ClusterClassBundle("cluster-class", spec.namespace, spec.backend, opts)
    cluster_opts = pulumi.ResourceOptions(provider=provider, depends_on=[bundle])
    clusters = {
        c.name: CapiCluster(
            c.name,
            c,
            spec.namespace,
            spec.backend,
            wait_for_available=spec.wait_for_available,
            opts=cluster_opts,
        )
        for c in spec.clusters
    }
    fleet_workloads(
        spec.workloads,
        pulumi.ResourceOptions(
            provider=provider, depends_on=[*(depends_on or []), *clusters.values()]
        ),
    )
    pulumi.export("namespace", spec.namespace)
    pulumi.export("classVersions", bundle.kubernetes_versions)
    pulumi.export(
        "clusters",
        {
            c.name: {
                "version": str(c.version),
                "topology": c.topology,
                "labels": dict(c.labels or {}),
            }
            for c in spec.clusters
        },
    )
    return clusters


def main() -> None:
    """Pulumi entry point (``infra/__main__.py`` and ``calibrator fleet up``)."""
    environment, spec, kubeconfig = read_config()
    depends_on: list[pulumi.Resource] = []
    if environment == "kind":
        mgmt = KindManagementCluster("management")
        kubeconfig = mgmt.kubeconfig
        depends_on.append(mgmt.capi)
    provider = k8s.Provider(
        "management",
        kubeconfig=kubeconfig,
        opts=pulumi.ResourceOptions(depends_on=list(depends_on)),
    )
    if environment == "kind":
        depends_on.extend(calibrator_crds(pulumi.ResourceOptions(provider=provider)))
    build_fleet(spec, provider, depends_on)
