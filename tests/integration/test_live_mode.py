"""Live mode on the real local plane: the CLI reads a drifted fleet from the management cluster.

The fleet, in its own namespace:

* ``live-topo``: a managed topology from our ClusterClass at v1.33.0, Available;
* ``live-kcp``: KubeadmControlPlane and MachineDeployment created at v1.33.0, then the control
  plane upgraded to v1.34.0 (workers a minor behind, as drift really arises), a maintenance
  taint, Available;
* ``live-paused``: created with ``spec.paused: true``, so CAPI never provisions it and its
  ``live-paused-kubeconfig`` Secret never exists: an unreachable workload cluster, for real;
* two FleetWorkloads, one using ``storage.k8s.io/v1alpha1`` (removed in v1.35).

What is checked: drift, plan, check and place without ``--snapshot`` (CliRunner and the real
console script); ``calibrator snapshot`` writes a file that loads strictly and gives the same
documents as the live fleet; the paused cluster is reported as unreachable in the JSON and in the
tables; the reachable ones report their served API versions and Nodes; paging against the real
API server (tiny pages) reads the same fleet with one LIST per kind; and the worker's inventory
is the same read.

What CAPD's in-memory backend (v1.13.4) truthfully gives: its workload API servers answer
discovery (``/api``, ``/apis``, a fixed list of groups) and Node lists, but Nodes carry no
``status.nodeInfo``, so ``kubeletVersions`` is empty while ``nodes`` counts them
(docs/localplane.md "Known limits").
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.domain.snapshot_load import load_snapshot
from orchestrator.kube import capi
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import apply_all
from orchestrator.kube.inventory import read_fleet
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import machines, wait_for

pytestmark = pytest.mark.integration

NS = "calibrator-live"
TARGET = "v1.35.0"
CREATE_TIMEOUT = 360
UPGRADE_TIMEOUT = 420
DELETE_TIMEOUT = 300
MAINTENANCE = [{"key": "example.com/maintenance", "value": "disk", "effect": "NoSchedule"}]
WORKLOADS = [
    {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "apis": ["apps/v1/Deployment"],
            "replicas": 2,
            "placement": {
                "clusterAffinity": {"matchLabels": {"env": "prod"}},
                "clusters": ["live-topo"],
            },
        },
    },
    {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "FleetWorkload",
        "metadata": {"name": "volume-classes", "namespace": NS},
        "spec": {
            "apis": ["storage.k8s.io/v1alpha1/VolumeAttributesClass"],
            "replicas": 1,
            "placement": {"clusters": ["live-kcp"], "maxClusters": 1},
        },
    },
]
runner = CliRunner()


def _kcp_objects() -> list[dict[str, Any]]:
    """live-kcp at v1.33.0, tainted; the fixture then moves its control plane to v1.34.0.

    Workers a minor behind only arise that way: CAPI's MachineSet preflight check
    ``KubeadmVersionSkew`` refuses to create a worker whose minor differs from the control
    plane's, so a cluster created with them apart never gets its worker.
    """
    objects = cluster_objects(
        "live-kcp", NS, "v1.33.0", topology=False, labels={"env": "prod", "region": "us"}
    )
    for obj in objects:
        if obj["kind"] == "Cluster":
            obj["metadata"]["annotations"] = {"calibrator.dev/taints": json.dumps(MAINTENANCE)}
    return objects


def _paused_objects() -> list[dict[str, Any]]:
    objects = cluster_objects("live-paused", NS, "v1.34.0", topology=False, labels={"env": "dev"})
    for obj in objects:
        if obj["kind"] == "Cluster":
            obj["spec"]["paused"] = True
    return objects


def _settled(dyn: DynamicClient, name: str, control_plane: str) -> bool:
    """Available, the control plane rolled out at ``control_plane``, and exactly two Machines
    (one control plane, one worker), each backed by a Node: nothing changes under the reads."""
    cluster = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1]).get(
        name=name, namespace=NS
    )
    kcp_name = cluster.to_dict()["spec"]["controlPlaneRef"]["name"]
    kcp = dyn.resources.get(
        api_version=capi.KUBEADM_CONTROL_PLANE[0], kind=capi.KUBEADM_CONTROL_PLANE[1]
    ).get(name=kcp_name, namespace=NS)
    ms = machines(dyn, NS, name)
    cp = [m for m in ms if "cluster.x-k8s.io/control-plane" in m["metadata"].get("labels", {})]
    return (
        capi.is_true(cluster.to_dict(), "Available")
        and capi.control_plane_rolled_out(kcp.to_dict())
        and len(ms) == 2
        and [m["spec"]["version"] for m in cp] == [control_plane]
        and all((m.get("status") or {}).get("nodeRef") for m in ms)
    )


@pytest.fixture(scope="module")
def fleet(dyn: DynamicClient, plane: LocalPlane) -> Iterator[Path]:
    """The drifted fleet, provisioned; yields the plane's kubeconfig."""
    apply_all(dyn, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}])
    apply_all(dyn, cluster_class_objects(NS))
    apply_all(
        dyn, cluster_objects("live-topo", NS, "v1.33.0", labels={"env": "prod", "region": "eu"})
    )
    apply_all(dyn, _kcp_objects())
    apply_all(dyn, _paused_objects())
    apply_all(dyn, WORKLOADS)
    clusters = dyn.resources.get(api_version=capi.CLUSTER[0], kind=capi.CLUSTER[1])
    try:
        for name in ("live-topo", "live-kcp"):
            ready = functools.partial(_settled, dyn, name, "v1.33.0")
            wait_for(f"{name} provisioned", ready, CREATE_TIMEOUT)
        kcp = dyn.resources.get(
            api_version=capi.KUBEADM_CONTROL_PLANE[0], kind=capi.KUBEADM_CONTROL_PLANE[1]
        )
        kcp.patch(
            body={"spec": {"version": "v1.34.0"}},
            name="live-kcp-control-plane",
            namespace=NS,
            content_type="application/merge-patch+json",
        )
        upgraded = functools.partial(_settled, dyn, "live-kcp", "v1.34.0")
        wait_for("live-kcp's control plane at v1.34.0", upgraded, UPGRADE_TIMEOUT)
        yield plane.kubeconfig
    finally:
        # A paused cluster is never deleted (CAPI does not reconcile it): unpause it first.
        clusters.patch(
            body={"spec": {"paused": False}},
            name="live-paused",
            namespace=NS,
            content_type="application/merge-patch+json",
        )
        for name in ("live-topo", "live-kcp", "live-paused"):
            clusters.delete(name=name, namespace=NS)
        wait_for(
            "clusters deleted",
            lambda: not clusters.get(namespace=NS).to_dict()["items"],
            DELETE_TIMEOUT,
        )


def cli(*args: str, code: int | None = 0) -> dict[str, Any]:
    """The JSON document of one command; ``code`` None: a partial answer (1) is fine too."""
    result = runner.invoke(app, [*args, "-o", "json"])
    assert result.exit_code in ((0, 1) if code is None else (code,)), result.stderr or result.output
    assert result.stderr == "", result.stderr  # nothing in this namespace is left out
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def live_args(kubeconfig: Path) -> list[str]:
    return ["--kubeconfig", str(kubeconfig), "-n", NS]


def test_live_drift_reads_the_drifted_fleet_and_its_workload_clusters(fleet: Path) -> None:
    doc = cli("drift", *live_args(fleet), "-t", TARGET)
    assert doc["newest"] == "v1.35.0"
    rows = {c["name"]: c for c in doc["clusters"]}
    assert sorted(rows) == ["live-kcp", "live-paused", "live-topo"]
    assert rows["live-topo"]["controlPlane"] == "v1.33.0"
    assert rows["live-kcp"]["controlPlane"] == "v1.34.0"
    assert rows["live-kcp"]["workers"] == [{"name": "live-kcp-md-0", "version": "v1.33.0"}]
    assert rows["live-kcp"]["workerLag"] == 1
    # Minors, not statuses: v1.33/v1.34 pass their end of life during this project's life.
    assert {n: rows[n]["minorsBehindTarget"] for n in rows} == {
        "live-kcp": 1,
        "live-paused": 1,
        "live-topo": 2,
    }
    for name in ("live-topo", "live-kcp"):
        seen = rows[name]["workloadCluster"]
        assert seen["reachable"] is True, seen
        assert {"v1", "apps/v1", "rbac.authorization.k8s.io/v1"} <= set(seen["apiVersions"])
        assert seen["nodes"] == 2 and seen["readyNodes"] == 2
        assert seen["kubeletVersions"] == {}  # CAPD in-memory Nodes report no nodeInfo
    paused = rows["live-paused"]["workloadCluster"]
    assert paused["reachable"] is False
    assert "Secret calibrator-live/live-paused-kubeconfig not found" in paused["reason"]
    assert doc["unreachable"] == [{"cluster": "live-paused", "reason": paused["reason"]}]
    table = runner.invoke(app, ["drift", *live_args(fleet), "-t", TARGET])
    assert "unreachable live-paused: no kubeconfig" in table.stdout


def test_live_plan_check_and_place(fleet: Path) -> None:
    # live-kcp runs volume-classes, whose API v1.35 removes and which no cluster of the fleet
    # will serve after the calibration: the plan blocks it, a partial plan (exit 1).
    plan = cli("plan", *live_args(fleet), "-t", TARGET, code=1)
    steps = {c["name"]: c for c in plan["clusters"]}
    assert steps["live-topo"]["controlPlane"] == {
        "from": "v1.33.0",
        "steps": ["v1.34.0", "v1.35.0"],
    }
    assert not steps["live-topo"]["blocked"]
    assert steps["live-kcp"]["controlPlane"]["steps"] == ["v1.35.0"]
    assert steps["live-kcp"]["workers"]["from"] == "v1.33.0"
    assert steps["live-kcp"]["blocked"]
    assert any("VolumeAttributesClass" in r for r in steps["live-kcp"]["reasons"])
    assert plan["unreachable"] == [
        {"cluster": "live-paused", "reason": plan["unreachable"][0]["reason"]}
    ]

    # CAPD's in-memory API servers serve no /metrics and no /version (only what CAPI needs), so
    # the observation of the two reachable clusters is partial, named, and check says so (exit 1).
    check = cli("check", *live_args(fleet), "-t", TARGET, code=1)
    partial = {p["cluster"]: p["reason"] for p in check["partiallyObserved"]}
    assert sorted(partial) == ["live-kcp", "live-topo"]
    assert all("GET /metrics: API server answered 404" in r for r in partial.values()), partial
    found = {(f["cluster"], f["workload"], f["api"]) for f in check["findings"]}
    assert (
        "live-kcp",
        f"{NS}/volume-classes",
        "storage.k8s.io/v1alpha1/VolumeAttributesClass",
    ) in found

    place = cli("place", *live_args(fleet), code=None)
    decisions = {d["workload"]: d for d in place["decisions"]}
    # env=prod: live-topo and live-kcp match, live-kcp's maintenance taint is not tolerated.
    assert [c["name"] for c in decisions[f"{NS}/web"]["clusters"]] == ["live-topo"]
    assert any("taint" in r["reason"] for r in decisions[f"{NS}/web"]["rejected"])


def _without_clock(doc: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    out.pop("asOf", None)
    return out


def test_snapshot_round_trips_with_equal_results(fleet: Path, tmp_path: Path) -> None:
    written = runner.invoke(app, ["snapshot", *live_args(fleet)])
    assert written.exit_code == 0, written.stderr
    path = tmp_path / "fleet.yaml"
    path.write_text(written.stdout)
    snap = load_snapshot(path.read_bytes())  # strict
    # The ClusterClass's kubernetesVersions (capi-templates/in-memory/clusterclass.yaml).
    assert [str(v) for v in snap.available_versions] == [
        "v1.31.0",
        "v1.32.0",
        "v1.33.0",
        "v1.34.0",
        "v1.35.0",
    ]
    assert snap.cluster("live-kcp").taints[0].key == "example.com/maintenance"
    assert snap.cluster("live-kcp").topology is False
    paused = snap.cluster("live-paused").workload_cluster
    assert paused is not None and not paused.reachable
    for command in (
        ["drift", "-t", TARGET],
        ["plan", "-t", TARGET],
        ["check", "-t", TARGET],
        ["place"],
    ):
        live = runner.invoke(app, [*command, *live_args(fleet), "-o", "json"])
        offline = runner.invoke(app, [*command, "--snapshot", str(path), "-o", "json"])
        assert live.exit_code == offline.exit_code, (command, live.stderr, offline.stderr)
        assert _without_clock(json.loads(live.stdout)) == _without_clock(
            json.loads(offline.stdout)
        ), command


def test_the_console_script_uses_the_local_plane_when_nothing_else_is_given(
    fleet: Path, plane: LocalPlane, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env |= {"HOME": str(tmp_path), "CALIBRATOR_STATE_DIR": str(plane.state_dir)}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.main", "drift", "-n", NS, "-o", "json"],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(c["name"] for c in json.loads(proc.stdout)["clusters"]) == [
        "live-kcp",
        "live-paused",
        "live-topo",
    ]


class CountingDyn:
    """The real dynamic client, counting the LIST pages each kind is asked for."""

    def __init__(self, dyn: DynamicClient) -> None:
        self._dyn = dyn
        self.resources = self
        self.first_pages: dict[str, int] = {}
        self.pages: dict[str, int] = {}

    def get(self, **kwargs: Any) -> Any:
        resource = self._dyn.resources.get(**kwargs)
        owner = self

        class Counted:
            def get(self, **kw: Any) -> Any:
                if "name" not in kw:
                    kind = str(resource.kind)
                    owner.pages[kind] = owner.pages.get(kind, 0) + 1
                    if not kw.get("_continue"):
                        owner.first_pages[kind] = owner.first_pages.get(kind, 0) + 1
                return resource.get(**kw)

        return Counted()

    def invalidate_cache(self) -> None:
        self._dyn.resources.invalidate_cache()


def test_tiny_pages_read_the_same_fleet_with_one_list_per_kind(
    fleet: Path, dyn: DynamicClient
) -> None:
    whole = read_fleet(dyn, NS)
    counting = CountingDyn(dyn)
    paged = read_fleet(counting, NS, page_size=1)
    assert paged.snapshot == whole.snapshot
    kinds = {"ClusterClass", "Cluster", "KubeadmControlPlane", "MachineDeployment", "FleetWorkload"}
    assert counting.first_pages == dict.fromkeys(kinds, 1)
    assert counting.pages["Cluster"] == 3 and counting.pages["FleetWorkload"] == 2


def test_the_worker_reads_the_same_fleet(
    fleet: Path, dyn: DynamicClient, plane: LocalPlane
) -> None:
    backend = KubeFleetBackend.from_kubeconfig(plane.kubeconfig, namespace=NS)
    inventory = asyncio.run(backend.inventory())
    assert inventory.snapshot == read_fleet(dyn, NS).snapshot
    assert inventory.namespaces == dict.fromkeys(("live-kcp", "live-paused", "live-topo"), NS)


def test_the_snapshot_file_is_what_the_docs_describe(fleet: Path) -> None:
    written = runner.invoke(app, ["snapshot", *live_args(fleet), "-o", "json"])
    doc = json.loads(written.stdout)
    assert doc["apiVersion"] == "calibrator.dev/v1alpha1" and doc["kind"] == "FleetSnapshot"
    clusters = {c["name"]: c for c in doc["clusters"]}
    assert set(clusters["live-topo"]["workloadCluster"]) == {
        "reachable",
        "apiVersions",
        "nodes",
        "readyNodes",
        "kubeletVersions",
        "observationPartial",  # CAPD's in-memory API server serves no /metrics
    }
    assert load_snapshot(written.stdout) == load_snapshot(
        runner.invoke(app, ["snapshot", *live_args(fleet)]).stdout
    ), "-o json and -o yaml write the same fleet"
