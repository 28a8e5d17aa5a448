"""While a cluster is gated, what ``affected_workloads`` leaves out does not depend on it.

A gated cluster's step places only the workloads it hosts, those that tolerate the gate and those
whose decision the cluster may still shape (``_gate_may_move``). The others are left out on the
argument that they cannot be given the cluster and did not take it while it was open. Checked on
settled generated fleets: for each of a sample of clusters, the whole fleet is placed once with
the cluster gated and once with it open, and every workload left out that the cluster's
affinity takes must decide the same either way (or be unschedulable while gated, which keeps
its decision: the activity writes no unschedulable decision). What changes for them for other
reasons (room freed elsewhere) is not the step's doing. The placement after the gate comes off
leaves out the same workloads but those that tolerate the gate: compared with the cluster closed
to every workload, what it leaves out decides the same too.
"""

from __future__ import annotations

import dataclasses

import pytest

from orchestrator.domain.snapshot import Cluster, FleetSnapshot, replace_cluster
from orchestrator.domain.taints import UPGRADING_TAINT_KEY, Taint, with_taint
from orchestrator.placement import place
from testkit.fleetgen import generate_fleet
from testkit.settle import settled
from workflows.activities.placement import affected_workloads

GATE = Taint(key=UPGRADING_TAINT_KEY, value="", effect="NoSchedule")


def _takes(cluster: Cluster, snapshot: FleetSnapshot) -> set[str]:
    """Workloads whose affinity takes the cluster (what a step placed before the gate rule)."""
    return {
        w.key
        for w in snapshot.workloads
        if not w.placement.affinities or any(a.matches(cluster) for a in w.placement.affinities)
    }


def _left_out_decide_the_same(seed: int, closing: Taint, *, rule_closed: bool) -> int:
    """Per fifth cluster: what ``affected_workloads`` leaves out (the cluster closed by
    ``closing`` when ``rule_closed``, else open) decides the same closed and open; how many."""
    fleet = settled(generate_fleet(80, 800, seed=seed))
    left_out = 0
    for cluster in fleet.clusters[::5]:
        opened = dataclasses.replace(
            cluster, taints=tuple(t for t in cluster.taints if t.key != UPGRADING_TAINT_KEY)
        )
        closed = dataclasses.replace(opened, taints=with_taint(opened.taints, closing))
        open_fleet = replace_cluster(fleet, [opened])
        closed_fleet = replace_cluster(fleet, [closed])
        ruled = (closed_fleet, closed) if rule_closed else (open_fleet, opened)
        placed = {w.key for w in affected_workloads(*ruled)}
        skipped = _takes(opened, fleet) - placed
        left_out += len(skipped)
        with_closed, without = place(closed_fleet), place(open_fleet)
        for key in sorted(skipped):
            a, b = with_closed.decision(key), without.decision(key)
            assert a.unschedulable or a.replicas == b.replicas, (cluster.name, key, a, b)
    return left_out


@pytest.mark.parametrize("seed", [1, 4, 5])
def test_what_a_gated_step_leaves_out_decides_the_same_with_the_cluster_open(seed: int) -> None:
    left_out = _left_out_decide_the_same(seed, GATE, rule_closed=True)
    assert left_out > 1_500, left_out  # the rule spares most of what the affinity takes


CLOSED = Taint(key="example.com/closed", value="", effect="NoSchedule")  # no workload tolerates


@pytest.mark.parametrize("seed", [1, 4, 5])
def test_what_an_open_clusters_placement_leaves_out_decides_the_same_with_it_closed(
    seed: int,
) -> None:
    """The placement after the gate comes off: opening the cluster moves none it leaves out.

    Compared with the cluster closed to new work for every workload (a NoSchedule taint none
    tolerates), each workload left out decides the same: opening the cluster changes nothing
    for it.
    """
    assert _left_out_decide_the_same(seed, CLOSED, rule_closed=False) > 1_500
