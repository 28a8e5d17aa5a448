"""The plan payload is the domain plan: old JSON still decodes.

Before issue 10 §3 the payload had look-alike classes (``StagePlan``, ``GroupPlan``,
``WindowPlan``); histories and stored plans written then hold their JSON. A stage then carried its
``waves`` (now ``Stage.waves()``, derived from the groups) and a window its ``description`` (now
``MaintenanceWindow.describe()``) and no selector. Both extras are ignored when decoding, and the
missing selector takes its default, so a running calibration reads what it stored and replays
what it recorded.

Before issue 30 the plan itself was copied too (``FleetPlan``, ``ClusterUpgradePlan``,
``StepPlan``, ``PoolVersion``, versions as text). ``workflows.payloads`` rewrites those documents
into today's ``CalibrationRun`` / ``ClusterRun`` (``LEGACY_SHAPES``) before decoding them.
"""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload

from orchestrator.domain.selectors import LabelSelector, Requirement
from orchestrator.domain.upgradeplan import ClusterPlan, PlanStep
from orchestrator.domain.versions import KubeVersion
from orchestrator.domain.waves import Group, MaintenanceWindow, Stage
from orchestrator.kube.backend.port import ClusterRef
from workflows.activities.plan_payload import decode_plan, encode_plan, plan_from_input
from workflows.model import ClusterRun, ClusterUpgradeInput, PatchWorkersInput, PlanInput
from workflows.payloads import DATA_CONVERTER, StrictPayloadConverter

V = KubeVersion.parse

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


def test_an_old_cluster_plan_decodes_as_the_domain_plan_with_its_run() -> None:
    (run,) = DATA_CONVERTER.payload_converter.from_payloads(
        [_payload(OLD_CLUSTER_PLAN)], [ClusterRun]
    )
    assert run.window == MaintenanceWindow((5, 6), 120, 14400)
    assert run.window.describe() == OLD_WINDOW["description"]
    assert run.cluster == ClusterRef("alpha", "fleet")
    assert run.step_ids == ("cal/alpha/00-controlPlane-v1.32.9",)
    assert run.plan == ClusterPlan(
        cluster="alpha",
        target=V("v1.32.9"),
        control_plane_from=V("v1.31.13"),
        control_plane_steps=(V("v1.32.9"),),
        workers_from=V("v1.31.13"),
        worker_steps=(),
        steps=(PlanStep("controlPlane", V("v1.32.9"), V("v1.31.13")),),
        pools_from=(("md-0", V("v1.31.13")),),
    )
    # The ids it carried are the ones the domain plan gives: the run is unchanged.
    assert run.plan.step_ids("cal") == run.step_ids
    assert (run.on_observed_usage, run.on_disruption_blocker) == ("block", "block")


def test_an_old_worker_step_keeps_its_pools_and_their_from_versions() -> None:
    step = {
        "component": "workers",
        "from_version": "v1.31.13",
        "index": 0,
        "pools": [{"name": "md-0", "version": "v1.31.13"}, {"name": "md-1", "version": "v1.30.14"}],
        "step_id": "cal/alpha/00-workers-v1.32.9",
        "version": "v1.32.9",
    }
    (run,) = DATA_CONVERTER.payload_converter.from_payloads(
        [_payload({**OLD_CLUSTER_PLAN, "steps": [step]})], [ClusterRun]
    )
    (planned,) = run.plan.steps
    assert planned.pools == ("md-0", "md-1")
    assert planned.pools_from == (("md-0", V("v1.31.13")), ("md-1", V("v1.30.14")))
    assert run.plan.worker_steps == (V("v1.32.9"),) and run.plan.control_plane_steps == ()


def test_old_activity_inputs_with_pool_objects_decode() -> None:
    old = {
        "step_id": "s",
        "cluster": {"name": "alpha", "namespace": ""},
        "to_version": "v1.32.9",
        "pools": [{"name": "md-0", "version": "v1.31.13"}],
    }
    (value,) = DATA_CONVERTER.payload_converter.from_payloads([_payload(old)], [PatchWorkersInput])
    assert value.pools == (("md-0", V("v1.31.13")),)


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
    assert value.plan.plan.cluster == "alpha"


def test_an_old_stored_plan_decodes_with_domain_stages() -> None:
    plan = decode_plan(json.dumps(OLD_FLEET_PLAN).encode())
    (stage,) = plan.plan.rollout.stages
    assert stage == Stage("prod", (Group("g", (("alpha",), ("beta",))),), 1, 60, True)
    assert stage.waves() == (("alpha",), ("beta",))
    assert plan.plan.rollout.max_failures == 1
    assert plan.plan.target == V("v1.33.5")
    # Each cluster reads back as the child read it from the old plan.
    (old_child,) = DATA_CONVERTER.payload_converter.from_payloads(
        [_payload(OLD_CLUSTER_PLAN)], [ClusterRun]
    )
    assert plan.cluster("alpha") == old_child


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
    assert json.loads(encode_plan(plan)[1])["plan"]["target"] == "v1.33.5"  # a version is text
    assert window == MaintenanceWindow(
        (5,),
        90,
        7200,
        LabelSelector((("env", "prod"),), (Requirement("env", "In", ("prod",)),)),
    )
    assert plan.cluster("b").window is None
    _, data = encode_plan(plan)
    assert decode_plan(data) == plan
