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
* **Re-placements heartbeat** with a ``PlacementProgress`` after reading the fleet, before
  writing and per decision written, so a large first placement may take as long as its writes
  keep progressing (``Timeouts.placement_seconds`` bounds an attempt) while a dead worker is
  still noticed within the heartbeat timeout.
* **Invalid input is non-retryable** (``InvalidInput``, ``NotFound``): retrying cannot fix it and
  the workflow must fail before touching anything.
* **One classification of backend errors** (``classify``): every backend call goes through
  ``_ClassifiedBackend``, which turns the backend's deliberate errors into one ApplicationError
  type each (missing object: ``NotFound``; refused request: ``NotAllowed``; unusable object on the
  cluster: ``InvalidInput``; a version moved by someone else: ``VersionConflict``), all
  non-retryable. Anything else is transient: the backend already retried it within the call
  (``orchestrator.kube.client.harden``) and Temporal's retry policy takes it from there.
* Pure decisions (planning, placement, compatibility) run here, not in the backend, so the plan
  and every placement are recorded in history and identical for every backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

from temporalio import activity
from temporalio.api.common.v1 import Payload
from temporalio.converter import default as default_converter
from temporalio.exceptions import ApplicationError

from orchestrator.domain.compatibility import cluster_findings
from orchestrator.domain.errors import InputError
from orchestrator.domain.policy import PolicyEvaluation, policy_from_mapping
from orchestrator.domain.policy import evaluate_policy as evaluate_fleet_policy
from orchestrator.domain.selectors import parse_selector_string
from orchestrator.domain.snapshot import (
    Cluster,
    FleetSnapshot,
    Workload,
    replace_cluster,
    snapshot_from_mapping,
)
from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Effect, Taint, parse_time
from orchestrator.domain.versions import KubeVersion, VersionError
from orchestrator.domain.waves import DEFAULT_STRATEGY, Strategy, strategy_from_mapping
from orchestrator.kube.backend.port import (
    BackendError,
    ClusterObservation,
    ClusterRef,
    ClusterReplicasInfo,
    ComponentObservation,
    FleetBackend,
    InvalidObjectError,
    Inventory,
    NotAllowedError,
    NotFoundError,
    PlacementDecisionInfo,
    PlacementWrite,
    Progress,
    VersionChangedError,
)
from orchestrator.placement import place
from orchestrator.planning import CalibrationPlan, at_version, plan_calibration
from workflows import metrics
from workflows.model import (
    SAMPLE_LIMIT,
    CalibrationGroup,
    CheckInput,
    CheckResult,
    ClusterLocation,
    ClusterPlanInput,
    ClusterProgress,
    ClusterState,
    ClusterUpgradePlan,
    DropBlobInput,
    EvaluateInput,
    FindingInfo,
    FleetPlan,
    LocateInput,
    PatchControlPlaneInput,
    PatchResult,
    PatchWorkersInput,
    PlacementProgress,
    PlanInput,
    PlanRef,
    PlanSummary,
    PolicyReport,
    PoolVersion,
    PreflightInput,
    PreflightResult,
    ReplaceInput,
    ReplaceResult,
    ScopeRef,
    StageSummary,
    StepPlan,
    StepProgress,
    TaintInput,
    TaintResult,
    VerifyInput,
    VerifyResult,
    ViolationInfo,
    WaitControlPlaneInput,
    WaitProgress,
    WaitResult,
    WaitWorkersInput,
    WaveInput,
    WaveMember,
    WaveSlice,
)

T = TypeVar("T")

# ApplicationError types the workflows and operators see.
INVALID_INPUT = "InvalidInput"
NOT_FOUND = "NotFound"
VERSION_CONFLICT = "VersionConflict"
ROLLOUT_FAILED = "RolloutFailed"
NOT_ALLOWED = "NotAllowed"  # the worker's role lacks a permission (403)
PLACEMENT_CONFLICT = "PlacementConflict"  # retryable: other placements kept winning

NON_RETRYABLE_ERRORS = (INVALID_INPUT, NOT_FOUND, VERSION_CONFLICT, ROLLOUT_FAILED, NOT_ALLOWED)

# Backend error class -> the ApplicationError type operators and workflows see (non-retryable).
_BACKEND_ERROR_TYPES: tuple[tuple[type[BackendError], str], ...] = (
    (NotFoundError, NOT_FOUND),
    (NotAllowedError, NOT_ALLOWED),
    (InvalidObjectError, INVALID_INPUT),
    (VersionChangedError, VERSION_CONFLICT),
)


# Read-place-write rounds of one ``replace`` before it fails (and Temporal retries it).
PLACEMENT_ROUNDS = 5
# Workload lists in a ReplaceResult are cut to this many names (the counts stay exact).
RESULT_LIST_LIMIT = 20


def _first(names: Sequence[str]) -> tuple[str, ...]:
    return tuple(names[:RESULT_LIST_LIMIT])


def affected_workloads(snapshot: FleetSnapshot, cluster: Cluster) -> tuple[Workload, ...]:
    """Workloads a step of ``cluster`` can move: those it hosts, and those it could now host.

    A step changes only the cluster's version and taints. A workload elsewhere can start using
    the cluster only if one of its affinity terms selects the cluster (names, labels, exclusions:
    facts a step does not change); tolerations, API compatibility and capacity are deliberately
    not pre-filtered, so the set over-approximates rather than misses. Workloads whose NoExecute
    toleration has ``tolerationSeconds`` are always included: workflow time alone can evict them.
    Everything else keeps its decision: its clusters did not change.
    """
    chosen: list[Workload] = []
    for w in snapshot.workloads:
        policy = w.placement
        if (
            cluster.name in policy.clusters
            or not policy.affinities
            or any(a.matches(cluster) for a in policy.affinities)
            # A time-bounded NoExecute toleration can run out between any two runs.
            or any(t.toleration_seconds is not None for t in policy.tolerations)
        ):
            chosen.append(w)
    return tuple(chosen)


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
    plan: CalibrationPlan, calibration_id: str, namespaces: Mapping[str, str] | None = None
) -> FleetPlan:
    """The domain plan as the workflows run it: a copy field by field, deciding nothing.

    Everything is read from the domain plan as planning decided it: steps with their
    from-versions (per pool for worker steps: the idempotency key of a patch) and their ids
    (``step_id``), the pools and topology the plan starts from, each cluster's window, the
    rollout's stages with their approval gates, soak and concurrency (``Stage`` itself), the
    failure budget. Versions become text. Only the addressing planning cannot know is added: the
    calibration id (in the step ids) and each cluster's namespace. Deriving anything here once
    made the run enforce a gate the preview did not show.
    """
    namespaces = namespaces or {}
    clusters = tuple(
        ClusterUpgradePlan(
            cluster=ClusterRef(cplan.cluster, namespaces.get(cplan.cluster, "")),
            control_plane_from=str(cplan.control_plane_from),
            workers_from=None if cplan.workers_from is None else str(cplan.workers_from),
            pools=tuple(PoolVersion(name, str(v)) for name, v in cplan.pools_from),
            steps=tuple(
                StepPlan(
                    index,
                    sid,
                    step.component,
                    str(step.version),
                    str(step.from_version),
                    tuple(PoolVersion(name, str(v)) for name, v in step.pools_from),
                )
                for index, (step, sid) in enumerate(
                    zip(cplan.steps, cplan.step_ids(calibration_id), strict=True)
                )
            ),
            topology=cplan.topology,
            blocked=cplan.blocked,
            reasons=cplan.reasons,
            window=plan.window_for(cplan.cluster),
        )
        for cplan in plan.clusters
    )
    return FleetPlan(
        target=str(plan.target),
        calibration_id=calibration_id,
        clusters=clusters,
        stages=plan.rollout.stages,
        unassigned=plan.rollout.unassigned,
        max_failures=plan.rollout.max_failures,
        finding_actions=plan.finding_actions(),
    )


def plan_fleet_of(
    input: PlanInput,
    snapshot: FleetSnapshot,
    namespaces: Mapping[str, str],
    scope: frozenset[str] | None = None,
) -> FleetPlan:
    """Plan ``snapshot`` as ``input`` says and make the payload: the plan activity's one path.

    InputError on anything unusable (target, strategy, selector, an empty selection).
    """
    target = KubeVersion.parse(input.target)
    strategy = load_strategy_document(input.strategy)
    selector = parse_selector_string(input.selector) if input.selector else None
    plan = plan_calibration(snapshot, target, strategy, selector, scope)
    return fleet_plan(plan, input.calibration_id, namespaces)


def plan_from_input(input: PlanInput) -> FleetPlan:
    """Validate the inputs and plan the snapshot they carry (InputError on anything unusable)."""
    if input.snapshot is None:
        raise InputError("planning needs a snapshot (the plan_fleet activity reads the fleet)")
    return plan_fleet_of(input, snapshot_from_mapping(input.snapshot), input.namespaces)


# --------------------------------------------------------------------------------------------
# The stored plan (content-addressed, immutable; see docs/decisions.md)
# --------------------------------------------------------------------------------------------

_JSON = Payload(metadata={"encoding": b"json/plain"})
# Decoded plans an activity worker keeps (immutable, so a digest always means the same plan).
PLAN_CACHE_SIZE = 4


def encode_plan(plan: FleetPlan) -> tuple[str, bytes]:
    """(SHA-256 hex, bytes): the plan as the same JSON Temporal would put in history."""
    (payload,) = default_converter().payload_converter.to_payloads([plan])
    data = payload.data
    return hashlib.sha256(data).hexdigest(), data


def decode_plan(data: bytes) -> FleetPlan:
    """Inverse of ``encode_plan``."""
    payload = Payload()
    payload.CopyFrom(_JSON)
    payload.data = data
    (plan,) = default_converter().payload_converter.from_payloads([payload], [FleetPlan])
    assert isinstance(plan, FleetPlan)
    return plan


def encode_scope(names: Sequence[str], owner: str) -> tuple[str, bytes]:
    """(SHA-256 hex, bytes) of a calibration's scope: its owner and the sorted cluster names.

    The owner (the evaluating workflow's id) makes the digest unique per evaluation, so the owner
    can delete the scope when its calibrations have planned without breaking another schedule's
    evaluation that found the same clusters.
    """
    document = {"owner": owner, "clusters": sorted(names)}
    data = json.dumps(document, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest(), data


def decode_scope(data: bytes) -> list[str]:
    """Inverse of ``encode_scope`` (a stored scope is written by us; anything else is corrupt).

    A bare list is what workers before scope ownership stored; it still reads.
    """
    document = json.loads(data)
    names = document.get("clusters") if isinstance(document, dict) else document
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ApplicationError("stored scope is not a list of cluster names", type=NOT_FOUND)
    return names


def planned_state(cplan: ClusterUpgradePlan, *, staged: bool) -> ClusterState:
    """Where a cluster of a plan starts: blocked, up to date, in no stage, or pending in one."""
    if cplan.blocked:
        return ClusterState.BLOCKED
    if not cplan.steps:
        return ClusterState.UP_TO_DATE
    return ClusterState.PENDING if staged else ClusterState.UNASSIGNED


# Order of the summary's sample among the states a plan starts clusters in.
_STATE_ORDER = {
    ClusterState.BLOCKED: 0,
    ClusterState.UNASSIGNED: 1,
    ClusterState.PENDING: 2,
    ClusterState.UP_TO_DATE: 3,
}


def summarize_plan(
    plan: FleetPlan, ref: PlanRef, skipped: Mapping[str, str] | None = None
) -> PlanSummary:
    """The bounded part of a plan the parent workflow keeps: counts, stages, a sample.

    The sample gives detail to the first ``SAMPLE_LIMIT`` clusters in this order: skipped by the
    inventory (malformed CAPI objects, with the reason; never touched), blocked (with their
    reasons), unassigned, the next to run (execution order), up to date. A small fleet is
    therefore shown whole from the start; a large one by counts plus what matters first.
    """
    order = [n for s in plan.stages for n in s.clusters]
    stage_of = {n: s.name for s in plan.stages for n in s.clusters}
    rank_of_pending = {n: i for i, n in enumerate(order)}
    unassigned = set(plan.unassigned)
    counts: dict[str, int] = {}
    notable: list[tuple[tuple[int, int], ClusterProgress]] = []
    for name, reason in sorted((skipped or {}).items()):
        counts[ClusterState.SKIPPED.value] = counts.get(ClusterState.SKIPPED.value, 0) + 1
        notable.append(
            (
                (-1, 0),
                ClusterProgress(
                    name=name,
                    state=ClusterState.SKIPPED,
                    message=f"skipped: {reason}",
                    reasons=(reason,),
                ),
            )
        )
    for cplan in plan.clusters:
        name = cplan.cluster.name
        state = planned_state(cplan, staged=name in stage_of and name not in unassigned)
        rank = (_STATE_ORDER[state], rank_of_pending[name] if state == ClusterState.PENDING else 0)
        counts[state.value] = counts.get(state.value, 0) + 1
        notable.append(
            (
                rank,
                ClusterProgress(
                    name=name,
                    stage=stage_of.get(name, ""),
                    state=state,
                    from_version=cplan.control_plane_from,
                    target=plan.target,
                    window="" if cplan.window is None else cplan.window.describe(),
                    steps=tuple(StepProgress(s.index, s.step_id, s.describe()) for s in cplan.steps)
                    if state == ClusterState.PENDING
                    else (),
                    reasons=cplan.reasons,
                ),
            )
        )
    notable.sort(key=lambda item: item[0])
    return PlanSummary(
        target=plan.target,
        plan=ref,
        stages=tuple(
            StageSummary(
                name=s.name,
                waves=len(s.waves()),
                clusters=len(s.clusters),
                max_concurrency=s.max_concurrency,
                soak_seconds=s.soak_seconds,
                approval=s.approval,
            )
            for s in plan.stages
        ),
        clusters=len(plan.clusters) + len(skipped or {}),
        counts=counts,
        notable=tuple(p for _, p in notable[:SAMPLE_LIMIT]),
        unassigned=plan.unassigned[:SAMPLE_LIMIT],
        findings=sum(plan.finding_actions.values()),
        max_failures=plan.max_failures,
        finding_actions=dict(plan.finding_actions),
    )


_STATE_RANK = {"due": 0, "busy": 1, "deferred": 2, "unfixable": 3}


def _violation_sample(result: PolicyEvaluation) -> tuple[ViolationInfo, ...]:
    """At most SAMPLE_LIMIT violators, those a calibration starts for first, then by name."""
    ordered = sorted(result.violating, key=lambda v: (_STATE_RANK[v.state()], v.name))
    return tuple(
        ViolationInfo(
            cluster=v.name,
            state=v.state(),
            goal="" if v.goal is None else str(v.goal),
            rules=tuple(x.rule for x in v.violations),
            message="; ".join(
                [x.message for x in v.violations]
                + ([f"unfixable: {v.unfixable}"] if v.unfixable else [])
                + ([f"being upgraded by {v.busy}"] if v.busy else [])
            ),
            opens_at=v.opens_at,
        )
        for v in ordered[:SAMPLE_LIMIT]
    )


@dataclasses.dataclass(frozen=True)
class _LoadedPlan:
    plan: FleetPlan
    clusters: dict[str, ClusterUpgradePlan]
    position: dict[str, tuple[int, int]]  # name -> (stage, wave)


def _index(plan: FleetPlan) -> _LoadedPlan:
    return _LoadedPlan(
        plan,
        {c.cluster.name: c for c in plan.clusters},
        {
            name: (si, wi)
            for si, stage in enumerate(plan.stages)
            for wi, wave in enumerate(stage.waves())
            for name in wave
        },
    )


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


def classify(err: BackendError) -> BackendError | ApplicationError:
    """The one mapping of backend errors to activity failures (see the module docstring).

    Returns ``err`` itself for a BackendError with no type of its own: a transient failure,
    retried by Temporal like any other exception.
    """
    for cls, error_type in _BACKEND_ERROR_TYPES:
        if isinstance(err, cls):
            return ApplicationError(str(err), type=error_type, non_retryable=True)
    return err


Beat = Callable[[PlacementProgress], None]


@contextlib.asynccontextmanager
async def _heartbeating(first: PlacementProgress) -> AsyncIterator[Beat]:
    """Heartbeat progress as it comes, and the latest again every third of the heartbeat timeout.

    Some backend calls report no progress of their own: one LIST of thousands of FleetWorkloads
    on a worker running 20 re-placements at once outlasted a 30-s heartbeat timeout (the
    100-cluster benchmark with 1,000 workloads, 2026-12-03). The ticker shows the worker alive
    and stops with it, so a dead worker is still noticed; each request has its own timeout
    (``client.harden``) and ``placement_seconds`` bounds the attempt. Without a heartbeat
    timeout (tests, ``ActivityEnvironment``) nothing ticks.
    """
    timeout = activity.info().heartbeat_timeout
    latest = [first]

    def beat(details: PlacementProgress) -> None:
        latest[0] = details
        activity.heartbeat(details)

    async def tick(interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat(latest[0])

    ticker = asyncio.ensure_future(tick(timeout.total_seconds() / 3)) if timeout else None
    beat(first)
    try:
        yield beat
    finally:
        if ticker is not None:
            ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ticker


class _ClassifiedBackend:
    """A ``FleetBackend`` whose deliberate errors arrive already classified (``classify``)."""

    def __init__(self, backend: FleetBackend) -> None:
        self._backend = backend

    @staticmethod
    async def _run(call: Awaitable[T]) -> T:
        try:
            return await call
        except BackendError as err:
            classified = classify(err)
            if classified is err:
                raise
            raise classified from err

    async def inventory(self, clusters: Sequence[str] = ()) -> Inventory:
        return await self._run(self._backend.inventory(clusters))

    async def observe(self, cluster: ClusterRef) -> ClusterObservation:
        return await self._run(self._backend.observe(cluster))

    async def set_control_plane_version(
        self, cluster: ClusterRef, version: str, step_id: str
    ) -> None:
        await self._run(self._backend.set_control_plane_version(cluster, version, step_id))

    async def set_pool_version(
        self, cluster: ClusterRef, pool: str, version: str, step_id: str
    ) -> None:
        await self._run(self._backend.set_pool_version(cluster, pool, version, step_id))

    async def add_taint(self, cluster: ClusterRef, taint: Taint) -> bool:
        return await self._run(self._backend.add_taint(cluster, taint))

    async def remove_taint(self, cluster: ClusterRef, key: str, effect: Effect) -> bool:
        return await self._run(self._backend.remove_taint(cluster, key, effect))

    async def write_placement(
        self,
        decisions: Sequence[PlacementDecisionInfo],
        reason: str,
        progress: Progress | None = None,
    ) -> PlacementWrite:
        return await self._run(self._backend.write_placement(decisions, reason, progress))

    async def put_blob(self, digest: str, data: bytes) -> None:
        await self._run(self._backend.put_blob(digest, data))

    async def get_blob(self, digest: str) -> bytes:
        return await self._run(self._backend.get_blob(digest))

    async def delete_blob(self, digest: str) -> None:
        await self._run(self._backend.delete_blob(digest))


class CalibrationActivities:
    """Activity implementations bound to one ``FleetBackend``."""

    def __init__(self, backend: FleetBackend) -> None:
        self._backend: FleetBackend = _ClassifiedBackend(backend)
        self._plans: OrderedDict[str, _LoadedPlan] = OrderedDict()

    def all(self) -> list[Callable[..., Any]]:
        """Every activity, for ``Worker(activities=...)``."""
        return [
            self.plan_fleet,
            self.evaluate_policy,
            self.wave,
            self.cluster_plan,
            self.locate_cluster,
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
            self.drop_blob,
        ]

    async def _observe(self, cluster: ClusterRef) -> ClusterObservation:
        return await self._backend.observe(cluster)

    # ---------------------------------------------------------------- the stored plan

    def _remember(self, digest: str, loaded: _LoadedPlan) -> _LoadedPlan:
        self._plans[digest] = loaded
        self._plans.move_to_end(digest)
        while len(self._plans) > PLAN_CACHE_SIZE:
            self._plans.popitem(last=False)
        return loaded

    async def _load(self, ref: PlanRef) -> _LoadedPlan:
        """The stored plan (cached by digest: it never changes), verified against the digest."""
        loaded = self._plans.get(ref.digest)
        if loaded is not None:
            self._plans.move_to_end(ref.digest)
            return loaded
        data = await self._backend.get_blob(ref.digest)
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise ApplicationError(f"stored plan {ref.digest} is corrupt", type=NOT_FOUND)
        return self._remember(ref.digest, _index(decode_plan(data)))

    async def _scope(self, ref: ScopeRef) -> frozenset[str]:
        """The stored cluster names of a scoped calibration, verified against the digest."""
        data = await self._backend.get_blob(ref.digest)
        if hashlib.sha256(data).hexdigest() != ref.digest:
            raise ApplicationError(f"stored scope {ref.digest} is corrupt", type=NOT_FOUND)
        return frozenset(decode_scope(data))

    @activity.defn(name="plan_fleet")
    async def plan_fleet(self, input: PlanInput) -> PlanSummary:
        """Inventory (unless a snapshot is given), plan, store the plan; return its summary.

        The plan can be megabytes at fleet scale, over Temporal's payload limit, so it goes to
        the backend's content-addressed store and only its digest and a bounded summary enter
        history. Same inputs give the same plan and the same digest; a retry stores it again
        harmlessly (puts are idempotent).
        """
        try:
            if input.snapshot is None:
                inv = await self._backend.inventory()
                snapshot, namespaces = inv.snapshot, dict(inv.namespaces)
                skipped = dict(inv.skipped)
                for name, reason in sorted(skipped.items()):
                    activity.logger.warning("cluster %s skipped: %s", name, reason)
            else:
                skipped = {}
                snapshot = snapshot_from_mapping(input.snapshot)
                namespaces = dict(input.namespaces)
            scope = None if input.scope is None else await self._scope(input.scope)
            plan = plan_fleet_of(input, snapshot, namespaces, scope)
        except InputError as err:
            _invalid(str(err))
        digest, data = encode_plan(plan)
        await self._backend.put_blob(digest, data)
        self._remember(digest, _index(plan))
        return summarize_plan(plan, PlanRef(digest, len(data)), skipped)

    @activity.defn(name="drop_blob")
    async def drop_blob(self, input: DropBlobInput) -> None:
        """Delete a stored plan or scope its owner is done with (gone already is fine).

        Plans and scopes are megabytes at fleet scale and a schedule stores new ones every tick;
        without this they would pile up in the management cluster's etcd for ever.
        """
        self._plans.pop(input.digest, None)
        await self._backend.delete_blob(input.digest)

    @activity.defn(name="evaluate_policy")
    async def evaluate_policy(self, input: EvaluateInput) -> PolicyReport:
        """Inventory the fleet, evaluate the policy, store each calibration's scope by digest.

        Only the bounded report enters history (counts, one reference per goal version, a
        sample of violators), never the inventory or the full list of violating clusters.
        """
        try:
            policy = policy_from_mapping(input.policy)
            inv = await self._backend.inventory()
            result = evaluate_fleet_policy(inv.snapshot, policy, input.now)
        except InputError as err:
            _invalid(str(err))
        groups = []
        for goal, names in result.due_groups():
            digest, data = encode_scope(names, activity.info().workflow_id or "")
            await self._backend.put_blob(digest, data)
            groups.append(
                CalibrationGroup(str(goal), ScopeRef(digest, len(names)), names[:SAMPLE_LIMIT])
            )
        return PolicyReport(
            policy=policy.describe(),
            newest=str(result.newest),
            checked=result.checked,
            violating=len(result.violating),
            counts=result.counts(),
            groups=tuple(groups),
            sample=_violation_sample(result),
            next_opening=result.next_opening(),
            skipped=len(inv.skipped),
        )

    @activity.defn(name="wave")
    async def wave(self, input: WaveInput) -> WaveSlice:
        """Members ``offset`` .. ``offset + limit`` of one wave of a stored plan."""
        loaded = await self._load(input.plan)
        try:
            names = loaded.plan.stages[input.stage].waves()[input.wave]
        except IndexError:
            _invalid(f"plan {input.plan.digest[:12]} has no stage {input.stage} wave {input.wave}")
        members = []
        for name in names[input.offset : input.offset + max(1, input.limit)]:
            cplan = loaded.clusters[name]
            members.append(
                WaveMember(
                    name,
                    cplan.control_plane_from,
                    tuple(s.describe() for s in cplan.steps),
                    cplan.window,
                    tuple(s.step_id for s in cplan.steps),
                )
            )
        return WaveSlice(tuple(members), len(names))

    @activity.defn(name="cluster_plan")
    async def cluster_plan(self, input: ClusterPlanInput) -> ClusterUpgradePlan:
        """One cluster's plan, read by its ClusterUpgrade child from the stored plan."""
        loaded = await self._load(input.plan)
        cplan = loaded.clusters.get(input.cluster)
        if cplan is None:
            _invalid(f"cluster {input.cluster!r} is not part of plan {input.plan.digest[:12]}")
        return cplan

    @activity.defn(name="locate_cluster")
    async def locate_cluster(self, input: LocateInput) -> ClusterLocation:
        """Stage and wave of a cluster in a stored plan, or why it has none."""
        loaded = await self._load(input.plan)
        cplan = loaded.clusters.get(input.cluster)
        if cplan is None:
            return ClusterLocation(False)
        position = loaded.position.get(input.cluster)
        state = planned_state(cplan, staged=position is not None)
        if position is not None and state == ClusterState.PENDING:
            return ClusterLocation(True, position[0], position[1], state.value)
        return ClusterLocation(True, state=state.value)

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
        return TaintResult(await self._backend.add_taint(input.cluster, taint))

    @activity.defn(name="remove_taint")
    async def remove_taint(self, input: TaintInput) -> TaintResult:
        """Remove the taint (idempotent: removing an absent taint changes nothing)."""
        return TaintResult(await self._backend.remove_taint(input.cluster, input.key, input.effect))

    # ---------------------------------------------------------------- placement

    @activity.defn(name="replace")
    async def replace(self, input: ReplaceInput) -> ReplaceResult:
        """Re-place the workloads this cluster's step can affect and write what changed.

        With ``upcoming_version`` the cluster is placed as if it ran that version, so workloads
        it would break move away before the patch. Unschedulable workloads keep their current
        decision (writing an empty one would evict them everywhere). ``stranded`` names those
        that run on the cluster and were rejected there; before a step that means the step would
        break them, so nothing is written and the workflow must not run the step.

        Cost in proportion to the step: only ``affected_workloads`` are placed, and only decisions
        that differ from the stored ones are written. Each write is a compare-and-swap on the
        workload's version as this inventory read it; a workload another cluster's placement
        changed meanwhile is re-read and recomputed (a few rounds, then a retryable failure).

        Every run is counted with its outcome and latency (``workflows.metrics``).
        """
        began = time.monotonic()
        outcome = metrics.ERROR
        try:
            async with _heartbeating(PlacementProgress(0, 0, "reading the fleet")) as beat:
                result = await self._replace_rounds(input, beat)
            blocked = bool(result.stranded and input.upcoming_version)
            outcome = metrics.BLOCKED if blocked else metrics.PLACED
            return result
        except ApplicationError as err:
            if err.type == PLACEMENT_CONFLICT:
                outcome = metrics.CONFLICT
            raise
        finally:
            metrics.PlacementMetrics(activity.metric_meter()).run(outcome, time.monotonic() - began)

    async def _replace_rounds(self, input: ReplaceInput, beat: Beat) -> ReplaceResult:
        written = 0
        conflicts = 0
        for _ in range(PLACEMENT_ROUNDS):
            outcome = await self._replace_once(input, beat)
            if isinstance(outcome, ReplaceResult):
                return dataclasses.replace(
                    outcome, written=written + outcome.written, conflicts=conflicts
                )
            written += len(outcome.written)
            conflicts += len(outcome.conflicts)
            beat(
                PlacementProgress(
                    0, 0, f"{len(outcome.conflicts)} placement conflict(s); re-reading"
                )
            )
        raise ApplicationError(
            f"placement for {input.cluster.name}: workloads kept changing under "
            f"{PLACEMENT_ROUNDS} attempts ({conflicts} conflicts)",
            type=PLACEMENT_CONFLICT,
        )

    async def _replace_once(
        self, input: ReplaceInput, beat: Beat
    ) -> ReplaceResult | PlacementWrite:
        """One read-place-write round; a PlacementWrite with conflicts means "read again"."""
        name = input.cluster.name
        try:
            inv = await self._backend.inventory()  # InputError: a FleetWorkload is invalid
            snapshot = inv.snapshot
            current = snapshot.cluster(name)
            if input.upcoming_version:
                upcoming = KubeVersion.parse(input.upcoming_version)
                snapshot = replace_cluster(snapshot, [at_version(current, upcoming)])
            affected = affected_workloads(snapshot, current)
            beat(PlacementProgress(0, 0, f"placing {len(affected)} workload(s)"))
            now = parse_time(input.now) if input.now else None
            # Pure CPU, seconds for a large fleet: in a thread, so the worker's event loop keeps
            # sending every activity's heartbeats meanwhile.
            result = (
                await asyncio.to_thread(
                    place, dataclasses.replace(snapshot, workloads=affected), now=now
                )
                if affected
                else None
            )
        except InputError as err:
            _invalid(str(err))
        before = {w.key: set(w.placement.clusters) for w in affected}
        decisions: list[PlacementDecisionInfo] = []
        moved: list[str] = []
        stranded: list[str] = []
        unschedulable: list[str] = []
        replicas_moved = replicas_forced = 0
        for decision in result.decisions if result is not None else ():
            was_here = name in before.get(decision.workload, set())
            if decision.unschedulable:
                unschedulable.append(decision.workload)
                if was_here and name in decision.reasons:
                    stranded.append(decision.workload)
                continue
            if was_here and name not in decision.replicas:
                moved.append(decision.workload)
            replicas_moved += decision.moved.replicas
            if decision.moved.removed:  # reasons are worked out on demand: only when needed
                rejected = decision.reasons
                replicas_forced += sum(r for c, r in decision.moved.removed if c in rejected)
            decisions.append(
                PlacementDecisionInfo(
                    workload=decision.workload,
                    clusters=tuple(
                        ClusterReplicasInfo(c.name, c.replicas) for c in decision.clusters
                    ),
                    reason=input.reason,
                    resource_version=inv.workload_versions.get(decision.workload, ""),
                )
            )
        lists = (_first(moved), _first(stranded), _first(unschedulable))
        if stranded and input.upcoming_version:
            return ReplaceResult(0, (), lists[1], lists[2], affected=len(affected))
        # Called even with nothing to write: an empty call costs no API request, and the backend
        # sees every placement run (the in-memory fleet records them). A first placement of a
        # large fleet writes thousands of objects: the backend writes a few at a time and each
        # finished decision is a heartbeat, so the attempt lasts as long as the writes progress.
        beat(PlacementProgress(0, len(decisions), "writing decisions"))

        def progress(done: int, total: int) -> None:
            beat(PlacementProgress(done, total, f"{done}/{total} decisions written"))

        write = await self._backend.write_placement(decisions, input.reason, progress)
        if write.conflicts:
            return write
        return ReplaceResult(
            len(decisions),
            *lists,
            affected=len(affected),
            written=len(write.written),
            replicas_moved=replicas_moved,
            replicas_forced=replicas_forced,
        )

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
        try:
            inv = await self._backend.inventory((input.cluster.name,))
            cluster = inv.snapshot.cluster(input.cluster.name)
            version = KubeVersion.parse(input.version)
        except InputError as err:
            _invalid(str(err))
        here = [w for w in inv.snapshot.workloads if cluster.name in w.placement.clusters]
        findings = cluster_findings(cluster, (version,), here)
        return CheckResult(
            tuple(FindingInfo(f.workload, f.api, f.removed_in, f.replacement) for f in findings)
        )
