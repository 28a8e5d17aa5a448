"""Kubernetes version-skew policy (pure): validate a cluster state and every state of a plan.

Rules (the Kubernetes version-skew policy, as published in the Kubernetes documentation):
the control plane moves one minor at a time and never down; kubelets are never newer than the
API server and at most 3 minors older (2 for kubelets older than 1.25). Messages name the
component, both versions and the limit, because an operator reads them in a failed plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.domain.versions import KubeVersion


@dataclass(frozen=True, slots=True)
class SkewViolation:
    """One broken rule, with the pool it concerns ("" for the control plane)."""

    pool: str
    message: str


def max_kubelet_lag(kubelet: KubeVersion) -> int:
    """Minors a kubelet may trail its API server: 3 since 1.25, 2 before."""
    return 3 if kubelet.minor_key >= (1, 25) else 2


def worker_violation(
    pool: str, kubelet: KubeVersion, apiserver: KubeVersion
) -> SkewViolation | None:
    """The kubelet rule for one worker pool against one API server version."""
    if kubelet.major != apiserver.major:
        return SkewViolation(
            pool,
            f"workers {pool} at {kubelet} and control plane at {apiserver} differ in major version",
        )
    if kubelet.minor > apiserver.minor:
        return SkewViolation(
            pool,
            f"workers {pool} at {kubelet} are newer than the control plane at {apiserver} "
            "(kubelets must never be newer than the API server)",
        )
    lag = apiserver.minor - kubelet.minor
    limit = max_kubelet_lag(kubelet)
    if lag > limit:
        return SkewViolation(
            pool,
            f"workers {pool} at {kubelet} are {lag} minors behind the control plane at {apiserver} "
            f"(kubelets may trail by at most {limit})",
        )
    return None


def state_violations(
    control_plane: KubeVersion, workers: Sequence[tuple[str, KubeVersion]]
) -> list[SkewViolation]:
    """Every rule a (control plane, worker pools) state breaks."""
    out: list[SkewViolation] = []
    for pool, version in workers:
        violation = worker_violation(pool, version, control_plane)
        if violation is not None:
            out.append(violation)
    return out


def control_plane_step_violation(current: KubeVersion, target: KubeVersion) -> str | None:
    """Why the control plane cannot go from ``current`` to ``target`` in one step, or None."""
    if target.major != current.major:
        return f"control plane cannot change major version ({current} -> {target})"
    if target < current:
        return f"control plane cannot go from {current} to {target}: downgrades are not supported"
    if target == current:
        return f"control plane is already at {current}: a step must change the version"
    if target.minor - current.minor > 1:
        path = " -> ".join(f"1.{m}" for m in range(current.minor, target.minor + 1))
        return (
            f"control plane cannot go from minor {current.minor} to {target.minor} in one step: "
            f"it must visit every minor ({path})"
        )
    return None


def worker_step_violation(current: KubeVersion, target: KubeVersion) -> str | None:
    """Why workers cannot go from ``current`` to ``target`` in one step, or None.

    A MachineDeployment rollout replaces machines, so workers may skip minors, but never more
    than the kubelet skew window: a bigger jump means the old kubelets were out of policy.
    """
    if target.major != current.major:
        return f"workers cannot change major version ({current} -> {target})"
    if target < current:
        return f"workers cannot go from {current} to {target}: downgrades are not supported"
    limit = max_kubelet_lag(current)
    if target.minor - current.minor > limit:
        return (
            f"workers cannot go from minor {current.minor} ({current}) to minor {target.minor} "
            f"({target}): an intermediate step is required by the {limit}-minor kubelet skew"
        )
    return None
