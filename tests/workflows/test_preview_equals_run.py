"""The preview is the run: `calibrator plan -o json` and the workflow's stored plan agree.

Both come from ``plan_calibration``; the workflow payload (``CalibrationRun``) is the domain plan
itself, made by ``calibration_run`` in the plan activity, and read back from its stored JSON. Before the domain rollout owned the approval gates, the conversion added the canary's
``approvalAfter`` gate on its own and the preview did not show it. This property runs both paths
on generated fleets and strategies and compares everything the run obeys: gates, stage order,
waves, concurrency, soak, windows, per-cluster steps and blocks.

Since the payload is the domain ``CalibrationPlan`` (its findings kept as counts), the comparison
also covers cluster order, stage membership, group names,
the from-versions the run starts from (control plane, oldest pool, each moving pool of a step),
step ids (the domain's ``step_ids``) and the compatibility verdicts (by action, and blocks).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.domain.durations import format_duration
from orchestrator.domain.snapshot_load import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import load_strategy
from orchestrator.planning import findings_to_json, plan_calibration, plan_to_json
from workflows.activities.plan_payload import decode_plan, encode_plan, plan_from_input
from workflows.model import PlanInput

VERSIONS = ["v1.31.13", "v1.32.9", "v1.33.5", "v1.34.2", "v1.35.0"]
ENVS = ["dev", "staging", "prod"]
ZONES = ["a", "b"]
CANARY = "calibrator.dev/canary"


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    clusters = []
    for i in range(draw(st.integers(1, 7))):
        cp = draw(st.integers(0, len(VERSIONS) - 1))
        pools = draw(st.lists(st.integers(max(0, cp - 3), cp), min_size=0, max_size=2))
        labels = {"env": draw(st.sampled_from(ENVS)), "zone": draw(st.sampled_from(ZONES))}
        if draw(st.booleans()):
            labels[CANARY] = "true"
        clusters.append(
            {
                "name": f"c{i}",
                "labels": labels,
                "controlPlane": {"version": VERSIONS[cp]},
                "machineDeployments": [
                    {"name": f"md-{j}", "version": VERSIONS[w]} for j, w in enumerate(pools)
                ],
            }
        )
    # A workload on some clusters whose API v1.32 removes: the plan blocks or moves it.
    hosts = draw(st.lists(st.sampled_from([c["name"] for c in clusters]), max_size=2, unique=True))
    workloads = [
        {
            "name": "tuner",
            "apis": ["flowcontrol.apiserver.k8s.io/v1beta3/FlowSchema"],
            "placement": {
                "clusters": hosts,
                "clusterAffinity": {"matchLabels": {"env": draw(st.sampled_from(ENVS))}},
                "maxClusters": 1,
            },
        }
    ]
    return {"availableVersions": VERSIONS, "clusters": clusters, "workloads": workloads}


@st.composite
def strategies(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "calibrator.dev/v1alpha1", "kind": "CalibrationStrategy"}
    soak = st.sampled_from([0, "30m", "1h"])
    if draw(st.booleans()):
        doc["canary"] = {
            "selector": {"matchLabels": {CANARY: "true"}},
            "maxClusters": draw(st.integers(1, 2)),
            "soak": draw(soak),
            "approvalAfter": draw(st.booleans()),
        }
    else:
        doc["canary"] = None
    names = draw(st.lists(st.sampled_from(ENVS), min_size=1, max_size=3, unique=True))
    doc["stages"] = [
        {
            "name": name,
            **({"selector": {"matchLabels": {"env": name}}} if draw(st.booleans()) else {}),
            **(
                {
                    "groups": [
                        {"name": f"zone-{z}", "selector": {"matchLabels": {"zone": z}}}
                        for z in ZONES
                    ]
                }
                if draw(st.booleans())
                else {}
            ),
            "maxConcurrency": draw(st.integers(1, 3)),
            "soak": draw(soak),
            "approval": draw(st.booleans()),
        }
        for name in names
    ]
    if draw(st.booleans()):
        doc["maintenanceWindows"] = [
            {
                "selector": {"matchLabels": {"env": draw(st.sampled_from(ENVS))}},
                "days": ["Sat", "Sun"],
                "start": "02:00",
                "duration": "4h",
            }
        ]
    doc["maxFailures"] = draw(st.integers(0, 2))
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), strategies(), st.sampled_from(VERSIONS[-2:]))
def test_plan_json_equals_what_the_workflow_runs(
    fleet: dict[str, Any], strategy_doc: dict[str, Any], target: str
) -> None:
    snapshot = snapshot_from_mapping(fleet)
    target_version = KubeVersion.parse(target)
    if any(target_version < c.control_plane.version for c in snapshot.clusters):
        return  # a downgrade is bad input for both paths
    # The CLI path: the strategy file as YAML, parsed like `calibrator plan --strategy F`.
    domain = plan_calibration(snapshot, target_version, load_strategy(yaml.safe_dump(strategy_doc)))
    preview = plan_to_json(domain)
    checked = findings_to_json(domain)
    stored = plan_from_input(PlanInput("cal", target, fleet, strategy_doc))
    run = decode_plan(encode_plan(stored)[1])  # what the activities read back
    assert run == stored
    assert run.plan == replace(domain, findings=())
    plan, rollout = run.plan, run.plan.rollout

    assert preview["target"] == str(plan.target)
    assert preview["approvalGates"] == [s.name for s in rollout.stages if s.approval]
    assert preview["maxFailures"] == rollout.max_failures == strategy_doc["maxFailures"]
    assert [
        (
            s["name"],
            [g["name"] for g in s["groups"]],
            [w for g in s["groups"] for w in g["waves"]],
            s["maxConcurrency"],
            s["soak"],
            s["approval"],
        )
        for s in preview["stages"]  # type: ignore[attr-defined]
    ] == [
        (
            s.name,
            [g.name for g in s.groups],
            [list(w) for g in s.groups for w in g.waves],
            s.max_concurrency,
            format_duration(s.soak_seconds),
            s.approval,
        )
        for s in rollout.stages
    ]
    assert preview["waves"] == [list(w) for s in rollout.stages for w in s.waves()]
    assert preview["unassigned"] == list(rollout.unassigned)
    assert [c["name"] for c in preview["clusters"]] == [  # type: ignore[attr-defined]
        c.cluster for c in plan.clusters
    ]
    stage_of = {n: s.name for s in rollout.stages for n in s.clusters}
    for shown in preview["clusters"]:  # type: ignore[attr-defined]
        cluster_run = run.cluster(shown["name"])
        planned = cluster_run.plan
        assert shown["stage"] == stage_of.get(planned.cluster)
        assert shown["blocked"] == planned.blocked
        assert shown["reasons"] == list(planned.reasons)
        assert shown["controlPlane"]["from"] == str(planned.control_plane_from)
        assert shown["workers"]["from"] == (
            None if planned.workers_from is None else str(planned.workers_from)
        )
        assert [
            (
                o["component"],
                o["from"],
                o["version"],
                o["machineDeployments"],
                o["machineDeploymentsFrom"],
            )
            for o in shown["order"]
        ] == [
            (
                s.component,
                str(s.from_version),
                str(s.version),
                [n for n, _ in s.pools_from],
                {n: str(v) for n, v in s.pools_from},
            )
            for s in planned.steps
        ]
        steps = cluster_run.run_steps()
        assert [s.step_id for s in steps] == list(planned.step_ids("cal"))
        assert [s.index for s in steps] == list(range(len(planned.steps)))
        # The pools the run's preflight expects are the snapshot's, untouched by planning.
        cluster = snapshot.cluster(planned.cluster)
        assert [(n, str(v)) for n, v in planned.pools_from] == [
            (md.name, str(md.version)) for md in cluster.machine_deployments
        ]
        assert planned.topology == cluster.topology
        window = None if cluster_run.window is None else cluster_run.window.describe()
        assert shown["maintenanceWindow"] == window
        assert cluster_run.on_observed_usage == rollout.observed_usage
    actions: dict[str, int] = {}
    for f in checked["findings"]:  # type: ignore[attr-defined]
        actions[f["action"]] = actions.get(f["action"], 0) + 1
    assert run.finding_actions == dict(sorted(actions.items())) == domain.finding_actions()
    # A "block" verdict is the run's block: the cluster carries it, with the preview's reason.
    for f in checked["findings"]:  # type: ignore[attr-defined]
        if f["action"] == "block":
            assert run.cluster(f["cluster"]).plan.blocked
