"""The preview is the run: `calibrator plan -o json` and the workflow's FleetPlan agree.

Both come from ``plan_calibration``; the workflow payload is produced by ``fleet_plan`` in the plan
activity. Before the domain rollout owned the approval gates, the conversion added the canary's
``approvalAfter`` gate on its own and the preview did not show it. This property runs both paths
on generated fleets and strategies and compares everything the run obeys: gates, stage order,
waves, concurrency, soak, windows, per-cluster steps and blocks.
"""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.domain.durations import format_duration
from orchestrator.domain.snapshot import snapshot_from_mapping
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import load_strategy
from orchestrator.planning import plan_calibration, plan_to_json
from workflows.activities import plan_from_input
from workflows.model import PlanInput

VERSIONS = ["v1.31.13", "v1.32.9", "v1.33.5", "v1.34.2", "v1.35.0"]
ENVS = ["dev", "staging", "prod"]
CANARY = "calibrator.dev/canary"


@st.composite
def fleets(draw: st.DrawFn) -> dict[str, Any]:
    clusters = []
    for i in range(draw(st.integers(1, 7))):
        cp = draw(st.integers(0, len(VERSIONS) - 1))
        workers = draw(st.integers(max(0, cp - 3), cp))
        labels = {"env": draw(st.sampled_from(ENVS))}
        if draw(st.booleans()):
            labels[CANARY] = "true"
        clusters.append(
            {
                "name": f"c{i}",
                "labels": labels,
                "controlPlane": {"version": VERSIONS[cp]},
                "machineDeployments": [{"name": "md-0", "version": VERSIONS[workers]}],
            }
        )
    return {"availableVersions": VERSIONS, "clusters": clusters}


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
    preview = plan_to_json(
        plan_calibration(snapshot, target_version, load_strategy(yaml.safe_dump(strategy_doc)))
    )
    run = plan_from_input(PlanInput("cal", target, fleet, strategy_doc))

    assert preview["approvalGates"] == [s.name for s in run.stages if s.approval]
    assert preview["maxFailures"] == run.max_failures == strategy_doc["maxFailures"]
    assert [
        (s["name"], [w for g in s["groups"] for w in g["waves"]], s["maxConcurrency"], s["soak"])
        for s in preview["stages"]  # type: ignore[attr-defined]
    ] == [
        (
            s.name,
            [list(w) for g in s.groups for w in g.waves],
            s.max_concurrency,
            format_duration(s.soak_seconds),
        )
        for s in run.stages
    ]
    assert preview["waves"] == [list(w) for s in run.stages for w in s.waves]
    assert preview["unassigned"] == list(run.unassigned)
    for shown in preview["clusters"]:  # type: ignore[attr-defined]
        planned = run.cluster(shown["name"])
        assert shown["blocked"] == planned.blocked
        assert shown["reasons"] == list(planned.reasons)
        assert [
            (o["component"], o["from"], o["version"], o["machineDeployments"])
            for o in shown["order"]
        ] == [
            (s.component, s.from_version, s.version, [p.name for p in s.pools])
            for s in planned.steps
        ]
        window = None if planned.window is None else planned.window.description
        assert shown["maintenanceWindow"] == window
