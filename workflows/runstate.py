"""FleetCalibration's derived run state: pure rules over what the workflow holds.

These rules are the calibration's failure model. They decide when a run stops starting clusters,
when it halts for good, and which phase it reports. Keeping them apart from the workflow class
lets them be tested as tables, without a Temporal server or a sandbox, and keeps the workflow
class to orchestration. Pure: no clock, no I/O, no SDK; the workflow passes its own state in.

The budget counts clusters that failed *and* clusters waiting for an operator's decision: a
waiting cluster is a failure until someone retries it, so it must stop new clusters from
starting just as a failure does.
"""

from __future__ import annotations

from collections.abc import Mapping

from workflows.model import (
    FAILED_CLUSTER_STATES,
    FINAL_CLUSTER_STATES,
    ClusterProgress,
    ClusterState,
    Phase,
)


def failures(counts: Mapping[str, int]) -> int:
    """Clusters that count against the failure budget (failed or waiting for a decision)."""
    return sum(counts.get(state.value, 0) for state in FAILED_CLUSTER_STATES)


def over_budget(counts: Mapping[str, int], max_failures: int) -> bool:
    """More failures than the strategy allows: no new cluster may start."""
    return failures(counts) > max_failures


def started(clusters: Mapping[str, ClusterProgress], name: str) -> bool:
    """Whether ``name``'s child workflow was started (loaded members are not)."""
    current = clusters.get(name)
    return current is not None and current.started_at is not None


def active(clusters: Mapping[str, ClusterProgress]) -> list[str]:
    """Clusters whose child runs, possibly only waiting for a decision."""
    return [
        n
        for n, c in clusters.items()
        if c.started_at is not None and c.state not in FINAL_CLUSTER_STATES
    ]


def stepping(clusters: Mapping[str, ClusterProgress]) -> bool:
    """A child is doing work, not just waiting for a decision."""
    return any(clusters[n].state != ClusterState.WAITING_FOR_DECISION for n in active(clusters))


def dead_halt(
    clusters: Mapping[str, ClusterProgress], counts: Mapping[str, int], max_failures: int
) -> bool:
    """Over budget with nothing left that could bring the run back within it.

    A cluster waiting for a decision could be retried and succeed, and a child still stepping
    could finish; only when neither exists is the halt final and the run may end.
    """
    waiting = any(c.state == ClusterState.WAITING_FOR_DECISION for c in clusters.values())
    return over_budget(counts, max_failures) and not waiting and not stepping(clusters)


def settled(state: ClusterState) -> bool:
    """A wave need not wait for this cluster any more: final, or parked for a decision."""
    return state in FINAL_CLUSTER_STATES or state == ClusterState.WAITING_FOR_DECISION


def may_start(*, paused: bool, aborted: bool, over_budget: bool) -> bool:
    """Whether a new cluster may start now."""
    return not (paused or aborted or over_budget)


def phase(
    *,
    final: Phase | None,
    planned: bool,
    aborted: bool,
    over_budget: bool,
    paused: bool,
    activity: Phase,
) -> Phase:
    """The phase to report, most binding first.

    A final phase is never overridden; an abort outranks a halt, a halt outranks a pause (an
    operator resuming a halted run must see why it still does not start clusters), and only then
    does the phase of the current activity (running, soaking, waiting for a window ...) show.
    """
    if final is not None:
        return final
    if not planned:
        return Phase.PLANNING
    if aborted:
        return Phase.ABORTED
    if over_budget:
        return Phase.HALTED
    if paused:
        return Phase.PAUSED
    return activity
