"""Time ``place()`` on synthetic fleets; prints a markdown table of median CPU and wall seconds.

Usage: ``python -m benchmarks.bench_place [--sizes 100,1000,5000] [--ratio 10] [--repeats 5]
[--freeze] [--profile]``. Generation is not timed. Each size runs ``--repeats`` times in this
process (after one untimed warm-up run) and the medians are reported; the min-max spread says how
noisy the machine was.

The target ("placing 10,000 workloads on 1,000 clusters in under 1 s of compute on one core") is
about CPU time (``time.process_time``): a busy neighbour on a shared machine inflates wall time
but not the compute the placement needs. The plain numbers include Python's garbage collector as
a caller of ``place()`` would see it. ``--freeze`` adds a second, clearly separate column: the
same runs after ``gc.freeze()`` of the loaded snapshot (what a long-lived worker that keeps its
snapshot could do); it is not what the target is measured by.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time

from benchmarks.fleetgen import generate_fleet
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.placement import place

TARGET = (1000, 10000, 1.0)  # clusters, workloads, CPU seconds


def time_place(
    snapshot: FleetSnapshot, repeats: int, *, freeze: bool = False
) -> tuple[list[float], list[float]]:
    """CPU and wall times of ``repeats`` full placements (GC collected before each run).

    With ``freeze`` the snapshot (and everything else alive) is moved to the permanent GC
    generation before each run and released after it.
    """
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(repeats):
        gc.collect()
        if freeze:
            gc.freeze()
        start, start_cpu = time.perf_counter(), time.process_time()
        result = place(snapshot)
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start)
        del result
        if freeze:
            gc.unfreeze()
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--ratio", type=int, default=10, help="workloads per cluster")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--freeze", action="store_true", help="also time after gc.freeze() (separate column)"
    )
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    header = (
        "| clusters | workloads | unschedulable | median CPU s | median wall s "
        "| min-max CPU s | CPU µs per workload |"
    )
    rule = "|---:|---:|---:|---:|---:|---:|---:|"
    if args.freeze:
        header += " median CPU s after gc.freeze() (not the target) |"
        rule += "---:|"
    print(header)
    print(rule)
    snapshot = None
    verdict = ""
    for clusters in sizes:
        workloads = clusters * args.ratio
        snapshot = generate_fleet(clusters, workloads, seed=args.seed)
        unschedulable = len(place(snapshot).unschedulable)  # also the warm-up run
        cpu, wall = time_place(snapshot, args.repeats)
        median_cpu = statistics.median(cpu)
        row = (
            f"| {clusters:,} | {workloads:,} | {unschedulable:,} | {median_cpu:.3f} "
            f"| {statistics.median(wall):.3f} | {min(cpu):.3f}-{max(cpu):.3f} "
            f"| {median_cpu / workloads * 1e6:.1f} |"
        )
        if args.freeze:
            frozen, _ = time_place(snapshot, args.repeats, freeze=True)
            row += f" {statistics.median(frozen):.3f} |"
        print(row, flush=True)
        if (clusters, workloads) == TARGET[:2]:
            met = "met" if median_cpu < TARGET[2] else "NOT met"
            verdict = (
                f"\nTarget ({workloads:,} workloads on {clusters:,} clusters in under "
                f"{TARGET[2]:g} s of CPU): median {median_cpu:.3f} s, {met}."
            )
    if verdict:
        print(verdict)
    if args.profile and snapshot is not None:
        profiler = cProfile.Profile()
        profiler.enable()
        place(snapshot)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
