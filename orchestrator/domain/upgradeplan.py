"""Per-cluster upgrade plans, as cluster-api computes chained and efficient upgrades (pure).

Strategy (cluster-api "chained and efficient upgrades", CAPI v1.12+):
- the control plane visits every minor between its version and the target, using the newest
  available patch of each intermediate minor and the target itself for the last minor;
- workers step only when the kubelet skew would otherwise break (every 3 minors), and finally to
  the target, so each MachineDeployment rolls as few times as possible;
- build-metadata twins (``v1.32.0+a`` / ``v1.32.0+b``) keep the order of the version list;
- pre-releases are not releases: one is used only as the target itself, or as an intermediate
  step when the strategy opts in (``allowPrereleases: true``). Otherwise a GA patch of the minor is
  used even when an ``-rc`` of a newer patch is listed, and a minor with only pre-releases blocks.

Steps run in one canonical order: a worker step to version V runs as soon as the control plane
has reached V. ``validate_plan`` replays that order and checks every intermediate state against the
skew policy, for our plans and for plans users hand us alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from orchestrator.domain.errors import InputError
from orchestrator.domain.skew import (
    control_plane_step_violation,
    max_kubelet_lag,
    state_violations,
    worker_step_violation,
)
from orchestrator.domain.snapshot import Cluster, MachineDeploymentState
from orchestrator.domain.versions import KubeVersion, sort_versions

Component = Literal["controlPlane", "workers"]


class DowngradeError(InputError):
    """The target is older than what a cluster already runs."""


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One patch the orchestrator applies: the control plane, or a set of MachineDeployments.

    A step carries the versions it starts from, because they are part of the plan, not of its
    execution: ``from_version`` is the control plane's version before a control-plane step, or the
    oldest moving pool's before a worker step; ``pools_from`` pairs each moving pool with its
    version before the step (the workflow's idempotency key for a patch). Deriving them again
    elsewhere is how a preview and a run drift apart.
    """

    component: Component
    version: KubeVersion
    from_version: KubeVersion
    pools: tuple[str, ...] = ()
    pools_from: tuple[tuple[str, KubeVersion], ...] = ()

    def describe(self) -> str:
        """``controlPlane -> v1.32.0`` / ``workers md-0,md-1 -> v1.33.1``."""
        return describe_step(self.component, str(self.version), self.pools)


def describe_step(component: Component, version: str, pools: Sequence[str]) -> str:
    """How a step reads everywhere (preview, progress, history): one spelling for both models."""
    if component == "controlPlane":
        return f"controlPlane -> {version}"
    return f"workers {','.join(pools)} -> {version}"


def step_id(calibration_id: str, cluster: str, index: int, step: PlanStep) -> str:
    """Stable id of a planned step: ``<calibration>/<cluster>/<index>-<component>-<version>``.

    The same plan gives the same ids on every retry and replay; the id travels with every
    activity of the step, so the backend recognises a step it already applied.
    """
    return f"{calibration_id}/{cluster}/{index:02d}-{step.component}-{step.version}"


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """Everything needed to upgrade one cluster, or why it must not be upgraded.

    ``pools_from`` is every MachineDeployment with its version before the plan and ``topology``
    whether the cluster is managed through a ClusterClass topology: the state the plan starts
    from, which the run's preflight checks. They belong to the plan so the workflow payload copies
    them instead of reading the snapshot again.
    """

    cluster: str
    target: KubeVersion
    control_plane_from: KubeVersion
    control_plane_steps: tuple[KubeVersion, ...]
    workers_from: KubeVersion | None
    worker_steps: tuple[KubeVersion, ...]
    steps: tuple[PlanStep, ...]
    blocked: bool = False
    reasons: tuple[str, ...] = ()
    pools_from: tuple[tuple[str, KubeVersion], ...] = ()
    topology: bool = True

    @property
    def needs_upgrade(self) -> bool:
        """True when at least one step is planned."""
        return bool(self.steps)

    def planned_versions(self) -> tuple[KubeVersion, ...]:
        """Control-plane versions the cluster will serve, in order (what API checks look at)."""
        return self.control_plane_steps

    def with_block(self, reasons: Sequence[str]) -> ClusterPlan:
        """The same plan marked blocked with extra reasons (steps kept for display)."""
        return replace(self, blocked=True, reasons=(*self.reasons, *reasons))

    def step_ids(self, calibration_id: str) -> tuple[str, ...]:
        """The ids of the steps in execution order (see ``step_id``)."""
        return tuple(step_id(calibration_id, self.cluster, i, s) for i, s in enumerate(self.steps))


# ------------------------------------------------------------------------------------------
# Strategies (each small and table-tested)
# ------------------------------------------------------------------------------------------


def _list_index(version: KubeVersion, ordered: Sequence[KubeVersion]) -> int | None:
    for i, candidate in enumerate(ordered):
        if candidate == version:
            return i
    return None


def is_newer(candidate: KubeVersion, current: KubeVersion, ordered: Sequence[KubeVersion]) -> bool:
    """Precedence order, with build-metadata twins ordered by their position in ``ordered``."""
    if not candidate.same_precedence(current):
        return current < candidate
    if candidate == current:
        return False
    a, b = _list_index(candidate, ordered), _list_index(current, ordered)
    # Twins we cannot place in the list: treat a different build as newer (what CAPI tolerates).
    return a is None or b is None or a > b


def control_plane_steps(
    current: KubeVersion,
    target: KubeVersion,
    available: Sequence[KubeVersion],
    *,
    allow_prereleases: bool = False,
) -> tuple[tuple[KubeVersion, ...], str | None]:
    """The control plane's versions from ``current`` (excluded) to ``target`` (included).

    Returns (steps, None) or ((), reason) when a minor has no usable version: the control plane
    must not skip a minor, so a gap blocks the cluster instead of producing an illegal plan. An
    intermediate minor's pre-releases are usable only with ``allow_prereleases``; a minor that
    has nothing else blocks with a reason naming them and the opt-in.
    """
    ordered = sort_versions(available)
    if target == current:
        return (), None
    if target.major != current.major:
        return (), f"cannot change major version from {current} to {target}"
    if not is_newer(target, current, ordered):
        raise DowngradeError(
            f"target {target} is older than the control plane at {current}; downgrades are not supported"
        )
    steps: list[KubeVersion] = []
    for minor in range(current.minor + 1, target.minor):
        in_minor = [v for v in ordered if v.major == current.major and v.minor == minor]
        candidates = [v for v in in_minor if allow_prereleases or not v.is_prerelease]
        if not candidates and in_minor:
            only = ", ".join(str(v) for v in in_minor)
            return (), (
                f"no release for minor {current.major}.{minor} between {current} and {target}, "
                f"only pre-release(s) {only}; the control plane cannot skip a minor, and a "
                "pre-release is an intermediate step only with allowPrereleases: true in the "
                "strategy"
            )
        if not candidates:
            known = ", ".join(str(v) for v in ordered) or "none"
            return (), (
                f"no available version for minor {current.major}.{minor} between {current} and "
                f"{target}; the control plane cannot skip a minor (availableVersions: {known})"
            )
        steps.append(candidates[-1])
    steps.append(target)
    return tuple(steps), None


def min_worker_version(
    pools: Sequence[MachineDeploymentState], control_plane: KubeVersion
) -> KubeVersion | None:
    """The oldest worker version; an unorderable build twin counts as older unless it is the CP's."""
    oldest: KubeVersion | None = None
    for pool in pools:
        v = pool.version
        if (
            oldest is None
            or v < oldest
            or (v.same_precedence(oldest) and v not in (oldest, control_plane))
        ):
            oldest = v
    return oldest


def worker_steps(
    workers_from: KubeVersion | None,
    control_plane_from: KubeVersion,
    cp_steps: Sequence[KubeVersion],
    target: KubeVersion,
) -> tuple[KubeVersion, ...]:
    """Fewest worker steps that keep the kubelet skew legal while the control plane climbs.

    Walk the control plane's path; before it reaches a minor the workers could no longer trail,
    the workers first move to the control plane's version at that moment. The last step is the
    target. Equivalent to cluster-api's "a step every 3 minors" for kubelets >= 1.25.
    """
    if workers_from is None or workers_from == target:
        return ()
    out: list[KubeVersion] = []
    workers = workers_from
    cp = control_plane_from
    for nxt in cp_steps:
        if nxt.minor - workers.minor > max_kubelet_lag(workers) and cp != workers:
            out.append(cp)
            workers = cp
        cp = nxt
    if not out or out[-1] != target:
        out.append(target)
    return tuple(out)


def interleave(
    cluster: Cluster, cp_steps: Sequence[KubeVersion], w_steps: Sequence[KubeVersion]
) -> tuple[PlanStep, ...]:
    """Canonical execution order: each worker step runs as soon as the control plane reached it.

    Each worker step names only the MachineDeployments still older than its version, so a pool
    that is already ahead is never rolled twice.
    """
    out: list[PlanStep] = []
    pools = {md.name: md.version for md in cluster.machine_deployments}
    cp = cluster.control_plane.version
    pending = list(w_steps)

    def workers_step(version: KubeVersion, names: tuple[str, ...]) -> PlanStep:
        before = tuple((n, pools[n]) for n in names)
        oldest = min((v for _, v in before), default=version)
        for n in names:
            pools[n] = version
        return PlanStep("workers", version, oldest, names, before)

    def flush() -> None:
        while pending and not (cp < pending[0]):
            version = pending.pop(0)
            names = tuple(n for n, v in pools.items() if v != version and not (version < v))
            if names:
                out.append(workers_step(version, names))

    flush()
    for version in cp_steps:
        out.append(PlanStep("controlPlane", version, cp))
        cp = version
        flush()
    # Worker steps beyond the control plane can only come from a user plan; keep them visible so
    # the validator reports them instead of silently dropping them.
    for version in pending:
        out.append(workers_step(version, tuple(pools)))
    return tuple(out)


def validate_plan(
    cluster: Cluster,
    target: KubeVersion,
    cp_steps: Sequence[KubeVersion],
    w_steps: Sequence[KubeVersion],
    available: Sequence[KubeVersion] = (),
) -> list[str]:
    """Every problem of a plan (ours or a user's); an empty list means the plan is legal.

    Checks: each control-plane step is one legal move (no skipped minor, no downgrade); worker
    steps are increasing, within the kubelet skew window and never ahead of the control plane;
    both lists end at the target; every version is available (when a list is given); and every
    intermediate state of the canonical execution order satisfies the skew policy.
    """
    problems: list[str] = []
    ordered = sort_versions(available)
    listed = set(ordered)
    for version in (*cp_steps, *w_steps):
        if ordered and version not in listed:
            problems.append(f"{version} is not in availableVersions")
    current = cluster.control_plane.version
    for i, version in enumerate(cp_steps):
        why = control_plane_step_violation(current, version)
        if why is not None:
            problems.append(f"control plane step {i + 1}: {why}")
        current = version
    if current != target:
        problems.append(f"control plane plan must end at {target}, ends at {current}")
    workers_from = min_worker_version(cluster.machine_deployments, cluster.control_plane.version)
    if workers_from is None:
        if w_steps:
            problems.append("worker steps given but the cluster has no MachineDeployments")
    else:
        w = workers_from
        for i, version in enumerate(w_steps):
            if not is_newer(version, w, ordered):
                problems.append(f"worker step {i + 1}: {version} must be newer than {w}")
            else:
                why = worker_step_violation(w, version)
                if why is not None:
                    problems.append(f"worker step {i + 1}: {why}")
            w = version
        if w != target:
            problems.append(f"worker plan must end at {target}, ends at {w}")
    if problems:
        return problems
    # Replay the canonical order and check every state.
    pools = {md.name: md.version for md in cluster.machine_deployments}
    cp = cluster.control_plane.version
    for step in interleave(cluster, cp_steps, w_steps):
        if step.component == "controlPlane":
            cp = step.version
        else:
            for name in step.pools:
                pools[name] = step.version
        for violation in state_violations(cp, sorted(pools.items())):
            problems.append(f"after {step.describe()}: {violation.message}")
    return problems


def plan_cluster(
    cluster: Cluster,
    target: KubeVersion,
    available: Sequence[KubeVersion],
    *,
    allow_prereleases: bool = False,
) -> ClusterPlan:
    """The chained, efficient plan for one cluster (blocked with reasons when none is legal).

    Raises DowngradeError when the target is older than the control plane: that is bad input for
    the whole run, not a per-cluster condition. ``allow_prereleases`` is the strategy's opt-in to
    pre-release intermediate steps (the target may always be one).
    """
    cp_from = cluster.control_plane.version
    workers_from = min_worker_version(cluster.machine_deployments, cp_from)
    reasons: list[str] = []
    current_violations = state_violations(
        cp_from, [(md.name, md.version) for md in cluster.machine_deployments]
    )
    cp_steps, gap = control_plane_steps(
        cp_from, target, available, allow_prereleases=allow_prereleases
    )
    if gap is not None:
        reasons.append(gap)
    if workers_from is not None and target < workers_from:
        raise DowngradeError(
            f"target {target} is older than workers at {workers_from} in cluster {cluster.name}; "
            "downgrades are not supported"
        )
    w_steps = () if gap else worker_steps(workers_from, cp_from, cp_steps, target)
    steps = () if gap else interleave(cluster, cp_steps, w_steps)
    if current_violations:
        reasons.extend(
            f"current state violates the skew policy: {v.message}" for v in current_violations
        )
    elif not gap:
        problems = validate_plan(cluster, target, cp_steps, w_steps, available)
        reasons.extend(f"invalid plan: {p}" for p in problems)
    return ClusterPlan(
        cluster=cluster.name,
        target=target,
        control_plane_from=cp_from,
        control_plane_steps=cp_steps,
        workers_from=workers_from,
        worker_steps=w_steps,
        steps=steps,
        blocked=bool(reasons),
        reasons=tuple(reasons),
        pools_from=tuple((md.name, md.version) for md in cluster.machine_deployments),
        topology=cluster.topology,
    )


def check_target(target: KubeVersion, available: Sequence[KubeVersion]) -> None:
    """A target must be one of the fleet's available versions (ClusterClass kubernetesVersions)."""
    if available and target not in set(available):
        listed = ", ".join(str(v) for v in sort_versions(available))
        raise InputError(f"target {target} is not in availableVersions ({listed})")
