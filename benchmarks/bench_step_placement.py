"""CPU of one cluster's re-placements during its upgrade, as the fleet grows (issue 29).

Usage: ``python -m benchmarks.bench_step_placement [--sizes 12,100,300] [--per-cluster 10]
[--repeats 7]``. Pure and in one process (no plane, no Temporal): the fleet of
``bench_calibration`` (``testkit.capd_fleet``: every cluster labelled ``env: scale``, ten
FleetWorkloads per cluster, one division mode in four, each running on two clusters), built as
the worker's inventory builds it (``fleetmap.fleet_snapshot``) and *settled* (one placement of
every workload written back as its counts, ``testkit.settle``).

Then one cluster of the middle of the fleet is upgraded by one step, as ``ClusterUpgrade`` does
it, and each of its three re-placements is timed as the ``replace`` activity computes it
(``affected_workloads``, then ``place`` of those): gated and placed as at the next version, gated
after the step, and with the gate off. (The fleet read before each is timed apart, by
``bench_inventory_read``.) Printed as markdown: per fleet size, the workloads the
three placements placed and the median CPU milliseconds (``time.process_time``) of the three
together, with the min-max spread over ``--repeats``. A flat per-step cost is what the
calibration's CPU per cluster-step needs (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from typing import Any

from orchestrator.domain.calibration import at_version
from orchestrator.domain.snapshot import Cluster, FleetSnapshot, replace_cluster
from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Taint, with_taint
from orchestrator.domain.versions import KubeVersion
from orchestrator.kube.fleetmap import FleetMap, MappedCluster, fleet_snapshot
from orchestrator.placement import place
from testkit.capd_fleet import fleet_workloads
from testkit.settle import settled
from workflows.activities.placement import affected_workloads

FROM, TO = "v1.33.0", "v1.34.0"
GATE = Taint(key=UPGRADING_TAINT_KEY, value="bench", effect="NoSchedule")


def fleet(clusters: int, per_cluster: int) -> FleetSnapshot:
    """The benchmark calibration's fleet as the worker reads it, settled."""
    names = [f"c{i:04d}" for i in range(clusters)]
    objects: list[dict[str, Any]] = fleet_workloads("scale", clusters * per_cluster, names)
    for j, item in enumerate(objects):
        item["metadata"].update(resourceVersion=str(1000 + j), generation=1, uid=f"u{j}")
    mapped = tuple(
        MappedCluster(
            name,
            "scale",
            {
                "name": name,
                "labels": {"env": "scale", "group": f"g{i % 3}"},
                "controlPlane": {"version": FROM, "replicas": 1},
                "machineDeployments": [{"name": "md-0", "version": FROM, "replicas": 1}],
                "taints": [],
                "provider": "docker",
            },
        )
        for i, name in enumerate(names)
    )
    snapshot, _ = fleet_snapshot(FleetMap(mapped, (FROM, TO)), objects)
    return settled(snapshot)


def phases(snapshot: FleetSnapshot, cluster: Cluster) -> list[tuple[FleetSnapshot, Cluster]]:
    """The fleet as each of the cluster's three re-placements reads it, and the cluster."""
    target = KubeVersion.parse(TO)
    gated = dataclasses.replace(cluster, taints=with_taint(cluster.taints, GATE))
    stepped = at_version(gated, target)
    return [
        (replace_cluster(snapshot, [gated]), gated),  # placed as if at the next version
        (replace_cluster(snapshot, [stepped]), stepped),
        (replace_cluster(snapshot, [at_version(cluster, target)]), at_version(cluster, target)),
    ]


def one_step(snapshot: FleetSnapshot, cluster: Cluster) -> tuple[int, float]:
    """Workloads placed and CPU seconds of the three re-placements, as ``replace`` runs them."""
    placed, seconds = 0, 0.0
    target = KubeVersion.parse(TO)
    for index, (read, current) in enumerate(phases(snapshot, cluster)):
        start = time.process_time()
        chosen = affected_workloads(read, current)
        # The first is the activity's ``upcoming_version``: the cluster placed as at the next one.
        placing = replace_cluster(read, [at_version(current, target)]) if index == 0 else read
        place(dataclasses.replace(placing, workloads=chosen))
        seconds += time.process_time() - start
        placed += len(chosen)
    return placed, seconds


def main(argv: list[str] | None = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="12,100,300", help="fleet sizes in clusters")
    parser.add_argument("--per-cluster", type=int, default=10, help="FleetWorkloads per cluster")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    if not all(1 <= s <= 5000 for s in sizes) or not 1 <= args.per_cluster <= 100:
        parser.error("--sizes must be 1..5000 each, --per-cluster 1..100")
    if not 1 <= args.repeats <= 100:
        parser.error("--repeats must be 1..100")
    print("| clusters | workloads | placed by the three | CPU ms (min-max) | CPU µs per workload |")
    print("|---:|---:|---:|---:|---:|")
    for size in sizes:
        snapshot = fleet(size, args.per_cluster)
        cluster = snapshot.clusters[size // 2]
        one_step(snapshot, cluster)  # warm-up, untimed
        runs = [one_step(snapshot, cluster) for _ in range(args.repeats)]
        placed = runs[0][0]
        times = [s * 1000 for _, s in runs]
        median = statistics.median(times)
        print(
            f"| {size:,} | {len(snapshot.workloads):,} | {placed:,} | "
            f"{median:.1f} ({min(times):.1f}-{max(times):.1f}) | "
            f"{median * 1000 / max(1, placed):.0f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
