"""Time whole ``calibrator`` processes, as a user waits for them; prints a markdown table.

Usage: ``python -m benchmarks.bench_cli [--sizes 100,1000,10000] [--ratio 10] [--repeats 5]
[--formats json,yaml] [--commands drift,plan,check,place] [--timeout 600] [--data DIR]``.

Every cell is a fresh interpreter (``python -m orchestrator.cli.main CMD --snapshot F -o json``)
timed from start to exit with its output written to a file: imports, reading and validating the
snapshot, compute, building the document and encoding it all count, as they do for a user.
The median of ``--repeats`` runs is reported with the output size. Fleets come from
``testkit/fleetgen.py`` (seed 0), written once per size as JSON and as YAML into ``--data``.

A run that exceeds ``--timeout`` is killed and its cell says so (remaining repeats skipped).
``--profile`` adds one extra run per cell under cProfile and reports the share of the run spent
in ``load_snapshot`` (reading, parsing, validating and building the snapshot), so the rest of
the pipeline can be told apart from the loader.
"""

from __future__ import annotations

import argparse
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from testkit.fleetgen import write_fleet

TARGET = "v1.35.0"
# (command, clusters, format) -> limit in seconds, from issue 9.
GOALS: dict[tuple[str, int, str], float] = {
    ("place", 1000, "json"): 2.0,
    ("place", 1000, "yaml"): 4.0,
    ("plan", 10000, "json"): 8.0,
    ("drift", 10000, "json"): 8.0,
    ("check", 10000, "json"): 8.0,
}
PLACE_OUTPUT_LIMIT = 20_000_000  # bytes of `place -o json` at 1k x 10k


@dataclass
class Cell:
    """One command on one fleet file: wall times of the runs, output size, loader share."""

    command: str
    clusters: int
    workloads: int
    fmt: str
    times: list[float]
    size: int = 0
    timed_out: float | None = None
    loader_share: float | None = None
    error: str = ""

    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None


def _argv(command: str, snapshot: Path) -> list[str]:
    args = [sys.executable, "-m", "orchestrator.cli.main", command, "--snapshot", str(snapshot)]
    if command in ("plan", "check"):
        args += ["--target", TARGET]
    return [*args, "-o", "json"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_once(argv: list[str], out: Path, timeout: float) -> tuple[float, str]:
    """Wall seconds from spawning the process to its exit, output in ``out``; "" or an error."""
    with out.open("wb") as sink:
        start = time.perf_counter()
        proc = subprocess.run(
            argv, stdout=sink, stderr=subprocess.PIPE, env=_env(), timeout=timeout, check=False
        )
        elapsed = time.perf_counter() - start
    # Exit 1 is a partial result with the whole document written (blocked clusters, unschedulable
    # workloads: README "Exit status"), which is what a user waits for too.
    if proc.returncode not in (0, 1) or out.stat().st_size == 0:
        lines = proc.stderr.decode(errors="replace").strip().splitlines()
        return elapsed, lines[-1] if lines else f"exit {proc.returncode}, no output"
    return elapsed, ""


def loader_share(argv: list[str], out: Path, timeout: float) -> float:
    """Share of one profiled run's time spent in ``load_snapshot``."""
    with tempfile.NamedTemporaryFile(suffix=".prof", delete=False) as prof:
        path = prof.name
    try:
        profiled = [argv[0], "-m", "cProfile", "-o", path, *argv[1:]]
        run_once(profiled, out, timeout)
        stats = pstats.Stats(path)
        total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
        load = 0.0
        for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
            if name == "load_snapshot" and filename.endswith("snapshot.py"):
                load = max(load, row[3])
        return float(load / total)
    finally:
        os.unlink(path)


def measure(
    command: str,
    clusters: int,
    workloads: int,
    fmt: str,
    snapshot: Path,
    *,
    repeats: int,
    timeout: float,
    profile: bool,
    scratch: Path,
) -> Cell:
    cell = Cell(command, clusters, workloads, fmt, [])
    argv = _argv(command, snapshot)
    out = scratch / f"{command}-{clusters}-{fmt}.json"
    for _ in range(repeats):
        try:
            elapsed, error = run_once(argv, out, timeout)
        except subprocess.TimeoutExpired:
            cell.timed_out = timeout
            break
        if error:
            cell.error = error
            break
        cell.times.append(elapsed)
        cell.size = out.stat().st_size
    if profile and cell.times and not cell.error:
        cell.loader_share = loader_share(argv, out, timeout * 3)
    out.unlink(missing_ok=True)
    return cell


def _fmt_seconds(cell: Cell) -> str:
    if cell.error:
        return f"error: {cell.error}"
    if cell.timed_out is not None:
        return f"> {cell.timed_out:g} (killed)"
    median = cell.median()
    assert median is not None
    spread = f" ({min(cell.times):.2f}-{max(cell.times):.2f})" if len(cell.times) > 1 else ""
    return f"{median:.2f}{spread}"


def _verdict(cell: Cell) -> str:
    goal = GOALS.get((cell.command, cell.clusters, cell.fmt))
    if goal is None:
        return ""
    median = cell.median()
    met = median is not None and cell.timed_out is None and median < goal
    if cell.command == "place":
        met = met and cell.size < PLACE_OUTPUT_LIMIT
        return f"< {goal:g} s, < 20 MB: {'met' if met else 'NOT met'}"
    return f"< {goal:g} s: {'met' if met else 'NOT met'}"


def row(cell: Cell) -> str:
    share = "" if cell.loader_share is None else f"{cell.loader_share:.0%}"
    size = f"{cell.size / 1e6:.2f}" if cell.size else "-"
    return (
        f"| {cell.command} | {cell.clusters:,} | {cell.workloads:,} | {cell.fmt} "
        f"| {_fmt_seconds(cell)} | {len(cell.times)} | {size} | {share} | {_verdict(cell)} |"
    )


HEADER = (
    "| command | clusters | workloads | snapshot | median s (min-max) | runs | output MB "
    "| in load_snapshot | goal |\n|---|---:|---:|---|---:|---:|---:|---:|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--ratio", type=int, default=10, help="workloads per cluster")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--formats", default="json,yaml")
    parser.add_argument("--commands", default="drift,plan,check,place")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--profile", action="store_true", help="loader share per cell")
    parser.add_argument(
        "--data", type=Path, default=Path(tempfile.gettempdir()) / "calibrator-bench"
    )
    args = parser.parse_args(argv)
    args.data.mkdir(parents=True, exist_ok=True)
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    print(HEADER, flush=True)
    for clusters in (int(s) for s in args.sizes.split(",")):
        workloads = clusters * args.ratio
        for fmt in args.formats.split(","):
            snapshot = args.data / f"fleet-{clusters}x{workloads}.{fmt}"
            if not snapshot.exists():
                write_fleet(str(snapshot), clusters, workloads)
            for command in args.commands.split(","):
                cell = measure(
                    command,
                    clusters,
                    workloads,
                    fmt,
                    snapshot,
                    repeats=args.repeats,
                    timeout=args.timeout,
                    profile=args.profile,
                    scratch=args.data,
                )
                print(row(cell), flush=True)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
