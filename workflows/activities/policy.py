"""Activities that evaluate rules against the fleet: the upgrade policy and API compatibility."""

from __future__ import annotations

from temporalio import activity

from orchestrator.domain.compatibility import cluster_findings
from orchestrator.domain.errors import InputError
from orchestrator.domain.policy import PolicyEvaluation, policy_from_mapping
from orchestrator.domain.policy import evaluate_policy as evaluate_fleet_policy
from orchestrator.domain.versions import KubeVersion
from workflows.activities.base import ActivitiesBase
from workflows.activities.errors import invalid_input
from workflows.activities.plan_payload import encode_scope
from workflows.activities.usage_gate import observed_after_step
from workflows.model import (
    SAMPLE_LIMIT,
    CalibrationGroup,
    CheckInput,
    CheckResult,
    EvaluateInput,
    PolicyReport,
    ScopeRef,
    ViolationInfo,
)

_STATE_RANK = {"due": 0, "busy": 1, "deferred": 2, "unfixable": 3}


def _violation_sample(result: PolicyEvaluation) -> tuple[ViolationInfo, ...]:
    """At most SAMPLE_LIMIT violators, those a calibration starts for first, then by name."""
    ordered = sorted(result.violating, key=lambda v: (_STATE_RANK[v.state()], v.name))
    return tuple(
        ViolationInfo(
            cluster=v.name,
            state=v.state(),
            goal="" if v.goal is None else str(v.goal),
            rules=tuple(x.rule for x in v.violations),
            message="; ".join(
                [x.message for x in v.violations]
                + ([f"unfixable: {v.unfixable}"] if v.unfixable else [])
                + ([f"being upgraded by {v.busy}"] if v.busy else [])
            ),
            opens_at=v.opens_at,
        )
        for v in ordered[:SAMPLE_LIMIT]
    )


class PolicyActivities(ActivitiesBase):
    """Evaluate the fleet policy; check a cluster's workloads against a version."""

    @activity.defn(name="evaluate_policy")
    async def evaluate_policy(self, input: EvaluateInput) -> PolicyReport:
        """Inventory the fleet, evaluate the policy, store each calibration's scope by digest.

        Only the bounded report enters history (counts, one reference per goal version, a
        sample of violators), never the inventory or the full list of violating clusters.
        """
        try:
            policy = policy_from_mapping(input.policy)
            inv = await self._backend.inventory()
            result = evaluate_fleet_policy(inv.snapshot, policy, input.now)
        except InputError as err:
            invalid_input(str(err))
        groups = []
        for goal, names in result.due_groups():
            digest, data = encode_scope(names, activity.info().workflow_id or "")
            await self._backend.put_blob(digest, data)
            groups.append(
                CalibrationGroup(str(goal), ScopeRef(digest, len(names)), names[:SAMPLE_LIMIT])
            )
        return PolicyReport(
            policy=policy.describe(),
            newest=str(result.newest),
            checked=result.checked,
            violating=len(result.violating),
            counts=result.counts(),
            groups=tuple(groups),
            sample=_violation_sample(result),
            next_opening=result.next_opening(),
            skipped=len(inv.skipped),
        )

    @activity.defn(name="check_compat")
    async def check_compat(self, input: CheckInput) -> CheckResult:
        """Workloads still placed on the cluster that use an API the version no longer serves.

        The cluster itself is looked at again too (``usage_gate.observed_after_step``): the
        look is recorded on the Cluster, and what it saw of removed APIs is reported.
        """
        try:
            inv = await self._backend.inventory((input.cluster.name,))
            cluster = inv.snapshot.cluster(input.cluster.name)
            version = KubeVersion.parse(input.version)
        except InputError as err:
            invalid_input(str(err))
        here = [w for w in inv.snapshot.workloads if cluster.name in w.placement.clusters]
        findings = cluster_findings(cluster, (version,), here)
        observed = await observed_after_step(self._backend, input.cluster, version)
        return CheckResult(tuple(findings), observed)
