"""The plan payload is the domain plan's stages and windows: old JSON still decodes.

Before issue 10 §3 the payload had look-alike classes (``StagePlan``, ``GroupPlan``,
``WindowPlan``); histories and stored plans written then hold their JSON. A stage then carried its
``waves`` (now ``Stage.waves()``, derived from the groups) and a window its ``description`` (now
``MaintenanceWindow.describe()``) and no selector. Both extras are ignored when decoding, and the
missing selector takes its default, so a running calibration reads what it stored and replays
what it recorded.
"""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload
from temporalio.converter import DataConverter

from orchestrator.domain.selectors import LabelSelector, Requirement
from orchestrator.domain.waves import Group, MaintenanceWindow, Stage
from workflows.activities.plan_payload import decode_plan, encode_plan, plan_from_input
from workflows.model import ClusterUpgradeInput, ClusterUpgradePlan, PlanInput
from workflows.payloads import StrictPayloadConverter

OLD_WINDOW = {
    "days": [5, 6],
    "start_minute": 120,
    "duration_seconds": 14400,
    "description": "Sat,Sun 02:00 UTC for 4h",
}
OLD_CLUSTER_PLAN = {
    "blocked": False,
    "cluster": {"name": "alpha", "namespace": "fleet"},
    "control_plane_from": "v1.31.13",
    "pools": [{"name": "md-0", "version": "v1.31.13"}],
    "reasons": [],
    "steps": [
        {
            "component": "controlPlane",
            "from_version": "v1.31.13",
            "index": 0,
            "pools": [],
            "step_id": "cal/alpha/00-controlPlane-v1.32.9",
            "version": "v1.32.9",
        }
    ],
    "topology": True,
    "window": OLD_WINDOW,
    "workers_from": "v1.31.13",
}
OLD_FLEET_PLAN = {
    "calibration_id": "cal",
    "clusters": [OLD_CLUSTER_PLAN],
    "findings": [],
    "max_failures": 1,
    "stages": [
        {
            "approval": True,
            "groups": [{"name": "g", "waves": [["alpha"], ["beta"]]}],
            "max_concurrency": 1,
            "name": "prod",
            "soak_seconds": 60,
            "waves": [["alpha"], ["beta"]],
        }
    ],
    "target": "v1.33.5",
    "unassigned": [],
}


def _payload(document: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(document).encode())


def test_an_old_cluster_plan_decodes_with_its_window_as_the_domain_window() -> None:
    (plan,) = DataConverter.default.payload_converter.from_payloads(
        [_payload(OLD_CLUSTER_PLAN)], [ClusterUpgradePlan]
    )
    assert plan.window == MaintenanceWindow((5, 6), 120, 14400)
    assert plan.window.describe() == OLD_WINDOW["description"]
    assert plan.steps[0].step_id == "cal/alpha/00-controlPlane-v1.32.9"


def test_an_old_child_input_with_an_inline_plan_passes_strict_decoding() -> None:
    document = {
        "calibration_id": "cal",
        "target": "v1.33.5",
        "stage": "prod",
        "plan": OLD_CLUSTER_PLAN,
    }
    (value,) = StrictPayloadConverter().from_payloads([_payload(document)], [ClusterUpgradeInput])
    assert value.plan is not None and value.plan.window is not None
    assert value.plan.window.describe() == OLD_WINDOW["description"]


def test_an_old_stored_plan_decodes_with_domain_stages() -> None:
    plan = decode_plan(json.dumps(OLD_FLEET_PLAN).encode())
    (stage,) = plan.stages
    assert stage == Stage("prod", (Group("g", (("alpha",), ("beta",))),), 1, 60, True)
    assert stage.waves() == (("alpha",), ("beta",))


def test_a_stored_plan_round_trips_with_windows_and_their_selectors() -> None:
    fleet = {
        "availableVersions": ["v1.32.9", "v1.33.5"],
        "clusters": [
            {
                "name": n,
                "labels": {"env": env},
                "controlPlane": {"version": "v1.32.9"},
                "machineDeployments": [{"name": "md-0", "version": "v1.32.9"}],
            }
            for n, env in (("a", "prod"), ("b", "dev"))
        ],
    }
    strategy = {
        "stages": [{"name": "all", "maxConcurrency": 2}],
        "maintenanceWindows": [
            {
                "selector": {
                    "matchLabels": {"env": "prod"},
                    "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}],
                },
                "days": ["Sat"],
                "start": "01:30",
                "duration": "2h",
            }
        ],
    }
    plan = plan_from_input(PlanInput("cal", "v1.33.5", fleet, strategy))
    window = plan.cluster("a").window
    assert window == MaintenanceWindow(
        (5,),
        90,
        7200,
        LabelSelector((("env", "prod"),), (Requirement("env", "In", ("prod",)),)),
    )
    assert plan.cluster("b").window is None
    _, data = encode_plan(plan)
    assert decode_plan(data) == plan
