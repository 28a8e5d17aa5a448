"""The plan as payload: a plain serialisation of the domain plan, its stored form and its summary.

Pure; public so tests and the CLI can preview exactly what the workflow runs. The stored plan is
content-addressed and immutable (docs/decisions.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence

from temporalio.api.common.v1 import Payload
from temporalio.exceptions import ApplicationError

from orchestrator.domain.calibration import CalibrationPlan
from orchestrator.domain.errors import InputError
from orchestrator.domain.request import parse_calibration_request
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.upgradeplan import ClusterPlan
from orchestrator.planning import plan_calibration
from workflows.activities.errors import NOT_FOUND
from workflows.model import (
    SAMPLE_LIMIT,
    CalibrationRun,
    ClusterProgress,
    ClusterRun,
    ClusterState,
    PlanInput,
    PlanRef,
    PlanSummary,
    StageSummary,
    StepProgress,
)
from workflows.payloads import StrictPayloadConverter


def calibration_run(
    plan: CalibrationPlan, calibration_id: str, namespaces: Mapping[str, str] | None = None
) -> CalibrationRun:
    """The domain plan as the workflows run it: the plan itself, deciding nothing.

    Everything the run obeys is the domain plan's as planning decided it (steps with their
    from-versions and ids, pools, topology, windows, stages, gates, the failure budget). Only
    what planning cannot know is added: the calibration id (in the step ids) and each cluster's
    namespace. The findings are kept as their counts (``CalibrationRun``). Deriving anything here
    once made the run enforce a gate the preview did not show.
    """
    return CalibrationRun(
        plan=dataclasses.replace(plan, findings=()),
        calibration_id=calibration_id,
        namespaces=dict(namespaces or {}),
        finding_actions=plan.finding_actions(),
    )


def plan_fleet_of(
    input: PlanInput,
    snapshot: FleetSnapshot,
    namespaces: Mapping[str, str],
    scope: frozenset[str] | None = None,
) -> CalibrationRun:
    """Plan ``snapshot`` as ``input`` says and make the payload: the plan activity's one path.

    InputError on anything unusable (target, strategy, selector, an empty selection).
    """
    request = parse_calibration_request(input.target, input.strategy, input.selector)
    plan = plan_calibration(snapshot, request.target, request.strategy, request.selector, scope)
    return calibration_run(plan, input.calibration_id, namespaces)


def plan_from_input(input: PlanInput) -> CalibrationRun:
    """Validate the inputs and plan the snapshot they carry (InputError on anything unusable)."""
    if input.snapshot is None:
        raise InputError("planning needs a snapshot (the plan_fleet activity reads the fleet)")
    return plan_fleet_of(input, snapshot_from_mapping(input.snapshot), input.namespaces)


_JSON = Payload(metadata={"encoding": b"json/plain"})
_CONVERTER = StrictPayloadConverter()  # what the worker writes to and reads from history

# Decoded plans an activity worker keeps (immutable, so a digest always means the same plan).
PLAN_CACHE_SIZE = 4


def encode_plan(plan: CalibrationRun) -> tuple[str, bytes]:
    """(SHA-256 hex, bytes): the plan as the same JSON Temporal would put in history."""
    (payload,) = _CONVERTER.to_payloads([plan])
    data = payload.data
    return hashlib.sha256(data).hexdigest(), data


def decode_plan(data: bytes) -> CalibrationRun:
    """Inverse of ``encode_plan``; a plan stored in an older shape reads too (``payloads``)."""
    payload = Payload()
    payload.CopyFrom(_JSON)
    payload.data = data
    (plan,) = _CONVERTER.from_payloads([payload], [CalibrationRun])
    assert isinstance(plan, CalibrationRun)
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


def planned_state(cplan: ClusterPlan, *, staged: bool) -> ClusterState:
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
    run: CalibrationRun, ref: PlanRef, skipped: Mapping[str, str] | None = None
) -> PlanSummary:
    """The bounded part of a plan the parent workflow keeps: counts, stages, a sample.

    The sample gives detail to the first ``SAMPLE_LIMIT`` clusters in this order: skipped by the
    inventory (malformed CAPI objects, with the reason; never touched), blocked (with their
    reasons), unassigned, the next to run (execution order), up to date. A small fleet is
    therefore shown whole from the start; a large one by counts plus what matters first.
    """
    plan, rollout = run.plan, run.plan.rollout
    order = [n for s in rollout.stages for n in s.clusters]
    stage_of = {n: s.name for s in rollout.stages for n in s.clusters}
    rank_of_pending = {n: i for i, n in enumerate(order)}
    unassigned = set(rollout.unassigned)
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
        name = cplan.cluster
        window = plan.window_for(name)
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
                    from_version=str(cplan.control_plane_from),
                    target=str(plan.target),
                    window="" if window is None else window.describe(),
                    steps=tuple(
                        StepProgress(s.index, s.step_id, s.describe())
                        for s in run.cluster_run(cplan).run_steps()
                    )
                    if state == ClusterState.PENDING
                    else (),
                    reasons=cplan.reasons,
                ),
            )
        )
    notable.sort(key=lambda item: item[0])
    return PlanSummary(
        target=str(plan.target),
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
            for s in rollout.stages
        ),
        clusters=len(plan.clusters) + len(skipped or {}),
        counts=counts,
        notable=tuple(p for _, p in notable[:SAMPLE_LIMIT]),
        unassigned=rollout.unassigned[:SAMPLE_LIMIT],
        findings=sum(run.finding_actions.values()),
        max_failures=rollout.max_failures,
        finding_actions=dict(run.finding_actions),
    )


@dataclasses.dataclass(frozen=True)
class LoadedPlan:
    """A decoded plan indexed by cluster name; shared: ``base`` caches them, ``plan`` fills the cache."""

    plan: CalibrationRun
    clusters: dict[str, ClusterRun]
    position: dict[str, tuple[int, int]]  # name -> (stage, wave)


def index_plan(plan: CalibrationRun) -> LoadedPlan:
    """Index a decoded plan for the activities' cache (``base.ActivitiesBase``, ``plan``)."""
    return LoadedPlan(
        plan,
        {c.cluster: plan.cluster_run(c) for c in plan.plan.clusters},
        {
            name: (si, wi)
            for si, stage in enumerate(plan.plan.rollout.stages)
            for wi, wave in enumerate(stage.waves())
            for name in wave
        },
    )
