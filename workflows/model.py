"""Every payload of the Temporal layer: workflow, activity, update and query types (no logic).

Why a separate module of frozen dataclasses:

* one dataclass per call (Temporal convention) lets fields be added later without breaking
  running workflows or histories: new fields get defaults, old payloads still decode;
* payloads hold strings, numbers, tuples and domain types (versions as ``v1.33.5`` text through
  ``workflows.payloads``' converter, times as aware datetimes), so the JSON in history is
  readable in the UI; the domain plan (``CalibrationPlan``, ``ClusterPlan``, ``PlanStep``,
  ``Stage``, ``MaintenanceWindow``, ``Finding``) is the payload itself, never copied into
  look-alike classes: the classes here add only what a run knows and planning does not (see
  docs/decisions.md, "One plan model");
* secrets never appear here: clusters are named by ``name`` (+ ``namespace``), and the backend
  finds credentials itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from orchestrator.domain.calibration import CalibrationPlan
from orchestrator.domain.compatibility import Finding
from orchestrator.domain.upgradeplan import ClusterPlan, PlanStep
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import MaintenanceWindow
from orchestrator.kube.backend.port import ClusterRef

Component = Literal["controlPlane", "workers"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


# --------------------------------------------------------------------------------------------
# States (string enums: readable in histories, queries and search attributes)
# --------------------------------------------------------------------------------------------


class Phase(StrEnum):
    """What the whole calibration is doing; also the ``CalibrationPhase`` search attribute."""

    PLANNING = "Planning"
    RUNNING = "Running"
    PAUSED = "Paused"
    AWAITING_APPROVAL = "AwaitingApproval"
    SOAKING = "Soaking"
    HALTED = "Halted"  # failure budget exceeded: nothing new starts until failures are decided
    AWAITING_DECISIONS = "AwaitingDecisions"  # every stage ran; failed clusters wait for decisions
    COMPLETED = "Completed"
    FAILED = "Failed"
    ABORTED = "Aborted"


class ClusterState(StrEnum):
    """Where one cluster is; the child's ``CalibrationPhase`` search attribute uses it too."""

    PENDING = "Pending"
    WAITING_FOR_WINDOW = "WaitingForWindow"
    RUNNING = "Running"
    PAUSED = "Paused"
    WAITING_FOR_DECISION = "WaitingForDecision"
    SUCCEEDED = "Succeeded"
    SKIPPED = "Skipped"
    FAILED = "Failed"
    ABORTED = "Aborted"
    NOT_STARTED = "NotStarted"
    BLOCKED = "Blocked"
    UNASSIGNED = "Unassigned"
    UP_TO_DATE = "UpToDate"


# A cluster in one of these states will not change again in this calibration.
FINAL_CLUSTER_STATES = frozenset(
    {
        ClusterState.SUCCEEDED,
        ClusterState.SKIPPED,
        ClusterState.FAILED,
        ClusterState.ABORTED,
        ClusterState.NOT_STARTED,
        ClusterState.BLOCKED,
        ClusterState.UNASSIGNED,
        ClusterState.UP_TO_DATE,
    }
)
# Final states that count against the failure budget (together with WAITING_FOR_DECISION).
FAILED_CLUSTER_STATES = frozenset({ClusterState.FAILED, ClusterState.WAITING_FOR_DECISION})


class StepState(StrEnum):
    """State of one planned step (or of the preflight / taint / placement bookkeeping)."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SKIPPED = "Skipped"


class StageState(StrEnum):
    """State of one rollout stage (the canary is a stage named ``canary``)."""

    PENDING = "Pending"
    AWAITING_APPROVAL = "AwaitingApproval"
    RUNNING = "Running"
    SOAKING = "Soaking"
    DONE = "Done"
    NOT_STARTED = "NotStarted"


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeouts:
    """Activity timeouts, in seconds. A rollout wait that exceeds ``rollout_seconds`` fails the step.

    ``rollout_seconds`` is a schedule-to-close timeout (all attempts together): a worker crash is
    detected by the heartbeat timeout and the wait resumes on another worker within that budget.
    ``placement_seconds`` bounds one attempt of a re-placement (``replace``), whose cost grows
    with the workloads it writes (a first placement of 1,000 FleetWorkloads writes about 3,000
    objects); it heartbeats per decision written, so a dead worker is still noticed within
    ``heartbeat_seconds``.
    """

    activity_seconds: float = 120.0
    rollout_seconds: float = 3600.0
    heartbeat_seconds: float = 60.0
    poll_seconds: float = 10.0
    placement_seconds: float = 900.0
    # Before a control-plane step that removes an API whose requests were counted: how long the
    # apiservers are watched for new requests (``workflows.activities.usage_gate``).
    observe_window_seconds: float = 30.0


@dataclass(frozen=True)
class CalibrationOptions:
    """Knobs that are not part of the strategy document.

    ``history_threshold``: at a wave boundary the calibration continues as new once its history
    has this many events (or when the server suggests it), carrying its state.
    """

    worker_concurrency: int = 1
    timeouts: Timeouts = Timeouts()
    history_threshold: int = 10_000


# --------------------------------------------------------------------------------------------
# Plan (output of the plan activity: recorded in history, so replays never re-plan)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunStep:
    """A planned step with its place and id in the run (``ClusterRun.run_steps``; no payload).

    ``step_id`` is stable for a calibration (``<calibration>/<cluster>/<index>-<component>-<version>``)
    and travels with every activity of the step, so the backend can recognise a step it applied.
    """

    index: int
    step_id: str
    step: PlanStep

    def describe(self) -> str:
        """``controlPlane -> v1.33.5`` / ``workers md-0,md-1 -> v1.33.5`` (the domain's spelling)."""
        return self.step.describe()


@dataclass(frozen=True)
class ClusterRun:
    """One cluster's domain plan as a calibration runs it: all a ClusterUpgrade child needs.

    ``plan`` is planning's ``ClusterPlan`` as it is (steps with their from-versions, the pools
    and topology the preflight expects, blocks). Beside it only what the cluster's plan cannot
    know: its namespace, the step ids (they hold the calibration id), the window the rollout
    gave it, and the gates before each patch (``usage_gate``): "block" or "warn", the strategy's
    ``observedUsage`` and ``unsatisfiableDisruptionBudgets`` (``Rollout``).
    """

    plan: ClusterPlan
    namespace: str = ""
    step_ids: tuple[str, ...] = ()
    window: MaintenanceWindow | None = None
    on_observed_usage: str = "block"
    on_disruption_blocker: str = "block"

    @property
    def cluster(self) -> ClusterRef:
        """The cluster's address for the backend."""
        return ClusterRef(self.plan.cluster, self.namespace)

    def run_steps(self) -> tuple[RunStep, ...]:
        """The steps in execution order, each with its index and id."""
        return tuple(
            RunStep(i, sid, step)
            for i, (step, sid) in enumerate(zip(self.plan.steps, self.step_ids, strict=True))
        )


@dataclass(frozen=True)
class CalibrationRun:
    """The stored plan: planning's ``CalibrationPlan`` and what only this calibration knows.

    ``calibration_id`` owns the stored plan (it makes the digest unique per calibration, so the
    calibration may delete its plan when it ends without breaking another one's) and is part of
    every step id; ``namespaces`` address the clusters. The findings themselves are not stored
    (``plan.findings`` is empty: at fleet scale they are megabytes, and they are what
    ``calibrator check`` shows); the run acts on them through each cluster's block and through
    placement, and keeps their counts by action (``CalibrationPlan.finding_actions``).
    """

    plan: CalibrationPlan
    calibration_id: str = ""
    namespaces: dict[str, str] = field(default_factory=dict)
    finding_actions: dict[str, int] = field(default_factory=dict)

    def cluster_run(self, cplan: ClusterPlan) -> ClusterRun:
        """One cluster of the plan as its child runs it."""
        rollout = self.plan.rollout
        return ClusterRun(
            plan=cplan,
            namespace=self.namespaces.get(cplan.cluster, ""),
            step_ids=cplan.step_ids(self.calibration_id),
            window=self.plan.window_for(cplan.cluster),
            on_observed_usage=rollout.observed_usage,
            on_disruption_blocker=rollout.unsatisfiable_disruption_budgets,
        )

    def cluster(self, name: str) -> ClusterRun:
        """The run of one cluster (KeyError if unknown)."""
        for cplan in self.plan.clusters:
            if cplan.cluster == name:
                return self.cluster_run(cplan)
        raise KeyError(name)


@dataclass(frozen=True)
class PlanRef:
    """A CalibrationRun stored out of history: SHA-256 of its JSON (content address) and its size.

    The stored document is immutable (a new plan is a new digest), so the digest recorded in
    history pins exactly what a replay or a retried activity reads.
    """

    digest: str
    size: int = 0


@dataclass(frozen=True)
class StageSummary:
    """A stage as the parent runs it: counts instead of cluster lists."""

    name: str
    waves: int
    clusters: int
    max_concurrency: int
    soak_seconds: int
    approval: bool


@dataclass(frozen=True)
class PlanSummary:
    """What the plan activity returns: bounded whatever the fleet's size.

    ``counts``: clusters per initial state (Pending = will run). ``notable``: detail for at most
    ``SAMPLE_LIMIT`` clusters that will not run (blocked first, with reasons; then unassigned and
    up to date); ``unassigned``: at most ``SAMPLE_LIMIT`` names.
    """

    target: str
    plan: PlanRef
    stages: tuple[StageSummary, ...]
    clusters: int
    counts: dict[str, int] = field(default_factory=dict)
    notable: tuple[ClusterProgress, ...] = ()
    unassigned: tuple[str, ...] = ()
    findings: int = 0
    max_failures: int = 0
    finding_actions: dict[str, int] = field(default_factory=dict)
    """Findings by action (block, move, none): at most three entries."""


# At most this many names or details in a summary, a progress result or a checkpoint list.
SAMPLE_LIMIT = 50


# --------------------------------------------------------------------------------------------
# Activity inputs and outputs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScopeRef:
    """A sorted list of cluster names stored out of history (JSON), by SHA-256 and count.

    A continuous calibration may scope a calibration to thousands of clusters; the names go to
    the backend's content-addressed store like the plan, and history keeps only this reference.
    """

    digest: str
    clusters: int = 0


@dataclass(frozen=True)
class PlanInput:
    """Inputs of the pure planner (``orchestrator.planning.plan_calibration``)."""

    calibration_id: str
    target: str
    snapshot: dict[str, Any] | None  # None: the plan activity reads the live inventory
    strategy: dict[str, Any] | None = None
    selector: str | None = None
    namespaces: dict[str, str] = field(default_factory=dict)
    scope: ScopeRef | None = None


@dataclass(frozen=True)
class WaveInput:
    """Read part of one wave of a stored plan: members ``offset`` .. ``offset + limit``."""

    plan: PlanRef
    stage: int
    wave: int
    offset: int = 0
    limit: int = 200


@dataclass(frozen=True)
class WaveMember:
    """What the parent needs to start one cluster (its full plan stays in the store)."""

    name: str
    from_version: str
    steps: tuple[str, ...]  # step descriptions, for the child's static details
    window: MaintenanceWindow | None = None
    step_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class WaveSlice:
    """Members of a wave; ``total`` = the wave's size (read on while offset + len < total)."""

    members: tuple[WaveMember, ...]
    total: int


@dataclass(frozen=True)
class ClusterPlanInput:
    """Read one cluster's plan from a stored plan (the child does, by digest)."""

    plan: PlanRef
    cluster: str


@dataclass(frozen=True)
class LocateInput:
    """Where is ``cluster`` in a stored plan (for an operator's skip of a later cluster)?"""

    plan: PlanRef
    cluster: str


@dataclass(frozen=True)
class ClusterLocation:
    """``found`` False = not part of the calibration; else its stage and wave, or its state."""

    found: bool
    stage: int = -1
    wave: int = -1
    state: str = ""


@dataclass(frozen=True)
class PreflightInput:
    """What the plan expects the cluster to look like before its first step."""

    calibration_id: str
    cluster: ClusterRef
    control_plane_from: str
    pools: tuple[tuple[str, KubeVersion], ...]  # each MachineDeployment and its version
    planned_versions: tuple[str, ...]  # control-plane versions of the plan (resuming is legal)


@dataclass(frozen=True)
class PreflightResult:
    """``problems`` empty = ready; otherwise each line says what is wrong."""

    ok: bool
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class TaintInput:
    """Add (or remove) a cluster taint. ``time_added`` comes from the workflow clock."""

    cluster: ClusterRef
    key: str
    effect: TaintEffect
    value: str = ""
    time_added: str = ""


@dataclass(frozen=True)
class TaintResult:
    """``changed`` = the call modified the cluster (False on an idempotent retry)."""

    changed: bool


@dataclass(frozen=True)
class ReplaceInput:
    """Re-run placement for the fleet and write PlacementDecisions.

    ``upcoming_version``: place as if ``cluster`` already ran this version, so workloads whose
    APIs it removes move off *before* the step; None = place the fleet as it is. ``now`` is
    workflow time (RFC 3339): NoExecute tolerations whose ``tolerationSeconds`` ran out by then
    no longer hold ("" = no clock: they hold).
    """

    calibration_id: str
    cluster: ClusterRef
    reason: str
    step_id: str = ""
    upcoming_version: str | None = None
    now: str = ""


@dataclass(frozen=True)
class ReplaceResult:
    """What placement did.

    ``stranded`` = workloads on the cluster that the upcoming version would break and that
    placement cannot move: the step must not run.
    """

    decisions: int
    moved: tuple[str, ...] = ()
    stranded: tuple[str, ...] = ()
    unschedulable: tuple[str, ...] = ()
    affected: int = 0  # workloads re-placed (hosted on the cluster or able to go there)
    written: int = 0  # decisions that changed and were written
    conflicts: int = 0  # compare-and-swap losses that were re-read and recomputed
    # Replicas the written decisions relocated from one cluster to another (``Moved.replicas``
    # summed; scaling is not moving). Stable placement keeps it to what the step forced.
    replicas_moved: int = 0
    # Replicas the written decisions removed from clusters they reject (the workload can no
    # longer run there: NoExecute, an API the version removes, capacity): the minimum any
    # placement had to take away (issue 15). Removed, not necessarily moved: a Duplicated copy
    # or a workload that now fits on fewer clusters drops them.
    replicas_forced: int = 0


@dataclass(frozen=True)
class PatchControlPlaneInput:
    """Move the control plane from ``from_version`` to ``to_version`` (idempotent by versions)."""

    step_id: str
    cluster: ClusterRef
    from_version: str
    to_version: str
    # The gate before the patch (``usage_gate.control_plane_gate``); histories recorded before
    # it existed decode with a 0-second window and the blocking mode.
    observe_window_seconds: float = 0.0
    on_observed_usage: str = "block"


@dataclass(frozen=True)
class PatchWorkersInput:
    """Move ``pools`` (each with its expected from-version) to ``to_version``."""

    step_id: str
    cluster: ClusterRef
    to_version: str
    pools: tuple[tuple[str, KubeVersion], ...]  # each pool and its version before the step
    on_disruption_blocker: str = "block"  # the gate before the patch (``usage_gate.drain_gate``)


@dataclass(frozen=True)
class PatchResult:
    """``applied`` lists what this call changed; ``already`` what was at the version already."""

    applied: tuple[str, ...] = ()
    already: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()  # what the gate before the patch found in warn mode


@dataclass(frozen=True)
class WaitControlPlaneInput:
    """Wait until the control plane rolled out ``version`` (heartbeating)."""

    step_id: str
    cluster: ClusterRef
    version: str
    poll_seconds: float = 10.0


@dataclass(frozen=True)
class WaitWorkersInput:
    """Wait until ``pools`` rolled out ``version`` (heartbeating)."""

    step_id: str
    cluster: ClusterRef
    version: str
    pools: tuple[str, ...]
    poll_seconds: float = 10.0


@dataclass(frozen=True)
class WaitProgress:
    """Heartbeat details of a wait: how many polls, and the last thing CAPI said."""

    polls: int
    message: str = ""


@dataclass(frozen=True)
class PlacementProgress:
    """Heartbeat details of a re-placement: decisions handled of those to write, and a line."""

    done: int
    total: int
    message: str = ""


@dataclass(frozen=True)
class WaitResult:
    """A finished wait."""

    polls: int
    message: str = ""


@dataclass(frozen=True)
class VerifyInput:
    """Check the cluster really runs ``version``: API server /version, or the pools' kubelets."""

    step_id: str
    cluster: ClusterRef
    component: Component
    version: str
    pools: tuple[str, ...] = ()


@dataclass(frozen=True)
class DropBlobInput:
    """A stored plan or scope its owner no longer needs (``drop_blob``)."""

    digest: str


@dataclass(frozen=True)
class VerifyResult:
    """``ok`` or the mismatches found."""

    ok: bool
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class CheckInput:
    """Compatibility check of the workloads still on ``cluster`` at ``version``."""

    step_id: str
    cluster: ClusterRef
    version: str


@dataclass(frozen=True)
class CheckResult:
    """Findings (empty = compatible); ``observed``: what the cluster itself was seen using.

    ``observed`` lines never fail the step (the API is already gone at this version: what they
    name is already broken, and the gate before the patch was the place to stop); they keep the
    record on the Cluster current and tell the operator.
    """

    findings: tuple[Finding, ...] = ()  # declared: a workload on the cluster that uses a gone API
    observed: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# Progress (query result, child reports, continue-as-new state)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepProgress:
    """One planned step as it runs. ``activity`` = the part running now (patch, wait, ...)."""

    index: int
    step_id: str
    description: str
    state: StepState = StepState.PENDING
    activity: str = ""
    attempts: int = 0
    started_at: datetime | None = None
    finished_at: datetime | None = None
    message: str = ""
    replicas_moved: int = 0  # by the placement after this step
    replicas_forced: int = 0  # of those the placement after this step had to remove


@dataclass(frozen=True)
class ClusterProgress:
    """One cluster of the calibration.

    ``tainted`` is what the workflow knows it wrote; ``touched`` turns true at the first patch and
    means the cluster may be mid-upgrade (so it is never untainted by skip or abort).
    """

    name: str
    stage: str = ""
    state: ClusterState = ClusterState.PENDING
    from_version: str = ""
    target: str = ""
    tainted: bool = False
    touched: bool = False
    window: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    message: str = ""
    steps: tuple[StepProgress, ...] = ()
    reasons: tuple[str, ...] = ()
    # Every placement this cluster's upgrade ran (before, after each step, after the upgrade).
    replicas_moved: int = 0
    replicas_forced: int = 0  # see ``ReplaceResult.replicas_forced``


@dataclass(frozen=True)
class StageProgress:
    """One stage of the rollout."""

    name: str
    waves: tuple[tuple[str, ...], ...]  # empty since plans are stored: see wave_count
    max_concurrency: int
    soak_seconds: int
    approval: bool
    state: StageState = StageState.PENDING
    approved: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    soak_until: datetime | None = None
    wave_count: int = 0
    clusters: int = 0


@dataclass(frozen=True)
class CalibrationProgress:
    """The ``progress`` query and the workflow result: the whole run at a glance."""

    calibration_id: str
    target: str
    phase: Phase
    message: str = ""
    started_at: datetime | None = None
    updated_at: datetime | None = None
    paused: bool = False
    abort_reason: str = ""
    runs: int = 1
    failures: int = 0
    max_failures: int = 0
    stage_index: int = 0
    wave_index: int = 0
    stages: tuple[StageProgress, ...] = ()
    clusters: tuple[ClusterProgress, ...] = ()
    unassigned: tuple[str, ...] = ()
    # Every cluster of the plan by state; ``clusters`` holds detail only for the clusters in
    # flight, the failed ones and the last finished ones (see docs/decisions.md).
    counts: dict[str, int] = field(default_factory=dict)
    total_clusters: int = 0
    # Replicas the whole run's placements moved (every cluster, also those no longer in detail),
    # and those they had to remove from clusters that rejected them (the minimum: issue 15).
    replicas_moved: int = 0
    replicas_forced: int = 0

    def cluster(self, name: str) -> ClusterProgress:
        """Progress of one cluster (KeyError if unknown)."""
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)


# --------------------------------------------------------------------------------------------
# Workflow inputs, messages and results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CalibrationCheckpoint:
    """State carried across continue-as-new: the plan is never recomputed.

    ``summary`` names the stored plan by digest; ``progress`` carries the counts and the bounded
    detail; ``skip_ahead`` = clusters of later waves the operator skipped (name, reason).
    """

    progress: CalibrationProgress
    approved: tuple[str, ...] = ()
    pause_reason: str = ""
    summary: PlanSummary | None = None
    skip_ahead: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CalibrationInput:
    """Start a calibration to ``target``.

    ``snapshot`` (FleetSnapshot file form) skips the inventory activity, e.g. for offline plans
    and tests; ``strategy`` is a CalibrationStrategy document (None = the default strategy);
    ``selector`` narrows the fleet (kubectl syntax).
    """

    target: str
    snapshot: dict[str, Any] | None = None
    strategy: dict[str, Any] | None = None
    selector: str | None = None
    options: CalibrationOptions = CalibrationOptions()
    checkpoint: CalibrationCheckpoint | None = None
    # Only these clusters (a stored name list, see ScopeRef), on top of ``selector``; a
    # continuous calibration starts its calibrations with the clusters that broke the policy.
    scope: ScopeRef | None = None


@dataclass(frozen=True)
class ClusterUpgradeInput:
    """Input of one ClusterUpgrade child."""

    calibration_id: str
    target: str
    stage: str
    plan: ClusterRun | None = None  # given directly, or read from ``plan_ref``
    options: CalibrationOptions = CalibrationOptions()
    plan_ref: PlanRef | None = None
    cluster: str = ""  # the cluster to read from ``plan_ref``


@dataclass(frozen=True)
class ClusterReport:
    """Child -> parent signal: the child's whole progress after each transition."""

    progress: ClusterProgress


ClusterAction = Literal["pause", "resume", "abort", "retry", "skip"]
DecisionAction = Literal["retry", "skip", "abort"]


@dataclass(frozen=True)
class ClusterCommand:
    """Parent -> child signal: operator control forwarded to a running cluster."""

    action: ClusterAction
    reason: str = ""


@dataclass(frozen=True)
class Decision:
    """The operator's answer to a failed step: retry it, skip the cluster, or abort the cluster."""

    action: DecisionAction
    reason: str = ""


@dataclass(frozen=True)
class PauseRequest:
    """Stop starting clusters and steps (running steps finish)."""

    reason: str = ""


@dataclass(frozen=True)
class ResumeRequest:
    """Undo a pause."""

    reason: str = ""


@dataclass(frozen=True)
class ApproveRequest:
    """Open the approval gate of ``stage`` (before or while it waits)."""

    stage: str
    reason: str = ""


@dataclass(frozen=True)
class SkipRequest:
    """Leave ``cluster`` out: before it starts, or while it waits for a decision."""

    cluster: str
    reason: str = ""


@dataclass(frozen=True)
class RetryRequest:
    """Retry the failed step of ``cluster``."""

    cluster: str
    reason: str = ""


@dataclass(frozen=True)
class AbortRequest:
    """Stop the run: nothing new starts, running clusters stop at their next step boundary."""

    reason: str = ""


@dataclass(frozen=True)
class Ack:
    """Answer to an update: the phase (or cluster state) after it and a line for the operator."""

    state: str
    message: str


# --------------------------------------------------------------------------------------------
# Continuous calibration (a Temporal Schedule runs ContinuousCalibration on every tick)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContinuousInput:
    """What a schedule starts with: the CalibrationPolicy document and the calibration options."""

    policy: dict[str, Any]
    options: CalibrationOptions = CalibrationOptions()


@dataclass(frozen=True)
class EvaluateInput:
    """Evaluate the policy on the live fleet at ``now`` (the workflow's clock)."""

    policy: dict[str, Any]
    now: datetime


@dataclass(frozen=True)
class ViolationInfo:
    """One violating cluster, for people: its state, goal, broken rules and the first reason.

    Not a copy of the domain's ``ClusterVerdict``: a line rendered from it (``state()``, the
    rules' messages joined with why it is unfixable or busy), bounded to ``SAMPLE_LIMIT`` per
    report. Its fields are what ``calibrator schedule describe`` shows of the last result, in
    its table and its JSON, and what recorded ContinuousCalibration histories hold.
    """

    cluster: str
    state: str  # due | deferred | busy | unfixable
    goal: str = ""
    rules: tuple[str, ...] = ()
    message: str = ""
    opens_at: datetime | None = None


@dataclass(frozen=True)
class CalibrationGroup:
    """Due clusters that share a goal: one calibration to ``target`` scoped to them."""

    target: str
    scope: ScopeRef
    sample: tuple[str, ...] = ()


@dataclass(frozen=True)
class PolicyReport:
    """A bounded verdict on the fleet: counts, the calibrations to start, a sample of violators."""

    policy: str
    newest: str
    checked: int
    violating: int
    counts: dict[str, int] = field(default_factory=dict)
    groups: tuple[CalibrationGroup, ...] = ()
    sample: tuple[ViolationInfo, ...] = ()
    next_opening: datetime | None = None
    skipped: int = 0  # clusters the inventory could not read (malformed CAPI objects)


@dataclass(frozen=True)
class StartedCalibration:
    """A calibration a continuous run started, and how it ended (or its phase when it stopped)."""

    calibration_id: str
    target: str
    clusters: int
    phase: str = ""
    message: str = ""


@dataclass(frozen=True)
class ContinuousResult:
    """Result (and live query) of one ContinuousCalibration run."""

    message: str
    report: PolicyReport | None = None
    calibrations: tuple[StartedCalibration, ...] = ()
