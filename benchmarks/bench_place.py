"""Time ``place()`` on synthetic fleets; prints a markdown table of median CPU seconds.

Usage: ``python -m benchmarks.bench_place [--sizes 100,1000,5000] [--ratio 10] [--repeats 5]
[--profile]``. Generation is not timed. Each size runs ``--repeats`` times per column in this
process (after one untimed warm-up run) and the medians are reported; the min-max spread says how
noisy the machine was.

The target ("placing 10,000 workloads on 1,000 clusters in under 1 s of compute on one core") is
about CPU time (``time.process_time``): a busy neighbour on a shared machine inflates wall time
but not the compute the placement needs. Two columns, both including the garbage collector:
Python's default GC thresholds (a library caller that tunes nothing) and the thresholds the
``calibrator`` process sets at start-up (orchestrator/cli/runtime.py), which is how placement runs
in the CLI and in the Temporal worker; the verdict names both."""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time

from orchestrator.cli.runtime import GC_THRESHOLDS
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.placement import place
from testkit.fleetgen import generate_fleet

TARGET = (1000, 10000, 1.0)  # clusters, workloads, CPU seconds


def time_place(
    snapshot: FleetSnapshot, repeats: int, *, thresholds: tuple[int, int, int] | None = None
) -> tuple[list[float], list[float]]:
    """CPU and wall times of ``repeats`` full placements (GC collected before each run).

    With ``thresholds`` each run uses those GC thresholds (the ``calibrator`` process's, see
    orchestrator/cli/runtime.py), restored afterwards.
    """
    cpu: list[float] = []
    wall: list[float] = []
    default = gc.get_threshold()
    for _ in range(repeats):
        gc.collect()
        if thresholds:
            gc.set_threshold(*thresholds)
        start, start_cpu = time.perf_counter(), time.process_time()
        result = place(snapshot)
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start)
        gc.set_threshold(*default)
        del result
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--ratio", type=int, default=10, help="workloads per cluster")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    header = (
        "| clusters | workloads | unschedulable | median CPU s, Python's default GC "
        "| median CPU s, as `calibrator` runs | min-max CPU s, as `calibrator` runs "
        "| CPU µs per workload |"
    )
    print(header)
    print("|---:|---:|---:|---:|---:|---:|---:|")
    snapshot = None
    verdict = ""
    for clusters in sizes:
        workloads = clusters * args.ratio
        snapshot = generate_fleet(clusters, workloads, seed=args.seed)
        unschedulable = len(place(snapshot).unschedulable)  # also the warm-up run
        plain, _ = time_place(snapshot, args.repeats)
        cpu, _ = time_place(snapshot, args.repeats, thresholds=GC_THRESHOLDS)
        median_plain, median_cpu = statistics.median(plain), statistics.median(cpu)
        print(
            f"| {clusters:,} | {workloads:,} | {unschedulable:,} | {median_plain:.3f} "
            f"| {median_cpu:.3f} | {min(cpu):.3f}-{max(cpu):.3f} "
            f"| {median_cpu / workloads * 1e6:.1f} |",
            flush=True,
        )
        if (clusters, workloads) == TARGET[:2]:
            met = "met" if median_cpu < TARGET[2] else "NOT met"
            verdict = (
                f"\nTarget ({workloads:,} workloads on {clusters:,} clusters in under "
                f"{TARGET[2]:g} s of CPU): median {median_cpu:.3f} s as `calibrator` runs "
                f"(GC thresholds {GC_THRESHOLDS}), {met}; {median_plain:.3f} s with Python's "
                "default GC thresholds."
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
