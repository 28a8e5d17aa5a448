"""Drift report (pure): how far each cluster is from the target and from the newest version.

``today`` is a parameter (support status needs a date and pure code has no clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

from orchestrator.domain.skew import state_violations
from orchestrator.domain.snapshot import Cluster, FleetSnapshot
from orchestrator.domain.support import SupportStatus, support_status
from orchestrator.domain.upgradeplan import min_worker_version
from orchestrator.domain.versions import KubeVersion, newest

Status = Literal["current", "behind", "ahead", "skewed", "end-of-life"]


@dataclass(frozen=True, slots=True)
class ClusterDrift:
    """One cluster's distance from where the fleet should be."""

    cluster: Cluster
    minors_behind_target: int | None
    minors_behind_newest: int | None
    worker_lag: int
    skew_violations: tuple[str, ...]
    support: SupportStatus
    status: Status


@dataclass(frozen=True, slots=True)
class DriftReport:
    """Per-cluster drift plus fleet-wide counts."""

    target: KubeVersion | None
    newest: KubeVersion | None
    as_of: date
    clusters: tuple[ClusterDrift, ...]

    def counts(self) -> dict[str, int]:
        """Clusters per status, every status present (zeros included) for stable JSON."""
        out = {s: 0 for s in ("current", "behind", "ahead", "skewed", "end-of-life")}
        for c in self.clusters:
            out[c.status] += 1
        return out


def cluster_drift(
    cluster: Cluster, target: KubeVersion | None, newest_version: KubeVersion | None, today: date
) -> ClusterDrift:
    """Drift of one cluster; the status names the most urgent problem first."""
    cp = cluster.control_plane.version
    oldest = min_worker_version(cluster.machine_deployments, cp)
    violations = tuple(
        v.message
        for v in state_violations(cp, [(m.name, m.version) for m in cluster.machine_deployments])
    )
    support = support_status(oldest if oldest is not None and oldest < cp else cp, today)
    behind_target = None if target is None else target.minor_distance(cp)
    behind_newest = None if newest_version is None else newest_version.minor_distance(cp)
    goal = target or newest_version
    status: Status
    if violations:
        status = "skewed"
    elif support.state == "end-of-life":
        status = "end-of-life"
    elif goal is not None and goal < cp:
        status = "ahead"
    elif goal is not None and (cp != goal or (oldest is not None and oldest != goal)):
        status = "behind"
    else:
        status = "current"
    return ClusterDrift(
        cluster=cluster,
        minors_behind_target=behind_target,
        minors_behind_newest=behind_newest,
        worker_lag=0 if oldest is None else cp.minor_distance(oldest),
        skew_violations=violations,
        support=support,
        status=status,
    )


def drift_report(snapshot: FleetSnapshot, target: KubeVersion | None, today: date) -> DriftReport:
    """Drift of every cluster in snapshot order."""
    newest_version = newest(snapshot.available_versions)
    return DriftReport(
        target,
        newest_version,
        today,
        tuple(cluster_drift(c, target, newest_version, today) for c in snapshot.clusters),
    )
