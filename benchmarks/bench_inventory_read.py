"""CPU of the worker's fleet read from its cache, as the fleet grows (issue 29).

Usage: ``python -m benchmarks.bench_inventory_read [--sizes 12,100,300] [--per-cluster 10]
[--reads 21]``. Pure and in one process (no plane): each fleet is the objects a watch-fed
cache holds for ``bench_calibration``'s fleet - a Cluster, KubeadmControlPlane and
MachineDeployment per cluster from our templates, ten FleetWorkloads per cluster
(``testkit.capd_fleet``), each with a decision in its status - and every object has a
resourceVersion. Between two reads, as during a calibration, one cluster's Cluster and one
FleetWorkload are written (new resourceVersions). Each read is
``orchestrator.kube.inventory.read_fleet`` over those objects, timed with
``time.process_time``, two ways:

- **full**: every object turned into a snapshot entry and parsed (the CLI's one-shot reads);
- **kept**: with the worker's ``fleetmap.ParsedFleet``, which keeps what did not change.

Printed as markdown: per fleet size, the median CPU milliseconds per read and the min-max
spread. The worker reads the fleet once per placement round and per compatibility check, so a
read whose cost grows with the fleet makes the CPU per cluster-step grow (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from orchestrator.kube import inventory
from orchestrator.kube.fleetmap import FleetObjects, ParsedFleet
from orchestrator.kube.templates import cluster_objects
from testkit.capd_fleet import fleet_workloads

NAMESPACE = "scale"


class Fleet:
    """The objects of one fleet, written to as a calibration writes them."""

    def __init__(self, clusters: int, per_cluster: int) -> None:
        self._version = 0
        self.clusters: list[dict[str, Any]] = []
        control_planes: list[dict[str, Any]] = []
        pools: list[dict[str, Any]] = []
        by_kind = {
            "Cluster": self.clusters,
            "KubeadmControlPlane": control_planes,
            "MachineDeployment": pools,
        }
        for i in range(clusters):
            labels = {"env": "scale", "group": f"g{i % 3}"}
            name = f"c{i:04d}"
            for obj in cluster_objects(name, NAMESPACE, "v1.33.0", topology=False, labels=labels):
                if obj["kind"] in by_kind:
                    by_kind[obj["kind"]].append(self.written(obj))
        names = [str(c["metadata"]["name"]) for c in self.clusters]
        self.workloads = fleet_workloads(NAMESPACE, clusters * per_cluster, names)
        for j, obj in enumerate(self.workloads):
            obj["metadata"]["generation"] = 1
            home = names[j % len(names)]
            obj["status"] = {"clusters": [{"name": home, "replicas": 1}], "observedGeneration": 1}
            self.written(obj)
        self.objects = FleetObjects((), self.clusters, control_planes, pools, self.workloads)

    def written(self, obj: dict[str, Any]) -> dict[str, Any]:
        """``obj`` with the next resourceVersion, as the API server gives every write."""
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)
        return obj

    def source(self) -> tuple[FleetObjects, bool]:
        return self.objects, True


def timed_reads(fleet: Fleet, reads: int, kept: bool) -> list[float]:
    """CPU ms of each read after the first, one cluster and one workload written between."""
    parsed = ParsedFleet() if kept else None
    inventory.read_fleet(None, NAMESPACE, source=fleet.source, parsed=parsed)
    times = []
    for i in range(reads):
        fleet.written(fleet.clusters[i % len(fleet.clusters)])
        fleet.written(fleet.workloads[i % len(fleet.workloads)])
        start = time.process_time()
        inventory.read_fleet(None, NAMESPACE, source=fleet.source, parsed=parsed)
        times.append((time.process_time() - start) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="12,100,300", help="fleet sizes in clusters")
    parser.add_argument("--per-cluster", type=int, default=10, help="FleetWorkloads per cluster")
    parser.add_argument("--reads", type=int, default=21)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if not all(1 <= s <= 5000 for s in sizes) or not 1 <= args.per_cluster <= 100:
        parser.error("--sizes must be 1..5000 each, --per-cluster 1..100")
    if not 1 <= args.reads <= 1000:
        parser.error("--reads must be 1..1000")
    print("| clusters | workloads | full read, CPU ms (min-max) | kept, CPU ms (min-max) |")
    print("|---:|---:|---:|---:|")
    for size in sizes:
        fleet = Fleet(size, args.per_cluster)
        cells = []
        for kept in (False, True):
            times = timed_reads(fleet, args.reads, kept)
            cells.append(f"{statistics.median(times):.1f} ({min(times):.1f}-{max(times):.1f})")
        print(f"| {size:,} | {len(fleet.workloads):,} | {cells[0]} | {cells[1]} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
