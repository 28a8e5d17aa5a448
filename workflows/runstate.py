"""FleetCalibration's derived run state, as pure rules over the progress it keeps (no Temporal).

The workflow stores facts (each cluster's progress, paused, the abort reason, the plan's failure
budget); everything it *decides* from them -- may a cluster start, is the run halted, must it
stop, which phase does it show -- is a rule here. Keeping the rules out of the workflow class lets
them be table-tested without a Temporal server, and keeps them deterministic by construction:
plain data in, plain answers out, no clock, no I/O.

Failure budget (``maxFailures``): a cluster counts as failed while it waits for an operator
decision and after it gave up. Over budget, nothing new starts; the run is *halted* while a
decision could still bring it back (a cluster waits for one, or a child is still working), and
*dead* -- it must stop -- when none could.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from workflows.model import (
    FAILED_CLUSTER_STATES,
    FINAL_CLUSTER_STATES,
    ClusterProgress,
    ClusterState,
    Phase,
)


@dataclass(frozen=True)
class RunState:
    """A read-only view of one calibration run's facts; every method is a rule over them."""

    clusters: Mapping[str, ClusterProgress]
    max_failures: int = 0
    paused: bool = False
    aborted: bool = False

    def failures(self) -> int:
        """Clusters that count against the failure budget."""
        return sum(1 for c in self.clusters.values() if c.state in FAILED_CLUSTER_STATES)

    def over_budget(self) -> bool:
        """More failures than ``maxFailures`` allows."""
        return self.failures() > self.max_failures

    def started(self, name: str) -> bool:
        """The cluster's child was started (its progress has a start time)."""
        return self.clusters[name].started_at is not None

    def active(self) -> list[str]:
        """Clusters whose child runs (possibly waiting for a decision)."""
        return [
            n
            for n, c in self.clusters.items()
            if c.started_at is not None and c.state not in FINAL_CLUSTER_STATES
        ]

    def stepping(self) -> bool:
        """A child is doing work (not just waiting for a decision)."""
        return any(
            self.clusters[n].state != ClusterState.WAITING_FOR_DECISION for n in self.active()
        )

    def dead_halt(self) -> bool:
        """Over budget with nothing left that could bring the run back within it."""
        waiting = any(c.state == ClusterState.WAITING_FOR_DECISION for c in self.clusters.values())
        return self.over_budget() and not waiting and not self.stepping()

    def must_stop(self) -> bool:
        """Aborted, or halted for good: the run ends at the next boundary."""
        return self.aborted or self.dead_halt()

    def may_start(self) -> bool:
        """A new cluster or step may start: not paused, not aborted, within budget."""
        return not (self.paused or self.aborted or self.over_budget())

    def settled(self, name: str) -> bool:
        """The cluster needs nothing more from the run now (final, or waiting for an operator)."""
        state = self.clusters[name].state
        return state in FINAL_CLUSTER_STATES or state == ClusterState.WAITING_FOR_DECISION

    def phase(self, *, planned: bool, activity: Phase, final: Phase | None = None) -> Phase:
        """The phase the run shows: a final phase wins, then planning, abort, halt, pause.

        ``activity`` is what the run is doing when nothing above applies (running, soaking,
        awaiting an approval, ...).
        """
        if final is not None:
            return final
        if not planned:
            return Phase.PLANNING
        if self.aborted:
            return Phase.ABORTED
        if self.over_budget():
            return Phase.HALTED
        if self.paused:
            return Phase.PAUSED
        return activity
