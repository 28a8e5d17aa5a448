"""Measure the local management plane: start time, memory, and one-minor upgrade times.

Usage: ``python -m benchmarks.bench_localplane [--repeats 3]``. Starts a plane in a temporary
state dir (CAPD's fixed port 19000 means no other plane may run), then:
- plane start: cold (fresh state dir) and warm (``down`` then ``up`` on the same state);
- memory: RSS of each component with the plane idle and with the benchmark's clusters running;
- upgrades: one-minor managed-topology upgrades of a 1-CP/1-worker and a 3-CP/3-worker in-memory
  cluster, wall time from the patch until every Machine is replaced at the new version with a
  Ready Node and the Cluster is Available; median of ``--repeats`` (each repeat uses a new cluster).
Prints markdown tables.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kubernetes import client
from kubernetes.dynamic import DynamicClient

from orchestrator.kube import capi
from orchestrator.kube.client import api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from testkit.capi_waits import fully_at_version, machines, patch, wait_for

NS = "bench"


def rss_mib(pid: int) -> float:
    """Resident set size of one process."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory(plane: LocalPlane) -> dict[str, float]:
    return {c.name: rss_mib(c.pid) for c in plane.status().components if c.pid}


def upgrade_once(
    dyn: DynamicClient, mgmt: client.ApiClient, name: str, cp: int, workers: int
) -> tuple[float, float]:
    """Create a cluster at v1.33.0, wait Available (timed), upgrade to v1.34.0 (timed)."""
    began = time.monotonic()
    apply_all(
        dyn,
        cluster_objects(name, NS, "v1.33.0", control_plane_replicas=cp, worker_replicas=workers),
    )
    wait_for(
        f"{name} available",
        lambda: fully_at_version(dyn, mgmt, NS, name, "v1.33.0", cp + workers),
        600,
    )
    created = time.monotonic() - began
    before = frozenset(m["metadata"]["name"] for m in machines(dyn, NS, name))
    began = time.monotonic()
    patch(dyn, capi.CLUSTER, NS, name, {"spec": {"topology": {"version": "v1.34.0"}}})
    wait_for(
        f"{name} upgraded",
        lambda: fully_at_version(dyn, mgmt, NS, name, "v1.34.0", cp + workers, replaced=before),
        900,
        interval=1.0,
    )
    return created, time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        plane = LocalPlane(Path(tmp))
        t = time.monotonic()
        plane.up(timeout=300, ttl_seconds=7200)
        cold = time.monotonic() - t
        plane.down()
        t = time.monotonic()
        plane.up(timeout=300, ttl_seconds=7200)
        warm = time.monotonic() - t
        idle = memory(plane)
        try:
            mgmt = api_client(plane.kubeconfig)
            dyn = dynamic(mgmt)
            dyn.resources.get(api_version="v1", kind="Namespace").create(
                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
            )
            apply_all(dyn, cluster_class_objects(NS))
            rows = []
            for cp, workers in ((1, 1), (3, 3)):
                created, upgraded = [], []
                for i in range(args.repeats):
                    c, u = upgrade_once(dyn, mgmt, f"b{cp}x{workers}-{i}", cp, workers)
                    created.append(c)
                    upgraded.append(u)
                    print(
                        f"  {cp}CP/{workers}W run {i}: create {c:.1f}s, upgrade {u:.1f}s",
                        flush=True,
                    )
                rows.append((cp, workers, created, upgraded))
            busy = memory(plane)
        finally:
            plane.down(purge=True)
    print("\n| measurement | seconds |\n|---|---:|")
    print(f"| plane start, cold (new state dir) | {cold:.1f} |")
    print(f"| plane start, warm (same state dir) | {warm:.1f} |")
    print(
        "\n| cluster | create → Available (median s) | one-minor upgrade (median s) | runs |\n|---|---:|---:|---:|"
    )
    for cp, workers, created, upgraded in rows:
        print(
            f"| {cp} CP / {workers} workers | {statistics.median(created):.1f} | {statistics.median(upgraded):.1f} | {len(upgraded)} |"
        )
    print("\n| component | RSS idle (MiB) | RSS with benchmark clusters (MiB) |\n|---|---:|---:|")
    for name in idle:
        print(f"| {name} | {idle[name]:.0f} | {busy.get(name, 0):.0f} |")
    print(f"| **total** | {sum(idle.values()):.0f} | {sum(busy.values()):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
