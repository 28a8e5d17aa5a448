"""Calibration planning: the domain planner bound to the placement engine, and its JSON.

``orchestrator.domain.calibration`` plans (per-cluster plans, compatibility verdicts, waves)
and asks a ``Placer`` where a workload a step would break could go; this module answers with
the placement engine. The CLI's ``plan``/``check``, the client's check at start and the
workflow's plan activity all call ``plan_calibration`` here, so what an operator previews is
exactly what the workflow runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from orchestrator.domain import calibration
from orchestrator.domain.calibration import CalibrationPlan
from orchestrator.domain.durations import format_duration
from orchestrator.domain.selectors import LabelSelector
from orchestrator.domain.snapshot import FleetSnapshot
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import DEFAULT_STRATEGY, Strategy
from orchestrator.placement import place


def placed_on(end_state: FleetSnapshot, workloads: Sequence[str]) -> Mapping[str, tuple[str, ...]]:
    """The placement engine as the planner's ``Placer``: one run over the end state.

    A cluster that lost an API is already rejected there by APICompatibility, and placing the
    movers together never promises the same free capacity twice. An unschedulable workload has
    no cluster.
    """
    return {
        d.workload: () if d.unschedulable else tuple(c.name for c in d.clusters)
        for d in place(end_state, workloads=workloads).decisions
    }


def plan_calibration(
    snapshot: FleetSnapshot,
    target: KubeVersion,
    strategy: Strategy = DEFAULT_STRATEGY,
    selector: LabelSelector | None = None,
    scope: frozenset[str] | None = None,
) -> CalibrationPlan:
    """Plan a calibration of the selected (and scoped) clusters to ``target`` (see above)."""
    return calibration.plan_calibration(
        snapshot, target, strategy, selector, scope, placer=placed_on
    )


def plan_to_json(plan: CalibrationPlan) -> dict[str, object]:
    """The ``calibrator plan -o json`` document (docs/api.md "CLI JSON documents")."""
    stage_of = {name: stage.name for stage in plan.rollout.stages for name in stage.clusters}
    clusters: list[dict[str, object]] = []
    for p in plan.clusters:
        window = plan.window_for(p.cluster)
        clusters.append(
            {
                "name": p.cluster,
                "controlPlane": {
                    "from": str(p.control_plane_from),
                    "steps": [str(v) for v in p.control_plane_steps],
                },
                "workers": {
                    "from": None if p.workers_from is None else str(p.workers_from),
                    "steps": [str(v) for v in p.worker_steps],
                },
                "blocked": p.blocked,
                "reasons": list(p.reasons),
                "order": [
                    {
                        "component": s.component,
                        "from": str(s.from_version),
                        "version": str(s.version),
                        "machineDeployments": list(s.pools),
                        # Each moving pool's version before the step: the run's idempotency key.
                        "machineDeploymentsFrom": {n: str(v) for n, v in s.pools_from},
                    }
                    for s in p.steps
                ],
                "stage": stage_of.get(p.cluster),
                "maintenanceWindow": None if window is None else window.describe(),
            }
        )
    return {
        "target": str(plan.target),
        "clusters": clusters,
        "waves": plan.rollout.waves(),
        "stages": [
            {
                "name": s.name,
                "groups": [{"name": g.name, "waves": [list(w) for w in g.waves]} for g in s.groups],
                "maxConcurrency": s.max_concurrency,
                "soak": format_duration(s.soak_seconds),
                "approval": s.approval,
            }
            for s in plan.rollout.stages
        ],
        "unassigned": list(plan.rollout.unassigned),
        # Stages that wait for `calibrator approve` before they start, in run order: the same
        # gates the workflow enforces (both read Stage.approval from build_rollout).
        "approvalGates": [s.name for s in plan.rollout.stages if s.approval],
        "maxFailures": plan.rollout.max_failures,
        "complete": not plan.left_behind(),
    }


def findings_to_json(plan: CalibrationPlan) -> dict[str, object]:
    """The ``calibrator check -o json`` document."""
    return {
        "target": str(plan.target),
        "findings": [
            {
                "cluster": v.finding.cluster,
                "workload": v.finding.workload,
                "api": v.finding.api,
                "removedIn": v.finding.removed_in,
                "replacement": v.finding.replacement,
                "version": str(v.finding.version),
                "alreadyBroken": v.finding.already_broken,
                "action": v.action,
                "destination": v.destination,
                # Additive (issue 27): where the finding comes from and what was seen.
                "source": v.finding.source,
                "detail": v.finding.describe(),
                "subject": v.finding.subject,
                "active": v.finding.active,
                "earlyWarning": v.finding.early_warning,
            }
            for v in plan.findings
        ],
        "unchecked": [
            {"cluster": name, "reasons": list(plan.plan_for(name).reasons)}
            for name in plan.unchecked
        ],
        "partiallyObserved": [
            {"cluster": name, "reason": reason} for name, reason in plan.partially_observed
        ],
        "complete": not plan.unchecked and not plan.partially_observed,
    }
