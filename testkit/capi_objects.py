"""CAPI objects as the API server returns them, built small: the fleet mapping's inputs.

``cluster``, ``kcp``, ``md`` and ``cclass`` build one object each, with only the fields the fleet
mapping (orchestrator/kube/fleetmap.py) reads; ``MALFORMED`` is the corpus of clusters it must
skip with a reason. The tests of the mapping and the inventory use them, and
benchmarks/bad_inputs.py prints the figures of the corpus.
"""

from __future__ import annotations

from typing import Any

from orchestrator.kube import capi

NS = "fleet"


def cluster(
    name: str,
    *,
    version: str | None = "v1.33.0",
    cls: str = "cc",
    ns: str = NS,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    ref: dict[str, str] | None = None,
    workers: list[dict[str, Any]] | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    """A Cluster; ``version=None`` is one without a managed topology."""
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {
        "controlPlaneRef": ref if ref is not None else {"kind": "KubeadmControlPlane", "name": name}
    }
    if version is not None:
        spec["topology"] = {
            "classRef": {"name": cls},
            "version": version,
            "workers": {"machineDeployments": workers or []},
        }
    return {"metadata": meta, "spec": spec}


def kcp(
    name: str, version: str | None = "v1.33.0", replicas: int = 1, ns: str = NS
) -> dict[str, Any]:
    """A KubeadmControlPlane; ``version=None`` is one that declares none."""
    spec: dict[str, Any] = {"replicas": replicas}
    if version is not None:
        spec["version"] = version
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def md(
    name: str,
    owner: str,
    version: str = "v1.33.0",
    *,
    replicas: int = 1,
    topology_name: str | None = None,
    ns: str = NS,
) -> dict[str, Any]:
    """A MachineDeployment of cluster ``owner`` (of its topology when ``topology_name``)."""
    labels = {capi.CLUSTER_NAME_LABEL: owner}
    if topology_name:
        labels[capi.TOPOLOGY_MD_LABEL] = topology_name
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "clusterName": owner,
            "replicas": replicas,
            "template": {"spec": {"version": version}},
        },
    }


def cclass(name: str, versions: list[str], ns: str = NS) -> dict[str, Any]:
    """A ClusterClass offering ``versions``."""
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"kubernetesVersions": versions}}


def _topology_workers(value: object) -> dict[str, Any]:
    obj = cluster("workers-string")
    obj["spec"]["topology"]["workers"] = value
    return obj


def _without_version(obj: dict[str, Any]) -> dict[str, Any]:
    del obj["spec"]["template"]["spec"]["version"]
    return obj


def _spec(name: str, value: object) -> dict[str, Any]:
    obj = cluster(name)
    obj["spec"] = value
    return obj


# (cluster, its KubeadmControlPlane, its MachineDeployments, substring of the skip reason).
# The first three are issue 11's; the rest are what a foreign controller, a typo in `kubectl
# edit` or a schema-less test server could leave behind.
MALFORMED: list[tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], str]] = [
    (
        cluster("no-version", version=None),
        kcp("no-version", None),
        [],
        "the control plane declares no Kubernetes version",
    ),
    (
        cluster("md-version"),
        kcp("md-version"),
        [md("md-version-md", "md-version", "one.two")],
        "MachineDeployment md-version-md: invalid Kubernetes version 'one.two'",
    ),
    (
        cluster("md-no-version", version=None),  # CAPI's webhook allows an MD without one
        kcp("md-no-version"),
        [_without_version(md("md-no-version-md", "md-no-version"))],
        "MachineDeployment md-no-version-md declares no Kubernetes version",
    ),
    (
        cluster("taints-json", annotations={"calibrator.dev/taints": "[{not json"}),
        kcp("taints-json"),
        [],
        "taints annotation is not JSON",
    ),
    (
        cluster("taints-object", annotations={"calibrator.dev/taints": '{"key": "x"}'}),
        kcp("taints-object"),
        [],
        "taints annotation must be a JSON list",
    ),
    (
        cluster("taints-deep", annotations={"calibrator.dev/taints": "[" * 30_000 + "]" * 30_000}),
        kcp("taints-deep"),
        [],
        "taints annotation nests too deep",
    ),
    (
        cluster("taints-huge", annotations={"calibrator.dev/taints": "[" + " " * 70_000 + "]"}),
        kcp("taints-huge"),
        [],
        "at most 65,536 characters",
    ),
    (
        cluster(
            "taint-effect",
            annotations={"calibrator.dev/taints": '[{"key": "a", "effect": "Explode"}]'},
        ),
        kcp("taint-effect"),
        [],
        "invalid taint effect 'Explode'",
    ),
    (
        cluster("kcp-replicas-text", version=None),
        kcp("kcp-replicas-text", replicas="three"),  # type: ignore[arg-type]
        [],
        "the control plane: replicas is not an integer: 'three'",
    ),
    (
        cluster("kcp-replicas-negative"),
        kcp("kcp-replicas-negative", replicas=-1),
        [],
        "controlPlane.replicas: must be an integer from 1",
    ),
    (
        cluster("kcp-replicas-huge"),
        kcp("kcp-replicas-huge", replicas=10**12),
        [],
        "controlPlane.replicas: must be an integer from 1",
    ),
    (
        cluster("md-replicas-negative"),
        kcp("md-replicas-negative"),
        [md("md-neg", "md-replicas-negative", replicas=-3)],
        "machineDeployments[0].replicas: must be an integer from 0",
    ),
    (
        cluster("zone-label", labels={"topology.kubernetes.io/zone": "z" * 300}),
        kcp("zone-label"),
        [],
        "label value longer than 253 characters",
    ),
    (
        cluster("kcp-version-4k", version=None),
        kcp("kcp-version-4k", "v" + "1" * 4096),
        [],
        "the control plane: invalid Kubernetes version",
    ),
    (
        _topology_workers("nope"),
        kcp("workers-string"),
        [md("workers-md", "workers-string", topology_name="w")],
        "malformed object (AttributeError",
    ),
    (_spec("spec-list", ["x"]), kcp("spec-list"), [], "malformed object (AttributeError"),
]
