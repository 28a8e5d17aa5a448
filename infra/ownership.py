"""Who owns a cluster's Kubernetes version: the stack creates, the calibrator moves (pure).

A stack's ``version`` is the version a cluster is *created* at, and the floor it must never be
below. Once a cluster exists, moving its version is the calibrator's job: one legal minor at a
time, gated by a taint, with compatibility checks and re-placement after every step. So before
``fleet up`` or ``fleet preview`` the stack's versions are reconciled with the live ones:

- a cluster that does not exist yet is created at the declared version;
- a live version at or above the declared one is kept (a calibration moved it forward), so the
  update is a no-op for that field instead of a downgrade that CAPI refuses half-way;
- a live version *below* the declared one is refused before anything changes: raising a version
  in the stack would make Pulumi jump the cluster in one unchecked write, so the error names the
  calibration that does it properly.

The same holds for the pool versions of clusters without a managed topology. The result is data:
the decisions to report and the rewritten ``clusters`` config the program then declares, so the
Pulumi program itself stays a plain function of its config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infra.spec import ClusterSpec, FleetSpec, FleetSpecError
from orchestrator.domain.versions import KubeVersion

Action = Literal["create", "declared", "kept"]


@dataclass(frozen=True, slots=True)
class LiveVersions:
    """One existing cluster's versions on the management cluster."""

    control_plane: KubeVersion
    pools: Mapping[str, KubeVersion]


@dataclass(frozen=True, slots=True)
class VersionDecision:
    """What ``fleet up`` declares for one version field, and why."""

    cluster: str
    pool: str | None  # None: the control plane (or the managed topology)
    declared: KubeVersion
    live: KubeVersion | None
    action: Action

    @property
    def effective(self) -> KubeVersion:
        """The version the program declares."""
        return self.live if self.action == "kept" and self.live is not None else self.declared

    def describe(self) -> str:
        """``pulumi-prod-us: v1.35.0 live kept (stack declares v1.34.0, the minimum)``."""
        what = self.cluster if self.pool is None else f"{self.cluster}/{self.pool}"
        if self.action == "create":
            return f"{what}: created at {self.declared}"
        if self.action == "declared":
            return f"{what}: {self.declared} (live and declared agree)"
        return (
            f"{what}: {self.live} live kept (the stack declares {self.declared}, its minimum; "
            "later versions are the calibrator's)"
        )


def _decide(
    cluster: str, pool: str | None, declared: KubeVersion, live: KubeVersion | None
) -> VersionDecision:
    if live is None:
        return VersionDecision(cluster, pool, declared, None, "create")
    if live < declared:
        what = f"cluster {cluster}" if pool is None else f"pool {pool} of cluster {cluster}"
        raise FleetSpecError(
            f"{what} runs {live} and the stack declares {declared}: an existing cluster's "
            "version is moved by the calibrator, one checked step at a time, not by fleet up "
            f"(calibrator calibrate --target {declared} -l <labels of {cluster}>); or declare "
            f"{live} in the stack. Nothing was changed."
        )
    return VersionDecision(
        cluster, pool, declared, live, "declared" if live == declared else "kept"
    )


def reconcile(spec: FleetSpec, live: Mapping[str, LiveVersions]) -> tuple[VersionDecision, ...]:
    """One decision per version field of every declared cluster; FleetSpecError on a refusal.

    Every cluster is checked before anything is returned, so a refusal changes nothing.
    """
    decisions: list[VersionDecision] = []
    for cluster in spec.clusters:
        now = live.get(cluster.name)
        decisions.append(
            _decide(cluster.name, None, cluster.version, None if now is None else now.control_plane)
        )
        if cluster.topology:
            continue  # a managed topology's pools follow its version
        for md in cluster.machine_deployments:
            decisions.append(
                _decide(
                    cluster.name,
                    md.name,
                    cluster.worker_version(md),
                    None if now is None else now.pools.get(md.name),
                )
            )
    return tuple(decisions)


def _pool_entry(raw: Mapping[str, Any], version: KubeVersion, pinned: bool) -> dict[str, Any]:
    out = dict(raw)
    if pinned or "version" in out:
        out["version"] = str(version)
    return out


def effective_clusters(
    raw_clusters: Sequence[Mapping[str, Any]],
    spec_clusters: Sequence[ClusterSpec],
    decisions: Sequence[VersionDecision],
) -> list[dict[str, Any]]:
    """The stack's ``clusters`` config with each kept live version in place of the declared one.

    Only version fields change, and a pool gets an explicit version only when a kept live one
    differs from what it would inherit; everything else stays as the user wrote it.
    """
    kept = {(d.cluster, d.pool): d.effective for d in decisions if d.action == "kept"}
    out: list[dict[str, Any]] = []
    for raw, spec in zip(raw_clusters, spec_clusters, strict=True):
        entry = dict(raw)
        control = kept.get((spec.name, None), spec.version)
        entry["version"] = str(control)
        if not spec.topology:
            pools = []
            for md_raw, md in zip(
                raw.get("machineDeployments") or [{"name": "md-0"}],
                spec.machine_deployments,
                strict=True,
            ):
                version = kept.get((spec.name, md.name), spec.worker_version(md))
                pools.append(_pool_entry(md_raw, version, version != control))
            entry["machineDeployments"] = pools
        out.append(entry)
    return out
