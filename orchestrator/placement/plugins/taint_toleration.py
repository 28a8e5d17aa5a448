"""TaintToleration: Kubernetes taint semantics applied to clusters (as Karmada does).

* ``NoSchedule``: no *new* placement unless tolerated; a workload already on the cluster may stay
  (Karmada's filter skips NoSchedule for clusters already in the binding). This is what lets the
  orchestrator taint a cluster while upgrading it without kicking everything off.
* ``NoExecute``: no placement and eviction of what runs there unless tolerated. A toleration with
  ``tolerationSeconds`` holds until the taint's ``timeAdded`` plus those seconds (Karmada's
  graceful eviction counts from ``timeAdded`` too). Placement reads no clock: the run's ``now``
  (``PlacementContext.now``: workflow time, or the CLI's clock) ends tolerations that ran out;
  without it they hold, and the decision says when they will not (``eviction_times``).
* ``PreferNoSchedule``: never rejects; the score drops with each untolerated one.
* Matching, including the numeric ``Lt``/``Gt`` operators, is ``orchestrator.domain.taints``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.domain.snapshot import Cluster, Workload
from orchestrator.domain.taints import Taint, eviction_time, format_time, tolerance
from orchestrator.placement.context import PlacementContext
from orchestrator.placement.framework import (
    FITS,
    MAX_SCORE,
    ClusterFact,
    FilterResult,
    WorkloadFact,
    unfit,
)


def describe_taint(taint: Taint) -> str:
    """Kubectl's ``key=value:Effect`` form."""
    return f"{taint.key}={taint.value}:{taint.effect}"


def _blocking(ctx: PlacementContext, workload: Workload, cluster: Cluster) -> list[str]:
    """Reasons for the hard taints that keep ``workload`` off ``cluster`` at ``ctx.now``."""
    staying = cluster.name in workload.placement.clusters
    reasons: list[str] = []
    for taint in cluster.taints:
        if taint.effect == "PreferNoSchedule" or (taint.effect == "NoSchedule" and staying):
            continue
        found = tolerance(taint, workload.placement.tolerations, ctx.now)
        if found.tolerated:
            continue
        reason = f"untolerated taint {describe_taint(taint)}"
        if found.seconds is not None:
            ended = f" at {format_time(found.until)}" if found.until is not None else ""
            reason += f" (tolerationSeconds {found.seconds} ran out{ended})"
        reasons.append(reason)
    return reasons


class TaintToleration:
    """Filter on NoSchedule/NoExecute, score on PreferNoSchedule."""

    name = "TaintToleration"
    weight = 1
    cluster_facts: frozenset[ClusterFact] = frozenset({"taints"})
    workload_facts: frozenset[WorkloadFact] = frozenset({"tolerations", "current"})

    def filter(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> FilterResult:
        """Reject on untolerated hard taints; NoSchedule spares the current placement."""
        if not cluster.taints:
            return FITS
        reasons = _blocking(ctx, workload, cluster)
        return unfit(*reasons) if reasons else FITS

    def fits(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> bool:
        """``filter(...).fits``."""
        return not cluster.taints or not _blocking(ctx, workload, cluster)

    def score(self, ctx: PlacementContext, workload: Workload, cluster: Cluster) -> int:
        """100 without untolerated PreferNoSchedule taints, then 50, 33, 25, ..."""
        if not cluster.taints:
            return MAX_SCORE
        tolerations = workload.placement.tolerations
        soft = [
            t
            for t in cluster.taints
            if t.effect == "PreferNoSchedule" and not tolerance(t, tolerations).tolerated
        ]
        return MAX_SCORE // (1 + len(soft))


def eviction_times(
    ctx: PlacementContext, workload: Workload, names: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """(cluster, when) for the ``names`` a NoExecute toleration holds only for a while.

    ``when`` is an RFC 3339 time, or, for a taint without ``timeAdded``, how long after it was
    added. Cheap when no toleration sets ``tolerationSeconds`` (the common case): nothing to do.
    """
    tolerations = workload.placement.tolerations
    if not names or not any(t.toleration_seconds is not None for t in tolerations):
        return ()
    out: list[tuple[str, str]] = []
    for name in names:
        cluster = ctx.clusters[ctx.index[name]]
        found = eviction_time(cluster.taints, tolerations)
        if found is not None:
            until, seconds = found
            when = (
                format_time(until)
                if until is not None
                else f"{seconds}s after the taint was added (no timeAdded recorded)"
            )
            out.append((name, when))
    return tuple(out)
