"""Pulumi components for a CAPI fleet: our ClusterClass, one cluster, and FleetWorkloads.

Objects come from the same capi-templates/ the CLI and the tests render
(``orchestrator.kube.templates``), so a cluster declared in Pulumi is byte-for-byte the cluster
``calibrator demo`` creates; the components only add Pulumi's graph (parents, dependencies, wait
rules) around them. Every Kubernetes object is a ``CustomResource`` of its own, which keeps the
resource graph visible to ``pulumi preview``, to mocks in unit tests, and to the policy pack.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.spec import Backend, ClusterSpec, MachineDeploymentSpec
from orchestrator.domain.snapshot import Workload
from orchestrator.kube.fleetapi import fleet_workload
from orchestrator.kube.templates import cluster_class_objects, cluster_objects

# pulumi-kubernetes waits on this annotation (generic await, provider >= 4.18): `pulumi up`
# returns only when CAPI reports the cluster Available, so "up" means usable, not "accepted".
WAIT_FOR = "pulumi.com/waitFor"
CLUSTER_TIMEOUT = "20m"
# The provider deletes with foreground propagation by default, which only kube-controller-
# manager's garbage collector can finish; CAPI deletes a cluster's machines itself, and the local
# plane runs no garbage collector, so every object is deleted in the background.
DELETION_POLICY = "pulumi.com/deletionPropagationPolicy"


def _token(obj: Mapping[str, Any]) -> str:
    """A Pulumi resource name unique within its parent: kind plus object name."""
    return f"{str(obj['kind']).lower()}-{obj['metadata']['name']}"


def _metadata(obj: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """The object's metadata with background deletion; any field outside ``fields`` is an error."""
    extra = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", *fields)}
    if extra:
        raise ValueError(f"{obj['kind']} {obj['metadata']['name']}: unexpected fields {extra}")
    metadata = copy.deepcopy(dict(obj["metadata"]))
    metadata.setdefault("annotations", {})[DELETION_POLICY] = "background"
    return metadata


def _template(obj: Mapping[str, Any], opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """A ClusterClass template object: a CAPI custom resource, or a ConfigMap it refers to.

    The docker class ships its load balancer's HAProxy configuration as a ConfigMap
    (``customHAProxyConfigTemplateRef``): a core object with ``data``, not ``spec``.
    """
    if obj["apiVersion"] == "v1" and obj["kind"] == "ConfigMap":
        return k8s.core.v1.ConfigMap(
            _token(obj), metadata=_metadata(obj, ("data",)), data=obj.get("data"), opts=opts
        )
    return _custom(obj, opts)


def _custom(
    obj: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    metadata = _metadata(obj, ("spec",))
    return k8s.apiextensions.CustomResource(
        _token(obj),
        api_version=obj["apiVersion"],
        kind=obj["kind"],
        metadata=metadata,
        spec=obj.get("spec"),
        opts=opts,
    )


class ClusterClassBundle(pulumi.ComponentResource):
    """The fleet's namespace, our ClusterClass and its templates (shared by every cluster)."""

    class_name: pulumi.Output[str]

    def __init__(
        self, name: str, namespace: str, backend: Backend, opts: pulumi.ResourceOptions
    ) -> None:
        super().__init__("calibrator:fleet:ClusterClass", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Kept on destroy: it also holds what CAPI and the calibrator create (kubeconfig and CA
        # secrets, PlacementDecisions), and a plane without kube-controller-manager (the local
        # one) could never finish deleting it, so destroy would hang on it.
        self.namespace = k8s.core.v1.Namespace(
            f"namespace-{namespace}",
            metadata={"name": namespace},
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
        )
        in_namespace = pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[self.namespace])
        )
        objects = cluster_class_objects(namespace, backend)
        templates = [o for o in objects if o["kind"] != "ClusterClass"]
        template_resources = [_template(o, in_namespace) for o in templates]
        (cluster_class,) = [o for o in objects if o["kind"] == "ClusterClass"]
        self.cluster_class = _custom(
            cluster_class,
            pulumi.ResourceOptions.merge(
                in_namespace, pulumi.ResourceOptions(depends_on=template_resources)
            ),
        )
        self.class_name = pulumi.Output.from_input(str(cluster_class["metadata"]["name"]))
        self.kubernetes_versions: list[str] = list(cluster_class["spec"]["kubernetesVersions"])
        self.register_outputs({"className": self.class_name})


def _waiting(cluster: dict[str, Any], wait: bool) -> dict[str, Any]:
    if wait:
        cluster["metadata"].setdefault("annotations", {})[WAIT_FOR] = "condition=Available"
    return cluster


def _topology_cluster(
    spec: ClusterSpec, namespace: str, backend: Backend, wait: bool
) -> list[dict[str, Any]]:
    (cluster,) = cluster_objects(
        spec.name,
        namespace,
        str(spec.version),
        control_plane_replicas=spec.control_plane_replicas,
        labels=spec.labels,
        topology=True,
        backend=backend,
    )
    cluster["spec"]["topology"]["workers"]["machineDeployments"] = [
        {"class": md.worker_class, "name": md.name, "replicas": md.replicas}
        for md in spec.machine_deployments
    ]
    return [_waiting(cluster, wait)]


def _plain_cluster(spec: ClusterSpec, namespace: str, wait: bool) -> list[dict[str, Any]]:
    """KCP + one MachineDeployment (and bootstrap template) per declared pool."""
    objects = cluster_objects(
        spec.name,
        namespace,
        str(spec.version),
        control_plane_replicas=spec.control_plane_replicas,
        labels=spec.labels,
        topology=False,
        backend="in-memory",
    )
    base_md = next(o for o in objects if o["kind"] == "MachineDeployment")
    base_cfg = next(o for o in objects if o["kind"] == "KubeadmConfigTemplate")
    out = [o for o in objects if o is not base_md and o is not base_cfg]
    for md in spec.machine_deployments:
        out.extend(_pool(spec, md, base_md, base_cfg))
    return [_waiting(o, wait) if o["kind"] == "Cluster" else o for o in out]


def _pool(
    spec: ClusterSpec,
    md: MachineDeploymentSpec,
    base_md: Mapping[str, Any],
    base_cfg: Mapping[str, Any],
) -> list[dict[str, Any]]:
    name = f"{spec.name}-{md.name}"
    cfg = copy.deepcopy(dict(base_cfg))
    cfg["metadata"]["name"] = name
    obj = copy.deepcopy(dict(base_md))
    obj["metadata"]["name"] = name
    obj["spec"]["replicas"] = md.replicas
    template = obj["spec"]["template"]["spec"]
    template["version"] = str(spec.worker_version(md))
    template["bootstrap"]["configRef"]["name"] = name
    return [cfg, obj]


class CapiCluster(pulumi.ComponentResource):
    """One CAPI cluster: a managed topology of our ClusterClass, or KCP plus MachineDeployments.

    ``waitForAvailable`` makes the Cluster resource complete only once CAPI's Available
    condition is True, so dependents (workloads, calibrations) never see a half-built cluster.
    """

    cluster_name: pulumi.Output[str]
    version: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        namespace: str,
        backend: Backend,
        *,
        wait_for_available: bool,
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__("calibrator:fleet:CapiCluster", name, None, opts)
        objects = (
            _topology_cluster(spec, namespace, backend, wait_for_available)
            if spec.topology
            else _plain_cluster(spec, namespace, wait_for_available)
        )
        child = pulumi.ResourceOptions(
            parent=self, custom_timeouts=pulumi.CustomTimeouts(create=CLUSTER_TIMEOUT)
        )
        # The Cluster goes last: CAPI reconciles it immediately and expects what it references.
        others = [_custom(o, child) for o in objects if o["kind"] != "Cluster"]
        cluster = next(o for o in objects if o["kind"] == "Cluster")
        self.cluster = _custom(
            cluster,
            pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=others)),
        )
        self.cluster_name = pulumi.Output.from_input(spec.name)
        self.version = pulumi.Output.from_input(str(spec.version))
        self.register_outputs({"clusterName": self.cluster_name, "version": self.version})


def fleet_workloads(
    workloads: Sequence[Workload], opts: pulumi.ResourceOptions
) -> list[k8s.apiextensions.CustomResource]:
    """One FleetWorkload per declared workload, for the placement engine to place."""
    return [_custom(fleet_workload(w), opts) for w in workloads]
