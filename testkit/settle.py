"""A fleet as it is once its placement decisions ran: counts recorded, usage in ``allocated``.

Re-placement tests start from here: the live fleet's FleetWorkload status holds each decision's
replicas per cluster and the generation it was decided under, and each cluster's allocated
usage includes the replicas it runs. ``settled`` builds that snapshot in memory;
``write_settled`` writes it through a backend (a fleet placed before: its re-placements then
write what they move, not every workload's first decision, as the names-only start makes them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from orchestrator.domain.snapshot import FleetSnapshot, Resources, Workload
from orchestrator.kube.backend.port import (
    ClusterReplicasInfo,
    FleetBackend,
    PlacementDecisionInfo,
    PlacementWrite,
)
from orchestrator.placement import place
from orchestrator.placement.context import credited_replicas


def settled(
    snapshot: FleetSnapshot, observed: Callable[[int], bool] = lambda seq: True
) -> FleetSnapshot:
    """The fleet once one placement of every workload ran.

    ``observed(seq)`` says whether the ``seq``-th workload's counts carry its generation (1):
    without, a Weighted assignment off its weights is divided again. Unschedulable workloads
    keep what they had, as the activity leaves them.
    """
    result = place(snapshot)
    usage: dict[str, list[int]] = {c.name: [0, 0] for c in snapshot.clusters}
    workloads: list[Workload] = []
    for seq, w in enumerate(snapshot.workloads):
        decision = result.decision(w.key)
        if decision.unschedulable:
            workloads.append(w)
            continue
        for name in w.placement.clusters:
            gone = credited_replicas(w, name)
            usage[name][0] -= gone * w.requests.cpu_milli
            usage[name][1] -= gone * w.requests.memory_bytes
        for line in decision.clusters:
            usage[line.name][0] += line.replicas * w.requests.cpu_milli
            usage[line.name][1] += line.replicas * w.requests.memory_bytes
        policy = dataclasses.replace(
            w.placement,
            clusters=tuple(line.name for line in decision.clusters),
            current_replicas=tuple(line.replicas for line in decision.clusters),
            observed_generation=1 if observed(seq) else None,
        )
        workloads.append(dataclasses.replace(w, placement=policy, generation=1))
    clusters = tuple(
        dataclasses.replace(
            c,
            allocated=Resources(
                max(0, c.allocated.cpu_milli + usage[c.name][0]),
                max(0, c.allocated.memory_bytes + usage[c.name][1]),
            ),
        )
        if c.capacity is not None
        else c
        for c in snapshot.clusters
    )
    return dataclasses.replace(snapshot, clusters=clusters, workloads=tuple(workloads))


async def write_settled(backend: FleetBackend, reason: str) -> PlacementWrite:
    """Place the whole fleet as the backend reads it and write every schedulable decision.

    Each is guarded by the workload version the read gave (``write_placement``'s
    compare-and-swap).
    """
    inventory = await backend.inventory()
    decisions = [
        PlacementDecisionInfo(
            d.workload,
            tuple(ClusterReplicasInfo(c.name, c.replicas) for c in d.clusters),
            reason=reason,
            resource_version=inventory.workload_versions.get(d.workload, ""),
        )
        for d in place(inventory.snapshot).decisions
        if not d.unschedulable
    ]
    return await backend.write_placement(decisions, reason)
