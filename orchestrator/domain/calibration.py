"""A calibration's plan (pure): per-cluster plans, compatibility verdicts and the rollout.

The one planner behind ``calibrator plan``/``check`` and the workflow's plan activity, so what an
operator previews is exactly what the workflow runs. A step that would break a workload is fine
when the workload can move to a cluster that still serves its APIs *after* the calibration (every
planned cluster at its final version), and blocks the cluster otherwise. Where a workload could
move is the placement engine's answer, a layer above the domain: it is passed in as a function
(``Placer``), as cluster-api's topology planner is handed its reads, so this module stays in the
domain and its tests can state any answer. ``orchestrator.planning`` binds the real engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from orchestrator.domain.compatibility import Finding, check_fleet
from orchestrator.domain.errors import InputError
from orchestrator.domain.selectors import LabelSelector
from orchestrator.domain.snapshot import (
    Cluster,
    ControlPlaneState,
    FleetSnapshot,
    MachineDeploymentState,
    replace_cluster,
)
from orchestrator.domain.upgradeplan import ClusterPlan, check_target, plan_cluster
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import MaintenanceWindow, Rollout, Strategy, build_rollout

Placer = Callable[[FleetSnapshot, Sequence[str]], Mapping[str, tuple[str, ...]]]
"""(end state, workload keys) -> per workload, the clusters placement chose there (``()`` when
it finds none). Asked once with every workload at once, so no free capacity is promised twice."""


@dataclass(frozen=True, slots=True)
class FindingVerdict:
    """A compatibility finding and what the calibration does about it."""

    finding: Finding
    # "block" | "move" | "warn" (reported, the step goes on: an early warning, a quiet usage,
    # or an observed finding the strategy turned to a warning) | "none" (already broken before
    # the upgrade, or on a cluster that takes no step)
    action: str
    destination: str | None = None


@dataclass(frozen=True, slots=True)
class CalibrationPlan:
    """The whole preview: plans per cluster, findings with verdicts, and the rollout.

    ``unchecked`` names the clusters whose path could not be planned (a missing minor, a current
    skew violation, ...): no planned version exists, so no compatibility check ran for them.
    They are kept apart because "no finding" on such a cluster means "not looked at", never
    "clean" -- ``calibrator check`` must say so instead of reporting the fleet compatible.
    ``partially_observed`` is the same for observation: (cluster, reason) of every planned
    cluster whose live look was incomplete (``WorkloadClusterStatus.observation_partial``),
    where "no observed finding" does not mean no client uses a removed API.
    """

    target: KubeVersion
    clusters: tuple[ClusterPlan, ...]
    findings: tuple[FindingVerdict, ...]
    rollout: Rollout
    unchecked: tuple[str, ...] = ()
    partially_observed: tuple[tuple[str, str], ...] = ()

    def plan_for(self, name: str) -> ClusterPlan:
        """The plan of one cluster (InputError for an unknown name)."""
        for plan in self.clusters:
            if plan.cluster == name:
                return plan
        raise InputError(f"cluster {name!r} is not part of this calibration")

    def window_for(self, name: str) -> MaintenanceWindow | None:
        """The maintenance window a planned cluster waits for (None = any time)."""
        return self.rollout.windows.get(name)

    def finding_actions(self) -> dict[str, int]:
        """How many findings the calibration blocks on, moves, warns about, or leaves."""
        counts: dict[str, int] = {}
        for verdict in self.findings:
            counts[verdict.action] = counts.get(verdict.action, 0) + 1
        return dict(sorted(counts.items()))

    def left_behind(self) -> tuple[str, ...]:
        """Clusters this calibration will not bring to the target: blocked or in no stage.

        A plan that leaves any cluster behind is a partial answer to "how does the fleet reach
        the target", which the CLI reports with the partial-result exit status.
        """
        out = [p.cluster for p in self.clusters if p.blocked]
        out.extend(self.rollout.unassigned)
        return tuple(out)


def select_clusters(
    snapshot: FleetSnapshot,
    selector: LabelSelector | None,
    scope: frozenset[str] | None = None,
) -> tuple[Cluster, ...]:
    """Clusters the calibration covers; an empty selection is bad input, not an empty run.

    ``scope`` (names) narrows further: a continuous calibration covers the clusters that broke
    its policy. A scoped cluster deleted since is simply absent; if none is left, that is bad
    input like an empty selector.
    """
    chosen = snapshot.clusters
    if selector is not None and not selector.is_empty():
        chosen = tuple(c for c in chosen if selector.matches(c.labels))
        if not chosen:
            raise InputError(f"selector {selector.describe()} matches no cluster")
    if scope is not None:
        chosen = tuple(c for c in chosen if c.name in scope)
        if not chosen:
            raise InputError(f"none of the {len(scope)} scoped cluster(s) is in the fleet")
    return chosen


def at_version(cluster: Cluster, version: KubeVersion) -> Cluster:
    """The cluster with control plane and every pool at ``version`` (a planned end state)."""
    return replace(
        cluster,
        control_plane=ControlPlaneState(version, cluster.control_plane.replicas),
        machine_deployments=tuple(
            MachineDeploymentState(md.name, version, md.replicas)
            for md in cluster.machine_deployments
        ),
    )


def plan_calibration(
    snapshot: FleetSnapshot,
    target: KubeVersion,
    strategy: Strategy,
    selector: LabelSelector | None,
    scope: frozenset[str] | None,
    *,
    placer: Placer,
) -> CalibrationPlan:
    """Plan a calibration of the selected (and scoped) clusters to ``target``.

    ``placer`` is asked once, about every workload a step would break, where it could run in
    the end state; ``orchestrator.planning.plan_calibration`` passes the placement engine.
    """
    check_target(target, snapshot.available_versions)
    clusters = select_clusters(snapshot, selector, scope)
    plans = {
        c.name: plan_cluster(
            c, target, snapshot.available_versions, allow_prereleases=strategy.allow_prereleases
        )
        for c in clusters
    }
    planned = {name: p.control_plane_steps for name, p in plans.items() if not p.blocked}
    end_state = replace_cluster(
        snapshot,
        [
            at_version(c, target)
            for c in clusters
            if c.name in planned and plans[c.name].needs_upgrade
        ],
    )
    findings = [
        f
        for f in check_fleet(
            snapshot,
            {n: planned.get(n, ()) for n in plans},
            {n: p.worker_steps for n, p in plans.items() if not p.blocked},
        )
        if f.cluster in plans
    ]
    movable = sorted(
        {
            f.workload
            for f in findings
            if not f.observed and not f.already_broken and plans[f.cluster].needs_upgrade
        }
    )
    placed = placer(end_state, movable) if movable else {}
    verdicts: list[FindingVerdict] = []
    blocks: dict[str, list[str]] = {}
    for finding in findings:
        if finding.observed:
            action = observed_action(finding, plans[finding.cluster], strategy)
            verdicts.append(FindingVerdict(finding, action))
            if action == "block":
                blocks.setdefault(finding.cluster, []).append(block_reason(finding))
            continue
        if finding.already_broken or not plans[finding.cluster].needs_upgrade:
            verdicts.append(FindingVerdict(finding, "none"))
            continue
        home = next((c for c in placed[finding.workload] if c != finding.cluster), None)
        if home is None:
            verdicts.append(FindingVerdict(finding, "block"))
            blocks.setdefault(finding.cluster, []).append(block_reason(finding))
        else:
            verdicts.append(FindingVerdict(finding, "move", home))
    final = tuple(
        plans[c.name].with_block(blocks[c.name]) if c.name in blocks else plans[c.name]
        for c in clusters
    )
    runnable = [
        c for c, p in zip(clusters, final, strict=True) if p.needs_upgrade and not p.blocked
    ]
    unchecked = tuple(c.name for c in clusters if plans[c.name].blocked)
    partially_observed = tuple(
        (c.name, c.workload_cluster.observation_partial)
        for c in clusters
        if c.workload_cluster is not None and c.workload_cluster.observation_partial
    )
    return CalibrationPlan(
        target,
        final,
        tuple(verdicts),
        build_rollout(runnable, strategy),
        unchecked,
        partially_observed,
    )


def observed_action(finding: Finding, plan: ClusterPlan, strategy: Strategy) -> str:
    """What an observed or pdb finding does to its cluster's step.

    Nothing when the cluster takes no step or the API is already gone (the upgrade makes
    nothing worse); a warning for an early warning or a quiet usage (real, but no live client
    to break); otherwise the strategy's ``observedUsage`` or ``unsatisfiableDisruptionBudgets``,
    block by default. There is no "move": no declared workload stands behind an observation.
    """
    if finding.already_broken:
        return "none"
    if finding.source == "pdb":
        return strategy.unsatisfiable_disruption_budgets if plan.needs_upgrade else "none"
    if finding.early_warning or not finding.active or not plan.needs_upgrade:
        return "warn"
    return strategy.observed_usage


def block_reason(finding: Finding) -> str:
    """The blocked cluster's reason, naming the source (the workload, the apiserver, the PDB)."""
    if finding.source == "pdb":
        return f"worker rollout to {finding.version} blocked: {finding.describe()}"
    if finding.observed:
        return (
            f"step to {finding.version} would break a client still using it: {finding.describe()}"
        )
    return (
        f"step to {finding.version} would break {finding.describe()}, and placement "
        "cannot move it to another cluster"
    )
