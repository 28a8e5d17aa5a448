"""One CAPD docker cluster on the Docker provider of the local plane, with its milestones timed.

Usage (inside a network namespace of its own, after ``calibrator env up --provider docker``)::

    python3 -m benchmarks.bench_capd_docker --state-dir DIR [--version v1.34.12] [--json OUT]

Creates the docker ClusterClass (capi-templates/docker), a ClusterResourceSet that applies the
node image's pod network (kube-router, ``tools/kind/rootfs/kind/manifests/default-cni.yaml``)
once the control plane is initialized, and one managed-topology Cluster (1 control plane + 1
worker). Polls every second and records when each milestone was first seen, in seconds from the
apply: the load balancer container running, DockerCluster provisioned, the first control-plane
Machine Running with a Node, control plane initialized, the CNI applied, the worker Machine
Running, every Node Ready, the Cluster Available. Milestones are first-observed times (+-1 s).
Leaves the cluster in place: ``calibrator env down`` removes every container.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from orchestrator.kube import capi, workload
from orchestrator.kube.client import api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane import dockerenv
from orchestrator.localplane.components import REPO_ROOT
from orchestrator.localplane.dockerapi import api
from orchestrator.localplane.dockerengine import DockerEngine
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, machines, patch, wait_for

NS = "capd-docker"
CNI_MANIFEST = REPO_ROOT / "tools" / "kind" / "rootfs" / "kind" / "manifests" / "default-cni.yaml"
CNI_LABEL = {"calibrator.dev/cni": "kube-router"}


def cni_objects(namespace: str) -> list[dict[str, Any]]:
    """A ConfigMap with the kube-router manifest and a ClusterResourceSet for labelled Clusters."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cni-kube-router", "namespace": namespace},
            "data": {"kube-router.yaml": CNI_MANIFEST.read_text()},
        },
        {
            "apiVersion": "addons.cluster.x-k8s.io/v1beta2",
            "kind": "ClusterResourceSet",
            "metadata": {"name": "cni-kube-router", "namespace": namespace},
            "spec": {
                "strategy": "ApplyOnce",
                "clusterSelector": {"matchLabels": CNI_LABEL},
                "resources": [{"kind": "ConfigMap", "name": "cni-kube-router"}],
            },
        },
    ]


def _items(dyn: Any, kind: tuple[str, str], cluster: str) -> list[dict[str, Any]]:
    res = dyn.resources.get(api_version=kind[0], kind=kind[1])
    found = res.get(namespace=NS, label_selector=f"{capi.CLUSTER_NAME_LABEL}={cluster}")
    return [i.to_dict() for i in found.items]


def _running_with_node(machine: dict[str, Any]) -> bool:
    status = machine.get("status") or {}
    return status.get("phase") == "Running" and bool(status.get("nodeRef"))


def observe(dyn: Any, mgmt: Any, sock: Path, cluster: str) -> dict[str, bool]:
    """Which milestones hold now (each check is cheap; errors of a young cluster are 'not yet')."""
    seen: dict[str, bool] = {}
    code, body = api(sock, "GET", f"/containers/{cluster}-lb/json")
    seen["lb_container_running"] = (
        code == 200 and isinstance(body, dict) and bool(body["State"]["Running"])
    )
    dcs = dyn.resources.get(
        api_version="infrastructure.cluster.x-k8s.io/v1beta2", kind="DockerCluster"
    ).get(namespace=NS, label_selector=f"{capi.CLUSTER_NAME_LABEL}={cluster}")
    seen["dockercluster_provisioned"] = any(
        ((d.to_dict().get("status") or {}).get("initialization") or {}).get("provisioned")
        for d in dcs.items
    )
    ms = _items(dyn, capi.MACHINE, cluster)
    cps = [m for m in ms if "cluster.x-k8s.io/control-plane" in (m["metadata"].get("labels") or {})]
    workers = [m for m in ms if m not in cps]
    seen["control_plane_machine_running"] = any(_running_with_node(m) for m in cps)
    seen["worker_machine_running"] = bool(workers) and all(_running_with_node(m) for m in workers)
    obj = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1]).get(
        name=cluster, namespace=NS
    )
    cluster_obj = obj.to_dict()
    seen["control_plane_initialized"] = capi.is_true(cluster_obj, "ControlPlaneInitialized")
    seen["cluster_available"] = capi.is_true(cluster_obj, "Available")
    bindings = dyn.resources.get(
        api_version="addons.cluster.x-k8s.io/v1beta2", kind="ClusterResourceSetBinding"
    ).get(namespace=NS)
    # The binding exists as soon as the set matches; a resource counts once it was applied.
    seen["cni_applied"] = any(
        r.get("applied")
        for b in bindings.items
        if b.to_dict()["spec"].get("clusterName") == cluster
        for entry in b.to_dict()["spec"].get("bindings") or []
        for r in entry.get("resources") or []
    )
    seen["nodes_ready"] = False
    if seen["control_plane_initialized"]:
        try:
            nodes = workload.nodes(workload.workload_client(mgmt, NS, cluster))
        except Exception:
            nodes = {}
        seen["nodes_ready"] = len(nodes) == 2 and all(
            workload.node_ready(n) for n in nodes.values()
        )
    return seen


def prepare(plane: LocalPlane) -> tuple[DockerEngine, Any, Any]:
    """The plane's Docker engine and clients, with the namespace, docker ClusterClass and CNI
    applied (idempotent), which every docker cluster of a benchmark needs first."""
    engine = dockerenv.recorded_engine(plane)
    if engine is None:
        raise RuntimeError("no Docker provider recorded: run calibrator env up --provider docker")
    return prepare_on(engine, plane.kubeconfig)


def prepare_on(engine: DockerEngine, kubeconfig: Path) -> tuple[DockerEngine, Any, Any]:
    """As ``prepare``, for any management cluster and engine: the process plane, or a kind
    management cluster running CAPI as pods (``tools/e2e-kind.sh``)."""
    mgmt = api_client(kubeconfig)
    dyn = dynamic(mgmt)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    apply_all(dyn, [namespace, *cluster_class_objects(NS, backend="docker"), *cni_objects(NS)])
    return engine, mgmt, dyn


def create_and_time(plane: LocalPlane, name: str, version: str, timeout: float) -> dict[str, Any]:
    """Create the cluster and poll until every milestone holds or ``timeout``; the summary."""
    return timed_creation(prepare(plane), name, version, timeout)


def timed_creation(
    prepared: tuple[DockerEngine, Any, Any], name: str, version: str, timeout: float
) -> dict[str, Any]:
    """``create_and_time`` on prepared clients (see ``prepare`` and ``prepare_on``)."""
    engine, mgmt, dyn = prepared
    began = time.monotonic()
    apply_all(dyn, cluster_objects(name, NS, version, backend="docker", labels=CNI_LABEL))
    times: dict[str, float] = {}
    last: dict[str, bool] = {}
    while time.monotonic() - began < timeout:
        try:
            last = observe(dyn, mgmt, engine.socket, name)
        except Exception as err:
            print(f"[bench] poll failed: {err}", file=sys.stderr)
        now = round(time.monotonic() - began, 1)
        for key, ok in last.items():
            if ok and key not in times:
                times[key] = now
                print(f"[bench] {now:7.1f}s {key}", file=sys.stderr)
        if last and all(last.values()):
            break
        time.sleep(1.0)
    done = bool(last) and all(last.values())
    nodes: dict[str, Any] = {}
    if done:
        nodes = {
            node_name: {
                "ready": workload.node_ready(node),
                "kubelet": workload.kubelet_version(node),
                "runtime": (node.get("status") or {})
                .get("nodeInfo", {})
                .get("containerRuntimeVersion"),
            }
            for node_name, node in workload.nodes(workload.workload_client(mgmt, NS, name)).items()
        }
    return {"cluster": name, "version": version, "complete": done, "seconds": times,
            "missing": sorted(k for k, v in last.items() if not v), "nodes": nodes}  # fmt: skip


def upgrade_and_time(plane: LocalPlane, name: str, target: str, timeout: float) -> dict[str, Any]:
    """Patch the Cluster's topology version; time until every Machine is replaced at ``target``
    with a Ready Node whose kubelet reports ``target`` and the Cluster is Available."""
    mgmt = api_client(plane.kubeconfig)
    dyn = dynamic(mgmt)
    before = frozenset(m["metadata"]["name"] for m in machines(dyn, NS, name))
    began = time.monotonic()
    patch(dyn, capi.CLUSTER, NS, name, {"spec": {"topology": {"version": target}}})
    summary = wait_for(
        f"{name} at {target}",
        lambda: fully_at_version(dyn, mgmt, NS, name, target, len(before), replaced=before),
        timeout,
        interval=1.0,
    )
    seconds = round(time.monotonic() - began, 1)
    print(f"[bench] {seconds:7.1f}s upgraded to {target}", file=sys.stderr)
    wl = workload.workload_client(mgmt, NS, name)

    def coredns_ready() -> str | None:
        dep: dict[str, Any] = (
            client.AppsV1Api(wl).read_namespaced_deployment("coredns", "kube-system").to_dict()
        )
        want = dep["spec"]["replicas"]
        status = dep.get("status") or {}
        settled = (
            status.get("updated_replicas") == want
            and status.get("ready_replicas") == want
            and not status.get("unavailable_replicas")
        )
        return str(dep["spec"]["template"]["spec"]["containers"][0]["image"]) if settled else None

    coredns = wait_for("CoreDNS ready", coredns_ready, timeout, interval=1.0)
    coredns_seconds = round(time.monotonic() - began, 1)
    print(f"[bench] {coredns_seconds:7.1f}s CoreDNS ready ({coredns})", file=sys.stderr)
    nodes = workload.nodes(wl)
    return {
        "target": target,
        "seconds": seconds,
        "corednsReadySeconds": coredns_seconds,
        "corednsImage": coredns,
        "machines": summary["machines"],
        "kubelets": {n: workload.kubelet_version(node) for n, node in nodes.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m benchmarks.bench_capd_docker")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--state-dir", type=Path, help="the process plane's state dir")
    where.add_argument(
        "--kubeconfig", type=Path, help="another management cluster (kind: tools/e2e-kind.sh)"
    )
    parser.add_argument(
        "--docker-state-dir", type=Path, help="with --kubeconfig: the engine CAPD creates in"
    )
    parser.add_argument("--version", default="v1.34.12")
    parser.add_argument("--name", default="d1")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--upgrade-to", default=None, help="then upgrade to this version, timed")
    args = parser.parse_args(argv)
    if args.kubeconfig is not None and (args.docker_state_dir is None or args.upgrade_to):
        parser.error("--kubeconfig needs --docker-state-dir and does not take --upgrade-to")
    if args.state_dir is not None and args.docker_state_dir is not None:
        parser.error("--docker-state-dir goes with --kubeconfig (the plane records its engine)")
    try:
        if args.kubeconfig is not None:
            prepared = prepare_on(DockerEngine(args.docker_state_dir), args.kubeconfig)
            doc = timed_creation(prepared, args.name, args.version, args.timeout)
        else:
            doc = create_and_time(LocalPlane(args.state_dir), args.name, args.version, args.timeout)
    except RuntimeError as err:
        print(err, file=sys.stderr)
        return 2
    if doc["complete"] and args.upgrade_to:
        plane = LocalPlane(args.state_dir)
        doc["upgrade"] = upgrade_and_time(plane, args.name, args.upgrade_to, args.timeout)
    print(json.dumps(doc, indent=2))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if doc["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
