"""The calibration activities: one dataclass in, one out, all I/O behind ``FleetBackend``.

Activities are methods of ``CalibrationActivities`` so a worker binds them to one backend (the
kube adapter in production, an in-memory fleet in the workflow tests); workflows call them by
method reference, which pins the activity names below.

Rules every activity keeps, because the workflow's guarantees rest on them:

* **Idempotent.** A patch carries the step id and the expected "from" version: a target already
  declared is reported as ``already`` and not written again, so a retried activity (lost response,
  worker crash) never applies a step twice; any third version is a ``VersionConflict`` (someone
  else changed the cluster) and fails without retry.
* **Waits heartbeat** on every poll with a ``WaitProgress``; a dead worker is noticed by the
  heartbeat timeout and the wait resumes elsewhere, within the step's schedule-to-close budget.
* **Invalid input is non-retryable** (``InvalidInput``, ``NotFound``): retrying cannot fix it and
  the workflow must fail before touching anything.
* Pure decisions (planning, placement, compatibility) run here, not in the backend, so the plan
  and every placement are recorded in history and identical for every backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from temporalio import activity
from temporalio.exceptions import ApplicationError

from orchestrator.domain.compatibility import cluster_findings
from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import parse_selector_string
from orchestrator.domain.snapshot import (
    FleetSnapshot,
    replace_cluster,
    snapshot_from_mapping,
    snapshot_to_mapping,
)
from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Taint, parse_time
from orchestrator.domain.versions import KubeVersion, VersionError
from orchestrator.domain.waves import DEFAULT_STRATEGY, Strategy, strategy_from_mapping
from orchestrator.placement import place
from orchestrator.planning import CalibrationPlan, at_version, plan_calibration
from workflows.backend import FleetBackend, NotFoundError
from workflows.model import (
    CheckInput,
    CheckResult,
    ClusterObservation,
    ClusterRef,
    ClusterReplicasInfo,
    ClusterUpgradePlan,
    ComponentObservation,
    FindingInfo,
    FindingPlan,
    FleetPlan,
    GroupPlan,
    InventoryInput,
    InventoryResult,
    PatchControlPlaneInput,
    PatchResult,
    PatchWorkersInput,
    PlacementDecisionInfo,
    PlanInput,
    PoolVersion,
    PreflightInput,
    PreflightResult,
    ReplaceInput,
    ReplaceResult,
    StagePlan,
    StepPlan,
    TaintInput,
    TaintResult,
    VerifyInput,
    VerifyResult,
    WaitControlPlaneInput,
    WaitProgress,
    WaitResult,
    WaitWorkersInput,
    WindowPlan,
)

# ApplicationError types the workflows and operators see.
INVALID_INPUT = "InvalidInput"
NOT_FOUND = "NotFound"
VERSION_CONFLICT = "VersionConflict"
ROLLOUT_FAILED = "RolloutFailed"

NON_RETRYABLE_ERRORS = (INVALID_INPUT, NOT_FOUND, VERSION_CONFLICT, ROLLOUT_FAILED)


def step_id(calibration_id: str, cluster: str, index: int, component: str, version: str) -> str:
    """Stable id of a planned step: the same plan gives the same ids on every retry and replay."""
    return f"{calibration_id}/{cluster}/{index:02d}-{component}-{version}"


def _invalid(message: str) -> NoReturn:
    raise ApplicationError(message, type=INVALID_INPUT, non_retryable=True)


def _same_version(a: str, b: str) -> bool:
    """Equal as Kubernetes versions (``1.33.5`` == ``v1.33.5``); text equality if unparseable."""
    try:
        return KubeVersion.parse(a) == KubeVersion.parse(b)
    except VersionError:
        return a == b


def _version_in(version: str, versions: Sequence[str]) -> bool:
    return any(_same_version(version, v) for v in versions)


# --------------------------------------------------------------------------------------------
# Plan conversion (pure; public so tests and the CLI can preview exactly what the workflow runs)
# --------------------------------------------------------------------------------------------


def load_strategy_document(document: dict[str, Any] | None) -> Strategy:
    """The strategy a calibration uses (InputError for a bad document)."""
    return DEFAULT_STRATEGY if document is None else strategy_from_mapping(document)


def fleet_plan(
    plan: CalibrationPlan,
    snapshot: FleetSnapshot,
    strategy: Strategy,
    calibration_id: str,
    namespaces: dict[str, str] | None = None,
) -> FleetPlan:
    """Convert the pure planner's result into the payload the workflows run.

    A plain serialisation: it adds only what execution needs and planning cannot know (step ids,
    namespaces) and decides nothing. Steps carry the from-versions the domain planned (per pool
    for worker steps: the idempotency key of a patch); stages and their approval gates are copied
    as the domain rollout decided them -- deriving a gate here once made the run enforce a gate the
    preview did not show. ``strategy`` is not consulted (the plan already applied it: gates,
    windows, failure budget); the parameter stays so existing call sites keep their shape.
    """
    del strategy
    namespaces = namespaces or {}
    clusters: list[ClusterUpgradePlan] = []
    for cplan in plan.clusters:
        cluster = snapshot.cluster(cplan.cluster)
        steps = tuple(
            StepPlan(
                index,
                step_id(calibration_id, cplan.cluster, index, step.component, str(step.version)),
                step.component,
                str(step.version),
                str(step.from_version),
                tuple(PoolVersion(name, str(v)) for name, v in step.pools_from),
            )
            for index, step in enumerate(cplan.steps)
        )
        window = plan.rollout.windows.get(cplan.cluster)
        clusters.append(
            ClusterUpgradePlan(
                cluster=ClusterRef(cplan.cluster, namespaces.get(cplan.cluster, "")),
                control_plane_from=str(cplan.control_plane_from),
                workers_from=None if cplan.workers_from is None else str(cplan.workers_from),
                pools=tuple(
                    PoolVersion(md.name, str(md.version)) for md in cluster.machine_deployments
                ),
                steps=steps,
                topology=cluster.topology,
                blocked=cplan.blocked,
                reasons=cplan.reasons,
                window=None
                if window is None
                else WindowPlan(
                    window.days, window.start_minute, window.duration_seconds, window.describe()
                ),
            )
        )
    stages = [
        StagePlan(
            name=stage.name,
            groups=tuple(GroupPlan(g.name, g.waves) for g in stage.groups),
            waves=stage.waves(),
            max_concurrency=stage.max_concurrency,
            soak_seconds=stage.soak_seconds,
            approval=stage.approval,
        )
        for stage in plan.rollout.stages
    ]
    findings = tuple(
        FindingPlan(
            cluster=v.finding.cluster,
            workload=v.finding.workload,
            api=v.finding.api,
            removed_in=v.finding.removed_in,
            version=str(v.finding.version),
            action=v.action,
            destination=v.destination,
        )
        for v in plan.findings
    )
    return FleetPlan(
        target=str(plan.target),
        clusters=tuple(clusters),
        stages=tuple(stages),
        unassigned=plan.rollout.unassigned,
        findings=findings,
        max_failures=plan.rollout.max_failures,
    )


def plan_from_input(input: PlanInput) -> FleetPlan:
    """Validate the inputs and plan (InputError on anything unusable)."""
    target = KubeVersion.parse(input.target)
    snapshot = snapshot_from_mapping(input.snapshot)
    strategy = load_strategy_document(input.strategy)
    selector = parse_selector_string(input.selector) if input.selector else None
    plan = plan_calibration(snapshot, target, strategy, selector)
    return fleet_plan(plan, snapshot, strategy, input.calibration_id, input.namespaces)


# --------------------------------------------------------------------------------------------
# Observation helpers
# --------------------------------------------------------------------------------------------


def _component_done(obs: ComponentObservation, version: str, what: str) -> tuple[bool, str]:
    """(done, message) for a wait; raises on a version conflict or a terminal failure."""
    if not _same_version(obs.version, version):
        raise ApplicationError(
            f"{what} now declares {obs.version}, expected {version}: changed by someone else",
            type=VERSION_CONFLICT,
            non_retryable=True,
        )
    if obs.failure:
        raise ApplicationError(
            f"{what} rollout to {version} failed: {obs.failure}",
            type=ROLLOUT_FAILED,
            non_retryable=True,
        )
    if obs.rolled_out:
        return True, f"{what} rolled out {version}"
    return False, f"{what} rolling out {version}: {obs.message or 'in progress'}"


class CalibrationActivities:
    """Activity implementations bound to one ``FleetBackend``."""

    def __init__(self, backend: FleetBackend) -> None:
        self._backend = backend

    def all(self) -> list[Callable[..., Any]]:
        """Every activity, for ``Worker(activities=...)``."""
        return [
            self.inventory,
            self.plan,
            self.preflight,
            self.add_taint,
            self.remove_taint,
            self.replace,
            self.patch_control_plane,
            self.wait_control_plane,
            self.patch_workers,
            self.wait_workers,
            self.verify,
            self.check_compat,
        ]

    async def _observe(self, cluster: ClusterRef) -> ClusterObservation:
        try:
            return await self._backend.observe(cluster)
        except NotFoundError as err:
            raise ApplicationError(str(err), type=NOT_FOUND, non_retryable=True) from err

    # ---------------------------------------------------------------- inventory and plan

    @activity.defn(name="inventory")
    async def inventory(self, input: InventoryInput) -> InventoryResult:
        """Read the fleet with LIST calls; the result is recorded in history like any payload."""
        try:
            inv = await self._backend.inventory(input.clusters)
        except NotFoundError as err:
            raise ApplicationError(str(err), type=NOT_FOUND, non_retryable=True) from err
        for name, reason in sorted(inv.skipped.items()):
            activity.logger.warning("cluster %s skipped: %s", name, reason)
        return InventoryResult(
            snapshot_to_mapping(inv.snapshot), dict(inv.namespaces), dict(inv.skipped)
        )

    @activity.defn(name="plan")
    async def plan(self, input: PlanInput) -> FleetPlan:
        """Run the pure planner; its result in history makes replays and retries plan-stable."""
        try:
            return plan_from_input(input)
        except InputError as err:
            _invalid(str(err))

    # ---------------------------------------------------------------- preflight and taints

    @activity.defn(name="preflight")
    async def preflight(self, input: PreflightInput) -> PreflightResult:
        """Is the cluster where the plan expects it, quiet, reachable, and not upgraded by another run?

        Versions already on the plan's path are accepted, so a cluster whose calibration resumes
        after a failure passes again.
        """
        obs = await self._observe(input.cluster)
        problems: list[str] = []
        if not obs.reachable:
            problems.append("the workload cluster's API server is not reachable")
        allowed = (input.control_plane_from, *input.planned_versions)
        cp = obs.control_plane
        if not _version_in(cp.version, allowed):
            problems.append(
                f"control plane declares {cp.version}; the plan expects {input.control_plane_from}"
            )
        elif not cp.rolled_out:
            problems.append(
                f"control plane is still rolling out {cp.version}: {cp.message or 'in progress'}"
            )
        for expected in input.pools:
            pool = obs.pool(expected.name)
            if pool is None:
                problems.append(f"MachineDeployment {expected.name} not found")
            elif not _version_in(pool.version, (expected.version, *input.planned_versions)):
                problems.append(
                    f"MachineDeployment {expected.name} declares {pool.version}; "
                    f"the plan expects {expected.version}"
                )
            elif not pool.rolled_out:
                problems.append(f"MachineDeployment {expected.name} is still rolling out")
        for taint in obs.taints:
            if taint.key == UPGRADING_TAINT_KEY and taint.value not in ("", input.calibration_id):
                problems.append(f"cluster is being upgraded by calibration {taint.value}")
        return PreflightResult(not problems, tuple(problems))

    @activity.defn(name="add_taint")
    async def add_taint(self, input: TaintInput) -> TaintResult:
        """Add the upgrading taint; a retry keeps the first ``timeAdded`` (no change reported)."""
        if not input.key:
            _invalid("a taint needs a key")
        taint = Taint(input.key, input.effect, input.value, input.time_added or None)
        try:
            changed = await self._backend.add_taint(input.cluster, taint)
        except NotFoundError as err:
            raise ApplicationError(str(err), type=NOT_FOUND, non_retryable=True) from err
        return TaintResult(changed)

    @activity.defn(name="remove_taint")
    async def remove_taint(self, input: TaintInput) -> TaintResult:
        """Remove the taint (idempotent: removing an absent taint changes nothing)."""
        try:
            changed = await self._backend.remove_taint(input.cluster, input.key, input.effect)
        except NotFoundError as err:
            raise ApplicationError(str(err), type=NOT_FOUND, non_retryable=True) from err
        return TaintResult(changed)

    # ---------------------------------------------------------------- placement

    @activity.defn(name="replace")
    async def replace(self, input: ReplaceInput) -> ReplaceResult:
        """Re-run placement on a fresh inventory and write the decisions.

        With ``upcoming_version`` the cluster is placed as if it ran that version, so workloads
        it would break move away before the patch. Unschedulable workloads keep their current
        decision (writing an empty one would evict them everywhere). ``stranded`` names those
        that run on the cluster and were rejected there; before a step that means the step would
        break them, so nothing is written and the workflow must not run the step.
        """
        inv = await self._backend.inventory()
        snapshot = inv.snapshot
        name = input.cluster.name
        try:
            current = snapshot.cluster(name)
            if input.upcoming_version:
                upcoming = KubeVersion.parse(input.upcoming_version)
                snapshot = replace_cluster(snapshot, [at_version(current, upcoming)])
            result = place(snapshot, now=parse_time(input.now) if input.now else None)
        except InputError as err:
            _invalid(str(err))
        before = {w.key: set(w.placement.clusters) for w in snapshot.workloads}
        decisions: list[PlacementDecisionInfo] = []
        moved: list[str] = []
        stranded: list[str] = []
        unschedulable: list[str] = []
        for decision in result.decisions:
            was_here = name in before.get(decision.workload, set())
            if decision.unschedulable:
                unschedulable.append(decision.workload)
                if was_here and name in decision.reasons:
                    stranded.append(decision.workload)
                continue
            if was_here and name not in decision.replicas:
                moved.append(decision.workload)
            decisions.append(
                PlacementDecisionInfo(
                    workload=decision.workload,
                    clusters=tuple(
                        ClusterReplicasInfo(c.name, c.replicas) for c in decision.clusters
                    ),
                    reason=input.reason,
                )
            )
        if stranded and input.upcoming_version:
            return ReplaceResult(0, (), tuple(stranded), tuple(unschedulable))
        await self._backend.write_placement(decisions, input.reason)
        return ReplaceResult(len(decisions), tuple(moved), tuple(stranded), tuple(unschedulable))

    # ---------------------------------------------------------------- control plane

    @activity.defn(name="patch_control_plane")
    async def patch_control_plane(self, input: PatchControlPlaneInput) -> PatchResult:
        """Declare the control plane's next version, unless this step already did."""
        obs = await self._observe(input.cluster)
        declared = obs.control_plane.version
        if _same_version(declared, input.to_version):
            return PatchResult(already=("controlPlane",))
        if not _same_version(declared, input.from_version):
            raise ApplicationError(
                f"control plane declares {declared}, expected {input.from_version} before "
                f"step {input.step_id}",
                type=VERSION_CONFLICT,
                non_retryable=True,
            )
        await self._backend.set_control_plane_version(
            input.cluster, input.to_version, input.step_id
        )
        return PatchResult(applied=("controlPlane",))

    @activity.defn(name="wait_control_plane")
    async def wait_control_plane(self, input: WaitControlPlaneInput) -> WaitResult:
        """Poll until the control plane rolled out the version, heartbeating on every poll."""
        polls = 0
        while True:
            obs = await self._observe(input.cluster)
            polls += 1
            done, message = _component_done(obs.control_plane, input.version, "control plane")
            activity.heartbeat(WaitProgress(polls, message))
            if done:
                return WaitResult(polls, message)
            await asyncio.sleep(input.poll_seconds)

    # ---------------------------------------------------------------- workers

    @activity.defn(name="patch_workers")
    async def patch_workers(self, input: PatchWorkersInput) -> PatchResult:
        """Declare the version on each pool, skipping pools this step already moved."""
        if not input.pools:
            _invalid(f"worker step {input.step_id} names no MachineDeployment")
        obs = await self._observe(input.cluster)
        applied: list[str] = []
        already: list[str] = []
        for expected in input.pools:
            pool = obs.pool(expected.name)
            if pool is None:
                raise ApplicationError(
                    f"MachineDeployment {expected.name} not found",
                    type=NOT_FOUND,
                    non_retryable=True,
                )
            if _same_version(pool.version, input.to_version):
                already.append(expected.name)
                continue
            if not _same_version(pool.version, expected.version):
                raise ApplicationError(
                    f"MachineDeployment {expected.name} declares {pool.version}, expected "
                    f"{expected.version} before step {input.step_id}",
                    type=VERSION_CONFLICT,
                    non_retryable=True,
                )
            await self._backend.set_pool_version(
                input.cluster, expected.name, input.to_version, input.step_id
            )
            applied.append(expected.name)
        return PatchResult(tuple(applied), tuple(already))

    @activity.defn(name="wait_workers")
    async def wait_workers(self, input: WaitWorkersInput) -> WaitResult:
        """Poll until every pool rolled out the version, heartbeating on every poll."""
        polls = 0
        while True:
            obs = await self._observe(input.cluster)
            polls += 1
            messages: list[str] = []
            done = True
            for name in input.pools:
                pool = obs.pool(name)
                if pool is None:
                    raise ApplicationError(
                        f"MachineDeployment {name} not found", type=NOT_FOUND, non_retryable=True
                    )
                pool_done, message = _component_done(
                    pool, input.version, f"MachineDeployment {name}"
                )
                done = done and pool_done
                messages.append(message)
            text = "; ".join(messages)
            activity.heartbeat(WaitProgress(polls, text))
            if done:
                return WaitResult(polls, text)
            await asyncio.sleep(input.poll_seconds)

    # ---------------------------------------------------------------- verify and check

    @activity.defn(name="verify")
    async def verify(self, input: VerifyInput) -> VerifyResult:
        """Compare what runs with what was declared: API server version, or node kubelets."""
        obs = await self._observe(input.cluster)
        problems: list[str] = []
        if not obs.reachable:
            return VerifyResult(False, ("the workload cluster's API server is not reachable",))
        if input.component == "controlPlane":
            running = obs.control_plane.versions
            if not running:
                problems.append("the API server reported no version")
            problems += [
                f"API server reports {v}, expected {input.version}"
                for v in running
                if not _same_version(v, input.version)
            ]
        else:
            for name in input.pools:
                pool = obs.pool(name)
                if pool is None:
                    problems.append(f"MachineDeployment {name} not found")
                    continue
                if not pool.versions:
                    problems.append(f"MachineDeployment {name} has no Nodes")
                wrong = [v for v in pool.versions if not _same_version(v, input.version)]
                if wrong:
                    problems.append(
                        f"MachineDeployment {name}: {len(wrong)} Node(s) run kubelet "
                        f"{', '.join(sorted(set(wrong)))}, expected {input.version}"
                    )
        return VerifyResult(not problems, tuple(problems))

    @activity.defn(name="check_compat")
    async def check_compat(self, input: CheckInput) -> CheckResult:
        """Workloads still placed on the cluster that use an API the version no longer serves."""
        inv = await self._backend.inventory((input.cluster.name,))
        try:
            cluster = inv.snapshot.cluster(input.cluster.name)
            version = KubeVersion.parse(input.version)
        except InputError as err:
            _invalid(str(err))
        here = [w for w in inv.snapshot.workloads if cluster.name in w.placement.clusters]
        findings = cluster_findings(cluster, (version,), here)
        return CheckResult(
            tuple(FindingInfo(f.workload, f.api, f.removed_in, f.replacement) for f in findings)
        )
