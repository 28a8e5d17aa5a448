"""The I/O half of the live inventory against an in-memory dynamic client: what it asks for.

At most one paginated LIST per kind whatever the fleet size, the pager's fallback when a continue
token expires, probes bounded in concurrency and reported per cluster, and the two ways a
management cluster can lack an API.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from orchestrator.domain.snapshot import WorkloadClusterStatus
from orchestrator.kube import fleetapi
from orchestrator.kube.fleetmap import InventoryError
from orchestrator.kube.inventory import read_fleet
from testkit.capi_objects import cluster, kcp
from tests.orchestrator.kube.fake_dyn import NS
from tests.orchestrator.kube.watch_feed import fleet

KINDS = ("ClusterClass", "Cluster", "KubeadmControlPlane", "MachineDeployment", "FleetWorkload")


@pytest.mark.parametrize(("clusters", "page_size"), [(0, 500), (1, 500), (7, 2), (40, 3)])
def test_one_paginated_list_per_kind_whatever_the_fleet_size(clusters: int, page_size: int) -> None:
    dyn = fleet(clusters)
    read = read_fleet(dyn, NS, page_size=page_size)
    assert len(read.snapshot.clusters) == clusters
    assert [str(v) for v in read.snapshot.available_versions] == (
        ["v1.33.0", "v1.34.0"] if clusters else []
    )
    assert len(read.snapshot.workloads) == 3
    assert dyn.lists == dict.fromkeys(KINDS, 1), "one LIST per kind, nothing else"
    assert dyn.pages["Cluster"] == max(1, -(-clusters // page_size))
    assert read.namespaces == {f"c{i:03d}": NS for i in range(clusters)}
    assert read.workload_versions.keys() == {f"{NS}/w0", f"{NS}/w1", f"{NS}/w2"}


def test_an_expired_continue_token_falls_back_to_one_full_list() -> None:
    dyn = fleet(5)
    dyn.expired.add("2")  # the token of the second page of every kind
    read = read_fleet(dyn, NS, page_size=2)
    assert len(read.snapshot.clusters) == 5
    assert dyn.lists["Cluster"] == 2  # the paged attempt, then the full LIST


def test_all_namespaces_reads_every_namespace() -> None:
    dyn = fleet(2)
    dyn.add("Cluster", cluster("far", ns="other"))
    dyn.add("KubeadmControlPlane", kcp("far", ns="other"))
    read = read_fleet(dyn, None)
    assert read.namespaces == {"c000": NS, "c001": NS, "far": "other"}
    assert read_fleet(dyn, "other").namespaces == {"far": "other"}


def test_probes_report_every_cluster_with_bounded_concurrency() -> None:
    dyn = fleet(12)
    lock = threading.Lock()
    running = 0
    peak = 0

    def probe(namespace: str, name: str) -> WorkloadClusterStatus:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.01)  # long enough for the pool to fill; no assertion depends on timing
        with lock:
            running -= 1
        assert namespace == NS
        if name == "c003":
            return WorkloadClusterStatus(
                False, f"no kubeconfig: Secret {NS}/{name}-kubeconfig not found"
            )
        return WorkloadClusterStatus(True, "", ("apps/v1", "v1"), 1, 1, (("v1.33.0", 1),))

    read = read_fleet(dyn, NS, probe=probe, concurrency=3)
    assert peak <= 3
    observed = {c.name: c.workload_cluster for c in read.snapshot.clusters}
    assert all(s is not None for s in observed.values())
    down = observed["c003"]
    assert down is not None and not down.reachable and "c003-kubeconfig not found" in down.reason
    assert sum(1 for s in observed.values() if s is not None and s.reachable) == 11
    assert dyn.lists == dict.fromkeys(KINDS, 1), "probes never touch the management LISTs"


def test_no_probe_leaves_workload_cluster_status_unknown() -> None:
    read = read_fleet(fleet(2), NS)
    assert all(c.workload_cluster is None for c in read.snapshot.clusters)


def test_without_our_crds_the_worker_fails_and_the_cli_reads_no_workloads() -> None:
    dyn = fleet(2, missing=("FleetWorkload", "PlacementDecision"))
    with pytest.raises(fleetapi.ApiMissingError, match=r"install the calibrator\.dev CRDs"):
        read_fleet(dyn, NS)
    read = read_fleet(dyn, NS, require_workloads=False)
    assert read.workloads_served is False
    assert read.snapshot.workloads == () and len(read.snapshot.clusters) == 2


def test_a_cluster_without_cluster_api_is_named() -> None:
    dyn: Any = fleet(1, missing=("Cluster",))
    with pytest.raises(InventoryError, match=r"does not serve Cluster .*not a Cluster API"):
        read_fleet(dyn, NS)


def test_clusters_left_out_are_reported_not_dropped() -> None:
    dyn = fleet(1)
    dyn.add("Cluster", cluster("creating"))
    dyn.add("Cluster", cluster("broken", version=None))
    dyn.add("KubeadmControlPlane", kcp("broken", None))
    read = read_fleet(dyn, NS)
    assert read.snapshot.cluster_names() == ("c000",)
    assert read.pending == {"creating": "KubeadmControlPlane creating does not exist yet"}
    assert "declares no Kubernetes version" in read.skipped["broken"]
