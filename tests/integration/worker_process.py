"""A calibration worker in a subprocess that the crash tests can SIGKILL at chosen points.

``python -m tests.integration.worker_process --address HOST:PORT --kubeconfig K --namespace NS
--task-queue Q --log patches.jsonl [--markers DIR] [--kill POINT]... [--mark POINT]...``

The worker is the product's (``workflows.worker.build_worker`` on ``KubeFleetBackend``); the test
wrapper around the backend adds two things a crash test needs and the product must not carry:

* every version write is appended to ``--log`` (fsynced) before anything else can happen, so the
  writes of every worker process of a run survive the kills and can be counted (no step may be
  applied twice);
* named **points** in the activities' I/O. Reaching a point creates its marker file in
  ``--markers`` (fsynced) and then, for a ``--kill`` point, the process SIGKILLs itself; a
  ``--mark`` point only leaves the marker (a test waits on it to act at that moment, e.g. stop
  the Temporal server). A point fires once: a restarted worker given the same plan sees the
  marker and passes the point by. The kills are therefore placed by what the worker is doing,
  never by timing.

Points (``NAME`` or ``NAME@CLUSTER`` to fire only for that cluster):

``placement``     right after a PlacementDecision write reached the API server, before the
                  ``replace`` activity returned (the retry must find nothing left to write);
``before-patch``  entering ``patch_control_plane``: the cluster is tainted and placed, nothing
                  patched yet (a plan's first step is its control plane's);
``patch``         right after a version write reached the API server, before the activity
                  returned: the worst case, the retry must see the step as already applied;
``wait``          in ``wait_control_plane`` / ``wait_workers``, at a poll that saw the awaited
                  part still rolling out;
``untaint``       right after the taint removal reached the API server, before the activity
                  returned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client

from orchestrator.domain.taints import Effect
from orchestrator.kube.backend.access import PatchRecord
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.backend.port import ClusterObservation, ClusterRef
from orchestrator.kube.client import api_client
from workflows.worker import build_worker

POINTS = ("placement", "before-patch", "patch", "wait", "untaint")
REPO = Path(__file__).resolve().parents[2]
# The dead worker's sticky queue holds a workflow's next task until this passes; the SDK default
# (10 s) would add that much per kill. A test knob only: production keeps the default.
STICKY_TIMEOUT = timedelta(seconds=3)


@dataclass(frozen=True)
class Point:
    """One planned point: its name, an optional cluster, and whether it kills or only marks."""

    name: str
    cluster: str | None
    kill: bool

    @classmethod
    def parse(cls, text: str, kill: bool) -> Point:
        name, _, cluster = text.partition("@")
        if name not in POINTS:
            raise ValueError(f"unknown point {name!r}; known: {', '.join(POINTS)}")
        return cls(name, cluster or None, kill)

    @property
    def label(self) -> str:
        """The marker file's name (also how the plan spells the point)."""
        return f"{self.name}@{self.cluster}" if self.cluster else self.name


class CrashingBackend(KubeFleetBackend):
    """The real backend, logging its version writes and stopping at the planned points."""

    def __init__(
        self,
        mgmt: Any,
        namespace: str,
        log: Path,
        markers: Path,
        points: Sequence[Point],
        *,
        dyn: Any = None,
    ) -> None:
        super().__init__(mgmt, namespace, dyn=dyn)
        self._log = log
        self._markers = markers
        self._points = tuple(points)
        self._point_lock = threading.Lock()  # the base class's lock is held around wrote_*

    def _reached(self, name: str, cluster: str, detail: str) -> None:
        with self._point_lock:
            for point in self._points:
                if point.name != name or point.cluster not in (None, cluster):
                    continue
                marker = self._markers / point.label
                if marker.exists():
                    continue  # used by an earlier worker process
                info = activity.info() if activity.in_activity() else None
                _append(
                    marker,
                    {
                        "point": point.label,
                        "cluster": cluster,
                        "detail": detail,
                        "activity": info.activity_type if info else None,
                        "attempt": info.attempt if info else None,
                        "pid": os.getpid(),
                        "killed": point.kill,
                        "at": time.time(),
                    },
                )
                if point.kill:
                    os.kill(os.getpid(), signal.SIGKILL)

    # Hooks of KubeFleetBackend, called right after the write returned from the API server.

    def wrote_version(self, record: PatchRecord) -> None:
        _append(
            self._log,
            {
                "cluster": record.cluster,
                "component": record.component,
                "version": record.version,
                "step": record.step_id,
                "pid": os.getpid(),
            },
        )
        self._reached("patch", record.cluster, f"{record.component} -> {record.version}")

    def wrote_placements(self, workloads: Sequence[str], reason: str) -> None:
        if workloads:  # the reason starts with the cluster the placement ran for
            self._reached("placement", reason.partition(":")[0], f"{list(workloads)}: {reason}")

    # Protocol methods with a point inside.

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        kind = activity.info().activity_type if activity.in_activity() else ""
        if kind == "patch_control_plane":
            self._reached("before-patch", cluster.name, "entering patch_control_plane")
        obs = await super().observe(cluster)
        rolling = (
            not obs.control_plane.rolled_out
            if kind == "wait_control_plane"
            else kind == "wait_workers" and not all(p.rolled_out for p in obs.pools)
        )
        if rolling:
            self._reached("wait", cluster.name, f"{kind}: still rolling out")
        return obs

    async def remove_taint(self, cluster: ClusterRef, key: str, effect: Effect) -> bool:
        changed = await super().remove_taint(cluster, key, effect)
        if changed:
            self._reached("untaint", cluster.name, f"removed {key}")
        return changed


def _append(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and make it durable before the caller may be killed."""
    with path.open("a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a log or marker file (none when it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_worker(
    address: str,
    kubeconfig: Path,
    namespace: str,
    task_queue: str,
    log: Path,
    *,
    markers: Path | None = None,
    kill: Sequence[str] = (),
    mark: Sequence[str] = (),
    output: Path | None = None,
) -> subprocess.Popen[bytes]:
    """Start a worker process (its output appended to ``output`` when given)."""
    args = [
        sys.executable,
        "-m",
        "tests.integration.worker_process",
        "--address",
        address,
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        namespace,
        "--task-queue",
        task_queue,
        "--log",
        str(log),
    ]
    if markers is not None:
        args += ["--markers", str(markers)]
    args += [a for p in kill for a in ("--kill", p)]
    args += [a for p in mark for a in ("--mark", p)]
    if output is None:
        return subprocess.Popen(args, cwd=REPO)
    with output.open("ab") as out:
        return subprocess.Popen(args, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)


def stop(workers: Sequence[subprocess.Popen[bytes]]) -> None:
    """Terminate the workers still running (SIGKILL after 30 s)."""
    for w in workers:
        if w.poll() is None:
            w.terminate()
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait(10)


async def _main(argv: Sequence[str]) -> None:
    parser = argparse.ArgumentParser(prog="worker_process")
    parser.add_argument("--address", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--markers", type=Path)
    parser.add_argument("--kill", action="append", default=[])
    parser.add_argument("--mark", action="append", default=[])
    args = parser.parse_args(argv)
    points = [Point.parse(p, True) for p in args.kill] + [Point.parse(p, False) for p in args.mark]
    if points and args.markers is None:
        parser.error("--kill and --mark need --markers")
    backend = CrashingBackend(
        api_client(args.kubeconfig),
        args.namespace,
        args.log,
        args.markers or Path(),
        points,
    )
    client = await Client.connect(args.address)
    worker = build_worker(
        client,
        backend,
        task_queue=args.task_queue,
        sticky_queue_schedule_to_start_timeout=STICKY_TIMEOUT,
    )
    await worker.run()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1:]))
