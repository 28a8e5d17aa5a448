"""``FleetCalibration``'s run record: the state its ``progress`` query reports, and how it changes.

Operator control (``fleet_control``), wave scheduling (``fleet_waves``) and the main loop
(``fleet_calibration``) all read and change the same state; this module owns it, so each of them
takes the record explicitly instead of reaching into the workflow class. It is also the one place
where a change is *recorded*: per-state counts kept in step with the clusters' detail, the phase
search attribute, the UI's current details and the fleet metrics. The failure model's rules
themselves stay pure in ``workflows.runstate``; the record only passes its state to them.

Deterministic: the workflow clock and SDK calls only, inside the workflow that owns the record.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # Domain types that are payloads themselves (a window is a ``MaintenanceWindow`` with its
    # ``LabelSelector``): the SDK resolves their field types through the sandbox's ``sys.modules``
    # when it decodes them, and only a module imported here by its own name is there.
    from orchestrator.domain.selectors import LabelSelector, Requirement  # noqa: F401
    from orchestrator.domain.waves import MaintenanceWindow  # noqa: F401
    from workflows import metrics, runstate, search_attributes
    from workflows.model import (
        FINAL_CLUSTER_STATES,
        CalibrationInput,
        CalibrationProgress,
        ClusterProgress,
        ClusterReport,
        ClusterState,
        Phase,
        PlanSummary,
        StageProgress,
        WaveMember,
    )


def skipped_message(reason: str) -> str:
    """The message of a cluster skipped before it started."""
    return f"skipped before it started: {reason}".rstrip(": ")


class FleetRun:
    """What one ``FleetCalibration`` run holds, its derived state, and its recorded changes."""

    def __init__(self, input: CalibrationInput) -> None:
        self.input = input
        info = workflow.info()
        checkpoint = input.checkpoint
        self.plan: PlanSummary | None = None
        self.approved: set[str] = set()
        self.pause_reason = ""
        # Detail of the clusters in flight, the failed ones and the last finished ones; every
        # cluster of the plan is in ``counts`` by state (bounded payloads: docs/decisions.md).
        self.clusters: dict[str, ClusterProgress] = {}
        self.counts: dict[str, int] = {}
        self.members: dict[str, WaveMember] = {}  # loaded, not yet started
        self.skip_ahead: dict[str, str] = {}  # clusters of later waves skipped: reason
        self.stages: list[StageProgress] = []
        if checkpoint is not None:
            self.plan = checkpoint.summary
            self.approved = set(checkpoint.approved)
            self.pause_reason = checkpoint.pause_reason
            self.clusters = {c.name: c for c in checkpoint.progress.clusters}
            self.counts = dict(checkpoint.progress.counts)
            self.skip_ahead = dict(checkpoint.skip_ahead)
            self.stages = list(checkpoint.progress.stages)
            self.progress = replace(checkpoint.progress, runs=checkpoint.progress.runs + 1)
        else:
            self.progress = CalibrationProgress(
                calibration_id=info.workflow_id,
                target=input.target,
                phase=Phase.PLANNING,
                started_at=workflow.now(),
            )
        self.activity_phase = Phase.RUNNING
        self.final_phase: Phase | None = None
        # The phase the search attribute already holds (set at start, kept by continue-as-new).
        current = info.typed_search_attributes.get(search_attributes.CALIBRATION_PHASE)
        self.phase_attr: Phase | None = Phase(current) if current in set(Phase) else None
        self.tasks: dict[str, asyncio.Task[None]] = {}
        # Children of this run whose close (ChildWorkflowExecutionCompleted) has not arrived yet.
        self.open_children: set[str] = set()
        self.metrics: metrics.FleetMetrics | None = None
        self.counts_at_start = dict(self.counts)  # counted by the run that reached them

    # ------------------------------------------------------------------ derived state

    @property
    def paused(self) -> bool:
        """An operator paused the run."""
        return self.progress.paused

    @property
    def aborted(self) -> bool:
        """An operator aborted the run."""
        return bool(self.progress.abort_reason)

    def failures(self) -> int:
        """Clusters that count against the failure budget."""
        return runstate.failures(self.counts)

    def max_failures(self) -> int:
        """The plan's failure budget (0 before there is a plan)."""
        return 0 if self.plan is None else self.plan.max_failures

    def over_budget(self) -> bool:
        """More failures than the budget allows."""
        return runstate.over_budget(self.counts, self.max_failures())

    def started(self, name: str) -> bool:
        """Whether ``name``'s child workflow was started."""
        return runstate.started(self.clusters, name)

    def active(self) -> list[str]:
        """Clusters whose child runs."""
        return runstate.active(self.clusters)

    def stepping(self) -> bool:
        """A child is doing work, not just waiting for a decision."""
        return runstate.stepping(self.clusters)

    def must_stop(self) -> bool:
        """Aborted, or halted for good."""
        return self.aborted or runstate.dead_halt(self.clusters, self.counts, self.max_failures())

    def may_start(self) -> bool:
        """Whether a new cluster may start now."""
        return runstate.may_start(
            paused=self.paused, aborted=self.aborted, over_budget=self.over_budget()
        )

    def settled(self, name: str) -> bool:
        """A wave need not wait for this cluster any more."""
        return runstate.settled(self.clusters[name].state)

    def phase(self) -> Phase:
        """The phase the run reports now."""
        return runstate.phase(
            final=self.final_phase,
            planned=self.plan is not None,
            aborted=self.aborted,
            over_budget=self.over_budget(),
            paused=self.paused,
            activity=self.activity_phase,
        )

    def child_id(self, name: str) -> str:
        """The workflow id of ``name``'s ``ClusterUpgrade`` child."""
        return f"{workflow.info().workflow_id}/{name}"

    # ------------------------------------------------------------------ changes

    def init_progress(self, plan: PlanSummary) -> None:
        """Counts, notable clusters and stages of a fresh plan."""
        self.counts = dict(plan.counts)
        for cluster in plan.notable:
            self.clusters[cluster.name] = cluster
        self.stages = [
            StageProgress(
                name=s.name,
                waves=(),
                max_concurrency=s.max_concurrency,
                soak_seconds=s.soak_seconds,
                approval=s.approval,
                wave_count=s.waves,
                clusters=s.clusters,
            )
            for s in plan.stages
        ]
        self.progress = replace(
            self.progress,
            max_failures=plan.max_failures,
            unassigned=plan.unassigned,
            total_clusters=plan.clusters,
        )

    def take_report(self, report: ClusterReport) -> None:
        """A child's progress after one of its transitions (ignored once the cluster is final)."""
        incoming = report.progress
        current = self.clusters.get(incoming.name)
        if current is None or current.state in FINAL_CLUSTER_STATES:
            return
        self.put(
            replace(
                incoming, stage=current.stage, window=current.window, started_at=current.started_at
            )
        )
        self.touch()

    def set_cluster(self, name: str, **changes: Any) -> None:
        """Change a cluster's detail and record the change."""
        self.put(replace(self.clusters[name], **changes))
        self.touch()

    def count(self, state: ClusterState, delta: int) -> None:
        """Move the per-state count of ``state`` by ``delta``."""
        value = self.counts.get(state.value, 0) + delta
        if value:
            self.counts[state.value] = value
        else:
            self.counts.pop(state.value, None)

    def put(self, progress: ClusterProgress) -> None:
        """Store a cluster's detail and keep the per-state counts in step with it."""
        old = self.clusters.get(progress.name)
        if old is not None and old.state != progress.state:
            self.count(old.state, -1)
            self.count(progress.state, 1)
        # A cluster's count only grows: what it adds is what the run moved meanwhile.
        moved = progress.replicas_moved - (old.replicas_moved if old is not None else 0)
        forced = progress.replicas_forced - (old.replicas_forced if old is not None else 0)
        if moved > 0 or forced > 0:
            self.progress = replace(
                self.progress,
                replicas_moved=self.progress.replicas_moved + max(moved, 0),
                replicas_forced=self.progress.replicas_forced + max(forced, 0),
            )
        self.clusters[progress.name] = progress

    def set_stage(self, index: int, **changes: Any) -> None:
        """Change a stage's progress."""
        self.stages[index] = replace(self.stages[index], **changes)

    def snapshot(self) -> CalibrationProgress:
        """The progress the query reports and continue-as-new carries."""
        return replace(
            self.progress,
            phase=self.phase(),
            paused=self.paused,
            failures=self.failures(),
            stages=tuple(self.stages),
            clusters=tuple(self.clusters.values()),
            counts=dict(sorted(self.counts.items())),
        )

    def meter(self) -> metrics.FleetMetrics:
        """The run's fleet metrics (made on first use, silent while replaying)."""
        if self.metrics is None:
            self.metrics = metrics.FleetMetrics(
                workflow.metric_meter(),
                lambda: not workflow.unsafe.is_replaying(),
                self.counts_at_start,
            )
        return self.metrics

    def touch(self, message: str | None = None) -> None:
        """Record a change: timestamp, phase attribute, UI details, clusters entering phases."""
        changes: dict[str, Any] = {"updated_at": workflow.now()}
        if message is not None:
            changes["message"] = message
        self.progress = replace(self.progress, **changes)
        phase = self.phase()
        if phase != self.phase_attr:
            self.phase_attr = phase
            workflow.upsert_search_attributes(
                [search_attributes.CALIBRATION_PHASE.value_set(phase.value)]
            )
        workflow.set_current_details(self.details(phase))
        self.meter().clusters(self.counts)

    def details(self, phase: Phase) -> str:
        """The UI's current details: phase, stage and wave, counts, decisions, budget."""
        counts = self.counts
        stage = ""
        if self.plan is not None and self.progress.stage_index < len(self.plan.stages):
            s = self.plan.stages[self.progress.stage_index]
            stage = (
                f" · stage {s.name} ({self.progress.stage_index + 1}/{len(self.plan.stages)}), "
                f"wave {min(self.progress.wave_index + 1, s.waves)}/{s.waves}"
            )
        lines = [f"**{phase.value}** → {self.progress.target}{stage}"]
        if self.progress.message:
            lines.append(self.progress.message)
        if counts:
            lines.append(" · ".join(f"{v} {k}" for k, v in sorted(counts.items())))
        if self.progress.replicas_moved or self.progress.replicas_forced:
            lines.append(
                f"replicas moved by placement: {self.progress.replicas_moved} "
                f"(forced off rejecting clusters: {self.progress.replicas_forced})"
            )
        lines += [
            f"- {c.name}: {c.message}"
            for c in self.clusters.values()
            if c.state == ClusterState.WAITING_FOR_DECISION
        ]
        if self.progress.failures or self.failures():
            lines.append(f"failures {self.failures()} / budget {self.max_failures()}")
        return "\n".join(lines)
