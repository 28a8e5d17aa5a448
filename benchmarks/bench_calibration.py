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
continue-as-new count, worker CPU seconds (and per cluster-step) and peak RSS (the worker is a
subprocess), the plane's RSS, and requests two ways:

- **the worker's own**, by verb and resource, with the bytes of the answers it read (watch
  events included), counted in the worker process at its management client's request layer
  (``orchestrator.kube.client.RequestCounts`` through ``observe_requests``): the worker writes
  them to a file when the benchmark signals it (SIGUSR1), once when it is ready (after a first
  fleet read: the cache's sync, or one LIST of each kind without it) and then before and after
  the calibration, so the figures per cluster-step are the calibration's alone;
- **every client's**, from kube-apiserver's ``apiserver_request_total`` before and after (CAPI's
  controllers, the sampler's LISTs and the worker together), by verb and resource/subresource.

``--cache`` (the default, as ``calibrator worker`` runs) gives the worker the watch-fed cache of
the fleet (``KubeFleetBackend(cache=True)``); ``--no-cache`` LISTs the fleet on every read, as
before issue 29. ``--placed`` places and writes the whole fleet once before the calibration
(``testkit.settle.write_settled``), as a fleet calibrated before is: its re-placements then write
what they move, where the names-only start makes each workload's first placement write its whole
decision. ``--json FILE`` writes the figures as JSON too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.dynamic import DynamicClient
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.service import RPCError, RPCStatusCode

from benchmarks.bench_worker import Kinds, start_bench_worker, worker_counts, worker_ready
from orchestrator.domain.snapshot_dump import snapshot_to_mapping
from orchestrator.kube.backend.fleet import KubeFleetBackend
from orchestrator.kube.client import api_client, dynamic
from orchestrator.localplane.plane import LocalPlane
from testkit.capd_fleet import (
    CREATE_TIMEOUT,
    TARGET,
    fleet_layout,
    observe,
    provision,
    wait_available,
)
from testkit.prometheus import free_address, scrape
from testkit.settle import write_settled
from testkit.workflow_harness import start_dev_server
from workflows.activities.placement import MAX_PLACEMENT_ROUNDS_AT_ONCE, PLACEMENT_ROUNDS_AT_ONCE
from workflows.client import ControlError, start_calibration, status
from workflows.metrics import PLACEMENT_PHASE, PLACEMENT_PHASES
from workflows.model import (
    CalibrationInput,
    CalibrationOptions,
    ClusterProgress,
    ClusterState,
    Phase,
    PlanInput,
    Timeouts,
)

HISTORY_EVENT_LIMIT = 51_200  # Temporal's hard limit per run
STUCK = (Phase.HALTED, Phase.AWAITING_DECISIONS, Phase.FAILED, Phase.ABORTED)


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


def placement_phases(address: str) -> dict[str, tuple[float, float]]:
    """The worker's re-placement rounds by phase so far: phase -> (rounds, seconds)."""
    series = scrape(address)
    out: dict[str, tuple[float, float]] = {}
    for phase in PLACEMENT_PHASES:
        histogram = series.histogram(PLACEMENT_PHASE, phase=phase)
        out[phase] = (histogram.count, histogram.sum)
    return out


def apiserver_requests(kubeconfig: Path) -> Counter[tuple[str, str]]:
    """``apiserver_request_total`` summed by (verb, resource[/subresource]), via ``kubectl``.

    Named as ``client.request_kind`` names the worker's own requests, so the two read side by
    side (``clusters/status`` apart from ``clusters``: the worker never writes a Cluster's status).
    """
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
        resource, sub = clean.get("resource", ""), clean.get("subresource", "")
        counts[(clean.get("verb", ""), f"{resource}/{sub}" if sub else resource)] += int(
            float(value)
        )
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
    span_s: float = 0.0  # first event to last, the runs summed
    # By activity type: seconds from scheduled to closed (queueing for a slot, every attempt
    # and the retries' backoff included), summed, and how many were scheduled.
    activity_s: dict[str, float] = field(default_factory=dict)
    activity_calls: Counter[str] = field(default_factory=Counter)


_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}


async def history_stats(temporal: Client, workflow_id: str) -> HistoryStats:
    """Size of a workflow's history, and where its time went, activity type by type."""
    runs = events = size = biggest = 0
    span = 0.0
    seconds: dict[str, float] = {}
    calls: Counter[str] = Counter()
    async for wf in temporal.list_workflows(f'WorkflowId = "{workflow_id}"'):
        history = await temporal.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
        runs += 1
        events += len(history.events)
        size += sum(e.ByteSize() for e in history.events)
        biggest = max(biggest, len(history.events))
        times = [e.event_time.ToNanoseconds() / 1e9 for e in history.events]
        span += max(times, default=0.0) - min(times, default=0.0)
        scheduled: dict[int, tuple[str, float]] = {}
        for event, at in zip(history.events, times, strict=True):
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = event.activity_task_scheduled_event_attributes.activity_type.name
                scheduled[event.event_id] = (name, at)
                calls[name] += 1
            elif event.event_type in _CLOSED:
                attributes = getattr(event, _CLOSED[event.event_type])
                name, since = scheduled.pop(attributes.scheduled_event_id)
                seconds[name] = seconds.get(name, 0.0) + at - since
    return HistoryStats(runs, events, size, biggest, span, seconds, calls)


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
    rollouts: dict[str, float] = field(default_factory=dict)  # cluster -> its CAPI rollout, s
    query_failures: int = 0  # progress queries failed (deadlock detector, RPC timeout) in the run
    cache: bool = True  # the worker read the fleet from its watch-fed cache
    # The worker's own requests and bytes read during the calibration (``WorkerCounts``), and
    # what its start cost (the cache's sync, or one LIST of each kind), by (verb, resource).
    worker_requests: Kinds = field(default_factory=Counter)
    worker_received: Kinds = field(default_factory=Counter)
    worker_refused: Kinds = field(default_factory=Counter)  # (verb, "resource status")
    worker_start_requests: Kinds = field(default_factory=Counter)
    worker_start_received: Kinds = field(default_factory=Counter)
    # The worker's re-placement rounds at once, and where their time went: phase -> (rounds,
    # seconds) from its ``calibrator_placement_phase_seconds`` during the calibration.
    placement_rounds: int = PLACEMENT_ROUNDS_AT_ONCE
    placement_phases: dict[str, tuple[float, float]] = field(default_factory=dict)

    def per_cluster_step(self, n: float) -> float:
        """``n`` per cluster-step."""
        return n / max(self.cluster_steps, 1)

    def own_time(self) -> list[float]:
        """Each cluster's time beyond its CAPI rollout: its child's span minus the rollout."""
        return sorted(
            c.span_s - self.rollouts[n] for n, c in self.children.items() if n in self.rollouts
        )

    def activity_time(self) -> list[tuple[str, float, float]]:
        """(activity type, calls per cluster, seconds per cluster), most time first."""
        seconds: dict[str, float] = {}
        calls: Counter[str] = Counter()
        for c in self.children.values():
            for name, s in c.activity_s.items():
                seconds[name] = seconds.get(name, 0.0) + s
            calls.update(c.activity_calls)
        n = max(len(self.children), 1)
        ranked = sorted(seconds.items(), key=lambda kv: -kv[1])
        return [(name, calls[name] / n, s / n) for name, s in ranked]

    def as_json(self) -> dict[str, Any]:
        """The figures as JSON (``--json``): totals and per cluster-step."""

        def by_kind(counts: Kinds) -> dict[str, int]:
            return {f"{v} {r}": n for (v, r), n in sorted(counts.items(), key=lambda kv: -kv[1])}

        def each_step(counts: Kinds) -> dict[str, float]:
            return {k: round(self.per_cluster_step(n), 2) for k, n in by_kind(counts).items()}

        return {
            "clusters": self.clusters,
            "workloads": self.workloads,
            "concurrency": self.concurrency,
            "cache": self.cache,
            "waves": self.waves,
            "wall_s": round(self.wall, 1),
            "ideal_s": round(self.ideal, 1),
            "overhead": round(self.wall / max(self.ideal, 1e-9), 3),
            "succeeded": self.succeeded,
            "blocked": dict(self.blocked),
            "cluster_steps": self.cluster_steps,
            "worker": {
                "cpu_s": round(self.worker_cpu, 1),
                "cpu_s_per_cluster_step": round(self.per_cluster_step(self.worker_cpu), 3),
                "peak_rss_mib": round(self.worker_peak_mib),
                "requests": by_kind(self.worker_requests),
                "requests_per_cluster_step": each_step(self.worker_requests),
                "requests_total_per_cluster_step": round(
                    self.per_cluster_step(sum(self.worker_requests.values())), 2
                ),
                "bytes_read": by_kind(self.worker_received),
                "bytes_read_per_cluster_step": each_step(self.worker_received),
                "bytes_read_total_per_cluster_step": round(
                    self.per_cluster_step(sum(self.worker_received.values()))
                ),
                "start_requests": by_kind(self.worker_start_requests),
                "refused": by_kind(self.worker_refused),
                "start_bytes_read": sum(self.worker_start_received.values()),
                "placement_rounds": self.placement_rounds,
                "placement_phases": {
                    phase: {"rounds": int(n), "s": round(total, 1)}
                    for phase, (n, total) in self.placement_phases.items()
                },
            },
            "apiserver_requests": by_kind(self.requests),
            "apiserver_requests_per_cluster_step": each_step(self.requests),
            "history": {
                "parent_runs": self.parent.runs,
                "parent_events": self.parent.events,
                "parent_bytes": self.parent.bytes,
                "child_events_max": max((c.events for c in self.children.values()), default=0),
            },
            "clusters_own_time_s": _quantiles(self.own_time()),
            "activity_time_per_cluster": {
                name: {"calls": round(calls, 2), "s": round(s, 1)}
                for name, calls, s in self.activity_time()
            },
            "placement_writes": self.placement_writes,
            "replicas_moved": self.replicas_moved,
            "replicas_moved_by_steps": self.replicas_moved_by_steps,
            "replicas_forced": self.replicas_forced,
            "samples": self.samples,
            "plane_rss_mib": round(self.plane_mib),
            "query_failures": self.query_failures,
        }

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
            f"worker ({'watch-fed cache' if self.cache else 'no cache: LISTs'}): "
            f"{self.worker_cpu:.1f} CPU s ({self.per_cluster_step(self.worker_cpu):.2f} per "
            f"cluster-step), peak RSS {self.worker_peak_mib:.0f} MiB; "
            f"local plane RSS {self.plane_mib:.0f} MiB; {self.samples} fleet samples "
            f"(4 LISTs each, included below); progress queries failed: {self.query_failures}",
            "",
            "Where a cluster's time went (its child workflow; an activity from scheduled to "
            "closed, slot queueing and retries included; the waits overlap the CAPI rollout): "
            "beyond its own rollout, each cluster took "
            + ", ".join(f"{k} {v:.0f} s" for k, v in _quantiles(self.own_time()).items()),
            "",
            "| activity | calls per cluster | s per cluster |",
            "|---|---:|---:|",
            *(f"| {name} | {calls:.2f} | {s:.1f} |" for name, calls, s in self.activity_time()),
            "",
            f"Re-placement rounds ({self.placement_rounds} at once on the worker), by phase: "
            + (
                ", ".join(
                    f"{phase} {total:.0f} s over {n:.0f} ({total / max(n, 1):.2f} s each)"
                    for phase, (n, total) in self.placement_phases.items()
                )
                or "none recorded"
            ),
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
        start = sum(self.worker_start_requests.values())
        lines += [
            "",
            f"The worker's own requests ({self.cluster_steps} cluster-steps; its start before "
            f"them, not included: {start} requests, "
            f"{sum(self.worker_start_received.values()) / 1000:,.0f} kB read):",
            "",
            "| verb | resource | requests | per cluster-step | kB read per cluster-step |",
            "|---|---|---:|---:|---:|",
        ]
        for (verb, resource), n in sorted(self.worker_requests.items(), key=lambda kv: -kv[1]):
            read = self.worker_received[(verb, resource)]
            lines.append(
                f"| {verb} | {resource} | {n} | {self.per_cluster_step(n):.2f} | "
                f"{self.per_cluster_step(read) / 1000:,.1f} |"
            )
        lines += [
            f"| all | | {sum(self.worker_requests.values())} | "
            f"{self.per_cluster_step(sum(self.worker_requests.values())):.2f} | "
            f"{self.per_cluster_step(sum(self.worker_received.values())) / 1000:,.1f} |",
            "",
            "Of those, answered 400 or more (a 409 is a write a conflict refused): "
            + (
                ", ".join(
                    f"{v} {r}: {n}"
                    for (v, r), n in sorted(self.worker_refused.items(), key=lambda kv: -kv[1])
                )
                or "none"
            ),
            "",
            "kube-apiserver, every client (CAPI's controllers, the sampler, the worker):",
            "",
            "| verb | resource | requests | per cluster-step | of which the worker's |",
            "|---|---|---:|---:|---:|",
        ]
        for (verb, resource), n in sorted(self.requests.items(), key=lambda kv: -kv[1])[:20]:
            ours = self.worker_requests[(verb, resource)]
            lines.append(
                f"| {verb} | {resource} | {n} | {self.per_cluster_step(n):.1f} | {self.per_cluster_step(ours):.1f} |"
            )
        return "\n".join(lines)


def _quantiles(values: list[float]) -> dict[str, float]:
    """Median, 90th percentile and max of sorted ``values`` (empty: none)."""
    if not values:
        return {}
    return {
        "median": round(values[len(values) // 2], 1),
        "p90": round(values[min(len(values) - 1, len(values) * 9 // 10)], 1),
        "max": round(values[-1], 1),
    }


# ------------------------------------------------------------------------- the run


def _query_timed_out(err: ControlError) -> bool:
    """Whether ``status`` failed because the query got no answer in time (the 2026-12-03 run
    with 1,000 workloads ended on one: "Timeout expired", status CANCELLED)."""
    cause = err.__cause__
    return isinstance(cause, RPCError) and cause.status in (
        RPCStatusCode.CANCELLED,
        RPCStatusCode.DEADLINE_EXCEEDED,
    )


async def planned_waves(
    mgmt: client.ApiClient, namespace: str, concurrency: int
) -> list[tuple[str, ...]]:
    """The waves the calibration will run, planned from the same inventory before it starts
    (progress keeps only counts per stage at scale)."""
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
    cache: bool = True,
    placement_rounds: int = PLACEMENT_ROUNDS_AT_ONCE,
) -> Report:
    """Calibrate the provisioned fleet to TARGET; check the invariants; measure.

    ``cache``: the worker reads the fleet from its watch-fed cache (the product's worker does).
    ``placement_rounds``: the worker's re-placement rounds at once.
    """
    mgmt = api_client(plane_kubeconfig)
    dyn = dynamic(mgmt)
    env = await start_dev_server()
    worker: subprocess.Popen[bytes] | None = None
    scratch = tempfile.TemporaryDirectory(prefix="bench-worker-")
    counts_file = Path(scratch.name) / "requests.json"
    try:
        address = env.client.service_client.config.target_host
        task_queue = f"scale-{uuid.uuid4().hex[:8]}"
        metrics_address = free_address()
        worker = start_bench_worker(
            address,
            worker_kubeconfig,
            task_queue,
            namespace,
            cache=cache,
            counts=counts_file,
            metrics=metrics_address,
            placement_rounds=placement_rounds,
        )
        waves = await planned_waves(mgmt, namespace, concurrency)
        started = await asyncio.to_thread(worker_ready, worker, counts_file)
        worker_before = await asyncio.to_thread(worker_counts, worker, counts_file, started)
        before = apiserver_requests(plane_kubeconfig)
        phases_before = await asyncio.to_thread(placement_phases, metrics_address)
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
        phases_after = await asyncio.to_thread(placement_phases, metrics_address)
        worker_run = (
            await asyncio.to_thread(worker_counts, worker, counts_file, worker_before)
        ) - worker_before
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
            rollouts=rollout,
            query_failures=len(query_failures),
            cache=cache,
            worker_requests=worker_run.requests,
            worker_received=worker_run.received,
            worker_refused=worker_run.refused,
            worker_start_requests=started.requests,
            worker_start_received=started.received,
            placement_rounds=placement_rounds,
            placement_phases={
                phase: (n - phases_before[phase][0], t - phases_before[phase][1])
                for phase, (n, t) in phases_after.items()
            },
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
        scratch.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=7200.0, help="calibration bound (s)")
    parser.add_argument(
        "--workloads", type=int, default=0, help="FleetWorkloads to place (0..100000)"
    )
    parser.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the worker's watch-fed cache of the fleet (default: on, as `calibrator worker`)",
    )
    parser.add_argument(
        "--placement-rounds",
        type=int,
        default=PLACEMENT_ROUNDS_AT_ONCE,
        help=f"the worker's re-placement rounds at once (1..{MAX_PLACEMENT_ROUNDS_AT_ONCE})",
    )
    parser.add_argument(
        "--placed",
        action="store_true",
        help="place and write the whole fleet once before the calibration (a fleet placed before)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if not 1 <= args.placement_rounds <= MAX_PLACEMENT_ROUNDS_AT_ONCE:
        parser.error(f"--placement-rounds must be 1..{MAX_PLACEMENT_ROUNDS_AT_ONCE}")
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
            if args.placed:
                backend = KubeFleetBackend(mgmt, namespace)
                placed = asyncio.run(
                    write_settled(backend, "benchmark: placed before the calibration")
                )
                assert not placed.conflicts, placed.conflicts[:10]
                print(f"placed before: {len(placed.written)} decisions written", flush=True)
            pids = [c.pid for c in plane.status().components if c.pid]
            report = asyncio.run(
                calibrate_fleet(
                    plane_kubeconfig=plane.kubeconfig, worker_kubeconfig=plane.kubeconfig,
                    namespace=namespace, layout=layout, concurrency=args.concurrency,
                    plane_pids=pids, timeout=args.timeout, workloads=args.workloads,
                    cache=args.cache, placement_rounds=args.placement_rounds,
                )
            )  # fmt: skip
            print(report.markdown())
            if args.json is not None:
                figures = {**report.as_json(), "placed_before": args.placed}
                args.json.write_text(json.dumps(figures, indent=2) + "\n")
        finally:
            plane.down(purge=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
