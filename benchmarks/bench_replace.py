"""Replicas a calibration's re-placements move, next to the minimum its steps force (issue 15 §3).

Usage: ``python -m benchmarks.bench_replace [--clusters 100] [--workloads 1000] [--target
v1.35.0] [--seed 0]``. Pure and offline (no plane, no Temporal): the placements are the ones the
workflow's replace activity computes, on a ``testkit/fleetgen.py`` fleet.

The fleet is placed once and *settled* (each workload's decision written back as its current
placement, its usage into ``allocated``, as the live fleet is once decisions run). Then every
cluster below the target is calibrated in turn as the ClusterUpgrade workflow does it: the
upgrading taint (NoSchedule) goes on and placement runs with the cluster at the target version
(workloads whose APIs it removes move off first), the step runs (the cluster is at the target),
placement runs again, the taint comes off, placement runs once more. Each of these placements
places what the activity places (``affected_workloads``), and is settled. The first row repeats
the calibration placing the whole fleet every time: the same tally says the workloads the
activity leaves out would not have moved.

The same calibration runs three times: with the current replicas per cluster and the policy
generation they were decided under recorded (as the worker's FleetWorkload status has them), with
the counts but no generations (a hand-written snapshot: a Weighted assignment off its weights is
re-divided, since a changed weight cannot be ruled out), and with names only (every placement
divides from scratch, as before the counts existed). Printed as markdown: replicas moved per run, and the minimum the steps forced: the
replicas removed from clusters the workload can no longer use (the decision rejects them).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from orchestrator.domain.calibration import at_version
from orchestrator.domain.quantity import parse_cpu_milli, parse_memory_bytes
from orchestrator.domain.snapshot import replace_cluster
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.placement import place
from orchestrator.placement.result import PlacementResult
from testkit.fleetgen import generate_fleet_mapping
from workflows.activities.placement import affected_workloads

UPGRADING = {"key": "calibrator.dev/upgrading", "value": "bench", "effect": "NoSchedule"}


@dataclass
class Tally:
    """What one calibration's placements did."""

    placements: int = 0
    workloads: int = 0  # workload placements (one per workload placed, per placement)
    moved: int = 0  # replicas relocated (``Moved.replicas`` summed)
    forced: int = 0  # replicas removed from clusters the decision rejects
    unforced: int = 0  # replicas removed from clusters the workload could still use
    seconds: float = 0.0  # CPU seconds in ``place`` (parsing and settling not counted)


class Fleet:
    """A fleet mapping whose workloads' current placements follow the decisions."""

    def __init__(self, mapping: dict[str, Any], counts: bool, observed: bool = False) -> None:
        self.mapping = copy.deepcopy(mapping)
        self.counts = counts
        self.observed = observed
        self.clusters = {c["name"]: c for c in self.mapping["clusters"]}
        self.workloads = {
            f"{w.get('namespace', 'default')}/{w['name']}": w for w in self.mapping["workloads"]
        }
        # Exact replicas per cluster of every workload, whatever the snapshot records.
        self.running: dict[str, dict[str, int]] = {}

    def place(
        self,
        tally: Tally,
        *,
        allocate: bool = True,
        cluster: str | None = None,
        upcoming: str | None = None,
    ) -> None:
        """One placement, tallied against what runs, then settled.

        ``cluster``: as ``replace`` places around it (``affected_workloads``; with ``upcoming``
        the cluster placed as at that version); None: every workload. ``allocate`` False: the
        generated ``allocated`` already holds the workloads' usage (the first placement only
        records where they run).
        """
        snapshot = snapshot_from_mapping(self.mapping)
        start = time.process_time()
        if cluster is not None:
            current = snapshot.cluster(cluster)
            chosen = affected_workloads(snapshot, current)
            if upcoming is not None:
                snapshot = replace_cluster(
                    snapshot, [at_version(current, KubeVersion.parse(upcoming))]
                )
            snapshot = dataclasses.replace(snapshot, workloads=chosen)
        result = place(snapshot)
        tally.seconds += time.process_time() - start
        tally.placements += 1
        tally.workloads += len(result.decisions)
        self._tally(result, tally)
        self._settle(result, allocate)

    def _tally(self, result: PlacementResult, tally: Tally) -> None:
        for d in result.decisions:
            if d.unschedulable or d.workload not in self.running:
                continue
            before = self.running[d.workload]
            after = d.replicas
            added = sum(max(0, r - before.get(n, 0)) for n, r in after.items())
            removed = {n: r - after.get(n, 0) for n, r in before.items() if r > after.get(n, 0)}
            tally.moved += min(added, sum(removed.values()))
            if removed:
                rejected = d.reasons
                for name, r in removed.items():
                    if name in rejected:
                        tally.forced += r
                    elif added:
                        tally.unforced += r

    def _settle(self, result: PlacementResult, allocate: bool) -> None:
        for d in result.decisions:
            if d.unschedulable:
                continue
            workload = self.workloads[d.workload]
            cpu = parse_cpu_milli((workload.get("requests") or {}).get("cpu", 0))
            mem = parse_memory_bytes((workload.get("requests") or {}).get("memory", 0))
            before = self.running.get(d.workload, {})
            after = d.replicas
            for name in set(before) | set(after):
                delta = after.get(name, 0) - before.get(name, 0)
                item = self.clusters[name]
                if allocate and delta and "capacity" in item:
                    used = item.setdefault("allocated", {"cpu": "0", "memory": "0"})
                    used["cpu"] = f"{parse_cpu_milli(used.get('cpu', 0)) + delta * cpu}m"
                    used["memory"] = str(parse_memory_bytes(used.get("memory", 0)) + delta * mem)
            self.running[d.workload] = dict(after)
            placement = workload.setdefault("placement", {})
            if self.counts:
                placement["clusters"] = [{"name": n, "replicas": r} for n, r in after.items()]
                # No policy changes during a calibration: every decision is its own policy's,
                # as the worker records it (status.observedGeneration = metadata.generation).
                if self.observed:
                    workload["generation"] = 1
                    placement["observedGeneration"] = 1
            else:
                placement["clusters"] = list(after)


def calibrate(fleet: Fleet, target: str) -> Iterator[tuple[str, str]]:
    """Taint, place, step, place, untaint, place: for every cluster below ``target``.

    Yields (the phase, the cluster) after each change, for its placement.
    """
    goal = KubeVersion.parse(target)
    for item in fleet.mapping["clusters"]:
        if KubeVersion.parse(item["controlPlane"]["version"]) >= goal:
            continue
        taints = item.setdefault("taints", [])
        # A cluster the fleet shows mid-upgrade already carries the taint: it stays on.
        held = [t for t in taints if t["key"] == UPGRADING["key"] and t["effect"] == "NoSchedule"]
        if not held:
            taints.append(UPGRADING)
        yield "taint", item["name"]
        item["controlPlane"]["version"] = target
        for md in item.get("machineDeployments", []):
            md["version"] = target
        yield "step", item["name"]
        for taint in held or [UPGRADING]:
            taints.remove(taint)
        yield "untaint", item["name"]


def run(
    mapping: dict[str, Any],
    target: str,
    counts: bool,
    observed: bool = False,
    *,
    whole: bool = False,
) -> tuple[Tally, Tally, Fleet]:
    """(the first placement from the generated fleet, the calibration's placements, the fleet).

    ``whole``: every placement places every workload, instead of what ``replace`` places.
    """
    fleet = Fleet(mapping, counts, observed)
    first = Tally()
    fleet.place(first, allocate=False)
    tally = Tally()
    for phase, name in calibrate(fleet, target):
        if whole:
            fleet.place(tally)
        else:
            fleet.place(tally, cluster=name, upcoming=target if phase == "taint" else None)
    return first, tally, fleet


def main(argv: list[str] | None = None) -> int:
    """Print the markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--target", default="v1.35.0")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    mapping = generate_fleet_mapping(args.clusters, args.workloads, seed=args.seed)
    print(
        f"{args.clusters} clusters, {args.workloads} workloads (seed {args.seed}), calibrated to "
        f"{args.target}\n"
    )
    print(
        "| current placement | placements | workloads placed | replicas moved | forced by the "
        "steps | moved off usable clusters | placement CPU s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    modes = (
        (True, True, True, "names + replicas + observedGeneration, the whole fleet each time"),
        (True, True, False, "names + replicas + observedGeneration (stable, as the worker runs)"),
        (True, False, False, "names + replicas, no generations (stable; Weighted re-divides)"),
        (False, False, False, "names only (scratch)"),
    )
    ends: list[dict[str, dict[str, int]]] = []
    for counts, observed, whole, label in modes:
        _, tally, fleet = run(mapping, args.target, counts, observed, whole=whole)
        ends.append(fleet.running)
        print(
            f"| {label} | {tally.placements} | {tally.workloads:,} | {tally.moved:,} | "
            f"{tally.forced:,} | {tally.unforced:,} | {tally.seconds:.1f} |"
        )
    differ = sum(1 for k in ends[0] if ends[0][k] != ends[1].get(k))
    print(
        f"\nEnd state, placing what the activity places against the whole fleet each time: "
        f"{differ} of {len(ends[0]):,} workloads run elsewhere."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
