"""A fleet of CAPD in-memory clusters on a management plane: laid out, applied, observed.

The fleet of the calibration benchmarks (benchmarks/bench_calibration.py, bench_faults.py) and
of their CI smoke tests (tests/integration/test_fleet_scale.py, test_api_faults.py): clusters one
and two minors behind ``TARGET`` in three groups, managed-topology and KCP+MachineDeployment
clusters alternating, cluster 0 the canary; optional FleetWorkloads over it. ``observe`` is four
LISTs at one revision that say what each cluster runs and whether it carries the upgrading taint.
``wait_available`` also deletes the Machines CAPI orphans under a provisioning burst
(``release_orphans``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes.dynamic import DynamicClient

from orchestrator.domain.taints import UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi
from orchestrator.kube.client import apply_all
from orchestrator.kube.templates import cluster_class_objects, cluster_objects

TARGET = "v1.34.0"
STARTS = ("v1.33.0", "v1.32.0")  # one and two minors behind
CREATE_TIMEOUT = 1800.0
KUBEADM_CONFIG = ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig")
ORPHAN_AGE = 60.0  # s a Pending Machine without its bootstrap config is left before it is deleted


def fleet_layout(clusters: int) -> dict[str, tuple[str, bool, str]]:
    """Name -> (start version, managed topology?, group). Cluster 0 is the canary."""
    out: dict[str, tuple[str, bool, str]] = {}
    for i in range(clusters):
        out[f"s{i:03d}"] = (STARTS[i % 2], (i // 2) % 2 == 0, f"g{i % 3}")
    return out


def provision(
    dyn: DynamicClient,
    namespace: str,
    layout: dict[str, tuple[str, bool, str]],
    workloads: int = 0,
) -> None:
    """Apply the namespace, our ClusterClass, every cluster and ``workloads`` FleetWorkloads.

    Apply only: waiting is ``wait_available``.
    """
    dyn.resources.get(api_version="v1", kind="Namespace").create(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    apply_all(dyn, cluster_class_objects(namespace))
    for i, (name, (version, topology, group)) in enumerate(layout.items()):
        labels = {"env": "scale", "group": group}
        if i == 0:
            labels["calibrator.dev/canary"] = "true"
        apply_all(dyn, cluster_objects(name, namespace, version, labels=labels, topology=topology))
    if workloads:
        apply_all(dyn, fleet_workloads(namespace, workloads, list(layout)))


def fleet_workloads(namespace: str, count: int, clusters: list[str]) -> list[dict[str, Any]]:
    """``count`` FleetWorkloads over the fleet, one division mode in four.

    Each already runs on two clusters (names only: the first placement settles the replicas
    per cluster).

    They make every step's re-placement real work: the run reports the replicas each step moved
    and the PlacementDecision writes, so "a step moves only what it forces" is measured at scale.
    The upgrading taint is NoSchedule and the target removes no API they use, so a step forces
    no replica off its cluster: every replica a step moves is churn.
    """
    out: list[dict[str, Any]] = []
    n = len(clusters)
    for j in range(count):
        mode = ("Duplicated", "Weighted", "Dynamic", "Aggregated")[j % 4]
        scheduling: dict[str, Any] = {"type": mode}
        placement: dict[str, Any] = {
            "clusterAffinity": {"matchLabels": {"env": "scale"}},
            "clusters": sorted({clusters[(j * 7) % n], clusters[(j * 13 + 1) % n]}),
        }
        replicas = 2
        if mode == "Duplicated":
            placement["clusterAffinity"] = {"matchLabels": {"env": "scale", "group": f"g{j % 3}"}}
            placement["maxClusters"] = 2
        elif mode == "Weighted":
            scheduling["weights"] = [
                {"matchLabels": {"group": "g0"}, "weight": 2},
                {"matchLabels": {"group": "g1"}, "weight": 1},
            ]
            replicas = 6
        elif mode == "Dynamic":
            placement["maxClusters"] = 3
            replicas = 5
        else:
            replicas = 4
        placement["replicaScheduling"] = scheduling
        out.append(
            {
                "apiVersion": "calibrator.dev/v1alpha1",
                "kind": "FleetWorkload",
                "metadata": {"name": f"w{j:05d}", "namespace": namespace},
                "spec": {
                    "apis": ["apps/v1/Deployment"],
                    "replicas": replicas,
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "placement": placement,
                },
            }
        )
    return out


def _items(dyn: DynamicClient, kind: tuple[str, str], namespace: str) -> list[dict[str, Any]]:
    return _listed(dyn, kind, namespace)[0]


def _listed(
    dyn: DynamicClient, kind: tuple[str, str], namespace: str, at: str = ""
) -> tuple[list[dict[str, Any]], str]:
    """Every object of ``kind`` and the list's resourceVersion; ``at``: as of that revision."""
    res = dyn.resources.get(api_version=kind[0], kind=kind[1])
    exact = {"resource_version": at, "resource_version_match": "Exact"} if at else {}
    listed = res.get(namespace=namespace, **exact).to_dict()
    return listed["items"], str(listed["metadata"].get("resourceVersion") or "")


def _owner(obj: dict[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get(capi.CLUSTER_NAME_LABEL, ""))


@dataclass(frozen=True)
class ClusterView:
    """What one sample saw of a cluster: its versions and whether it carries the taint."""

    versions: frozenset[str]
    tainted: bool
    rolled_out: bool


def observe(dyn: DynamicClient, namespace: str) -> dict[str, ClusterView]:
    """Four LISTs at one revision: every cluster's versions, taint and rollout state.

    One instant of the fleet: the Machines are listed first and the other kinds at the exact
    resourceVersion that LIST was answered at (``resourceVersionMatch=Exact``, read from etcd).
    Four LISTs each at its own moment could pair a Cluster listed before its taint was added
    with Machines listed after its first patch: at 300 clusters, where a LIST takes seconds and
    the taint precedes the patch by a few, the benchmark's invariant flagged three clusters
    "mid-upgrade and untainted" at the start of their first step (session 22).
    """
    machines, revision = _listed(dyn, capi.MACHINE, namespace)
    clusters = _listed(dyn, capi.CLUSTER, namespace, revision)[0]
    kcps = {
        k["metadata"]["name"]: k
        for k in _listed(dyn, capi.KUBEADM_CONTROL_PLANE, namespace, revision)[0]
    }
    versions: dict[str, set[str]] = {}
    rolled: dict[str, bool] = {}
    for md in _listed(dyn, capi.MACHINE_DEPLOYMENT, namespace, revision)[0]:
        name = _owner(md)
        versions.setdefault(name, set()).add(str(md["spec"]["template"]["spec"].get("version")))
        rolled[name] = rolled.get(name, True) and capi.machine_deployment_rolled_out(md)
    for m in machines:
        versions.setdefault(_owner(m), set()).add(str(m["spec"].get("version")))
    out: dict[str, ClusterView] = {}
    for c in clusters:
        name = c["metadata"]["name"]
        topo = (c["spec"].get("topology") or {}).get("version")
        ref = (c["spec"].get("controlPlaneRef") or {}).get("name")
        kcp = kcps.get(str(ref))
        seen = versions.setdefault(name, set())
        if topo:
            seen.add(str(topo))
        if kcp is not None:
            seen.add(str(kcp["spec"].get("version")))
        annotations = c["metadata"].get("annotations") or {}
        taints = decode_taints(annotations.get("calibrator.dev/taints"), name)
        out[name] = ClusterView(
            frozenset(seen),
            any(t.key == UPGRADING_TAINT_KEY for t in taints),
            rolled.get(name, True) and kcp is not None and capi.control_plane_rolled_out(kcp),
        )
    return out


def wait_available(
    dyn: DynamicClient, namespace: str, layout: dict[str, tuple[str, bool, str]], timeout: float
) -> float:
    """Until every cluster's Machines run its start version and every rollout has settled."""
    began = time.monotonic()
    while True:
        for name in release_orphans(dyn, namespace, datetime.now(UTC)):
            print(f"deleted Machine {namespace}/{name}: CAPI left it without its bootstrap config")
        views = observe(dyn, namespace)
        ready = [
            n
            for n, (start, _, _) in layout.items()
            if n in views and views[n].versions == {start} and views[n].rolled_out
        ]
        if len(ready) == len(layout):
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise AssertionError(
                f"{len(layout) - len(ready)} of {len(layout)} clusters not Available after "
                f"{timeout:.0f}s"
            )
        time.sleep(5)


def release_orphans(dyn: DynamicClient, namespace: str, now: datetime) -> list[str]:
    """Delete the Machines CAPI left behind without their bootstrap config; their names.

    A KubeadmControlPlane creates the infrastructure machine, the bootstrap config and then the
    Machine, and waits for its own informer to show the new Machine. When that wait times out
    (the API server's watches lag on a plane provisioning hundreds of clusters on two cores:
    "failed to wait for up-to-date Machine objects in the cache after Machine creation"), it
    takes the creation for failed and deletes the first two, though the Machine exists. That
    Machine stays Pending for ever and its cluster never becomes Available (4 of 100 clusters,
    7 of 300, in session 22's runs). Deleted, the control plane creates another. Only Machines
    that are Pending, not being deleted, older than ``ORPHAN_AGE`` and whose KubeadmConfig is
    gone: the fleet's provisioning is repaired, nothing the calibration does is touched.
    """
    configs = {c["metadata"]["name"] for c in _items(dyn, KUBEADM_CONFIG, namespace)}
    released: list[str] = []
    machines = dyn.resources.get(api_version=capi.MACHINE[0], kind=capi.MACHINE[1])
    for m in _items(dyn, capi.MACHINE, namespace):
        meta = m["metadata"]
        ref = ((m.get("spec") or {}).get("bootstrap") or {}).get("configRef") or {}
        created = datetime.fromisoformat(str(meta.get("creationTimestamp")).replace("Z", "+00:00"))
        if (
            (m.get("status") or {}).get("phase") == "Pending"
            and not meta.get("deletionTimestamp")
            and ref.get("kind") == KUBEADM_CONFIG[1]
            and ref.get("name") not in configs
            and (now - created).total_seconds() > ORPHAN_AGE
        ):
            machines.delete(name=meta["name"], namespace=namespace)
            released.append(meta["name"])
    return released
