"""Activities of the stored plan: plan the fleet, read its waves and cluster plans, drop it."""

from __future__ import annotations

from temporalio import activity

from orchestrator.domain.errors import InputError
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from workflows.activities.base import ActivitiesBase
from workflows.activities.errors import invalid_input
from workflows.activities.plan_payload import (
    encode_plan,
    index_plan,
    plan_fleet_of,
    planned_state,
    summarize_plan,
)
from workflows.model import (
    ClusterLocation,
    ClusterPlanInput,
    ClusterRun,
    ClusterState,
    DropBlobInput,
    LocateInput,
    PlanInput,
    PlanRef,
    PlanSummary,
    WaveInput,
    WaveMember,
    WaveSlice,
)


class PlanActivities(ActivitiesBase):
    """Plan (inventory, plan, store), and read or delete the stored plan."""

    @activity.defn(name="plan_fleet")
    async def plan_fleet(self, input: PlanInput) -> PlanSummary:
        """Inventory (unless a snapshot is given), plan, store the plan; return its summary.

        The plan can be megabytes at fleet scale, over Temporal's payload limit, so it goes to
        the backend's content-addressed store and only its digest and a bounded summary enter
        history. Same inputs give the same plan and the same digest; a retry stores it again
        harmlessly (puts are idempotent).
        """
        try:
            if input.snapshot is None:
                inv = await self._backend.inventory()
                snapshot, namespaces = inv.snapshot, dict(inv.namespaces)
                skipped = dict(inv.skipped)
                for name, reason in sorted(skipped.items()):
                    activity.logger.warning("cluster %s skipped: %s", name, reason)
            else:
                skipped = {}
                snapshot = snapshot_from_mapping(input.snapshot)
                namespaces = dict(input.namespaces)
            scope = None if input.scope is None else await self._scope(input.scope)
            plan = plan_fleet_of(input, snapshot, namespaces, scope)
        except InputError as err:
            invalid_input(str(err))
        digest, data = encode_plan(plan)
        await self._backend.put_blob(digest, data)
        self._remember(digest, index_plan(plan))
        return summarize_plan(plan, PlanRef(digest, len(data)), skipped)

    @activity.defn(name="drop_blob")
    async def drop_blob(self, input: DropBlobInput) -> None:
        """Delete a stored plan or scope its owner is done with (gone already is fine).

        Plans and scopes are megabytes at fleet scale and a schedule stores new ones every tick;
        without this they would pile up in the management cluster's etcd for ever.
        """
        self._plans.pop(input.digest, None)
        await self._backend.delete_blob(input.digest)

    @activity.defn(name="wave")
    async def wave(self, input: WaveInput) -> WaveSlice:
        """Members ``offset`` .. ``offset + limit`` of one wave of a stored plan."""
        loaded = await self._load(input.plan)
        try:
            names = loaded.plan.plan.rollout.stages[input.stage].waves()[input.wave]
        except IndexError:
            invalid_input(
                f"plan {input.plan.digest[:12]} has no stage {input.stage} wave {input.wave}"
            )
        members = []
        for name in names[input.offset : input.offset + max(1, input.limit)]:
            cplan = loaded.clusters[name]
            members.append(
                WaveMember(
                    name,
                    str(cplan.plan.control_plane_from),
                    tuple(s.describe() for s in cplan.plan.steps),
                    cplan.window,
                    cplan.step_ids,
                )
            )
        return WaveSlice(tuple(members), len(names))

    @activity.defn(name="cluster_plan")
    async def cluster_plan(self, input: ClusterPlanInput) -> ClusterRun:
        """One cluster's plan, read by its ClusterUpgrade child from the stored plan."""
        loaded = await self._load(input.plan)
        cplan = loaded.clusters.get(input.cluster)
        if cplan is None:
            invalid_input(f"cluster {input.cluster!r} is not part of plan {input.plan.digest[:12]}")
        return cplan

    @activity.defn(name="locate_cluster")
    async def locate_cluster(self, input: LocateInput) -> ClusterLocation:
        """Stage and wave of a cluster in a stored plan, or why it has none."""
        loaded = await self._load(input.plan)
        cplan = loaded.clusters.get(input.cluster)
        if cplan is None:
            return ClusterLocation(False)
        position = loaded.position.get(input.cluster)
        state = planned_state(cplan.plan, staged=position is not None)
        if position is not None and state == ClusterState.PENDING:
            return ClusterLocation(True, position[0], position[1], state.value)
        return ClusterLocation(True, state=state.value)
