"""Time planning on synthetic fleets; prints a markdown table of median wall times.

Usage: ``python -m benchmarks.bench_plan [--sizes 100,1000,5000,10000] [--ratio 10] [--repeats 5]
[--profile]``. Two measurements per size, generation not timed:
- ``plans``: one chained, validated upgrade plan per cluster plus the rollout waves (what the issue's
  "planning 10,000 clusters" target is about);
- ``calibration``: ``plan_calibration`` end to end — plans, compatibility checks of every workload
  at every planned version, placement of each finding's workload in the end state, waves.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import pstats
import statistics
import sys
import time
from collections.abc import Callable

from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.upgradeplan import plan_cluster
from orchestrator.domain.versions import KubeVersion, newest
from orchestrator.domain.waves import DEFAULT_STRATEGY, build_rollout
from orchestrator.planning import plan_calibration
from testkit.fleetgen import generate_fleet


def plans_only(snapshot: FleetSnapshot, target: KubeVersion) -> int:
    """Per-cluster plans and waves: the planner's own cost."""
    plans = [plan_cluster(c, target, snapshot.available_versions) for c in snapshot.clusters]
    runnable = [
        c
        for c, p in zip(snapshot.clusters, plans, strict=True)
        if p.needs_upgrade and not p.blocked
    ]
    build_rollout(runnable, DEFAULT_STRATEGY)
    return len(plans)


def calibration(snapshot: FleetSnapshot, target: KubeVersion) -> int:
    """The full preview the CLI and the workflow compute."""
    return len(plan_calibration(snapshot, target).clusters)


def timed(func: Callable[[], object], repeats: int) -> list[float]:
    """Wall times of ``repeats`` calls (GC collected before each)."""
    out: list[float] = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        func()
        out.append(time.perf_counter() - start)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,5000,10000")
    parser.add_argument("--ratio", type=int, default=10, help="workloads per cluster")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--calibration-max",
        type=int,
        default=1000,
        help="largest fleet to time plan_calibration on",
    )
    args = parser.parse_args(argv)
    print(
        "| clusters | workloads | plans median s | µs per cluster | calibration median s | findings |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    snapshot: FleetSnapshot | None = None
    target: KubeVersion | None = None
    for clusters in (int(s) for s in args.sizes.split(",")):
        snapshot = generate_fleet(clusters, clusters * args.ratio, seed=args.seed)
        target = newest(snapshot.available_versions)
        assert target is not None
        plan_t = statistics.median(
            timed(functools.partial(plans_only, snapshot, target), args.repeats)
        )
        if clusters <= args.calibration_max:
            full = plan_calibration(snapshot, target)
            cal_t = statistics.median(
                timed(functools.partial(calibration, snapshot, target), max(1, args.repeats // 2))
            )
            cal_text, findings = f"{cal_t:.3f}", f"{len(full.findings):,}"
        else:
            cal_text, findings = "-", "-"
        print(
            f"| {clusters:,} | {clusters * args.ratio:,} | {plan_t:.3f} | {plan_t / clusters * 1e6:.1f} | "
            f"{cal_text} | {findings} |",
            flush=True,
        )
    if args.profile and snapshot is not None and target is not None:
        profiler = cProfile.Profile()
        profiler.enable()
        plan_calibration(snapshot, target)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
